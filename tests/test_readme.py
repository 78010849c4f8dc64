"""The README's Python examples run as written: the front door must not lie."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pybb
from storekit import REPO


def test_every_python_block_in_the_readme_runs() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


# -- the README's shell commands ---------------------------------------------------------------

# Commands that are not cheap or need another machine, and why they are not run here:
# installing (the test runs this checkout), the whole suite (it is running), linters and
# benchmarks (CI runs them), and the scale-out block (a PostgreSQL server named db-host).
_NOT_RUN = ("pip install", "pytest", "ruff ", ".ci/", "bench/", "db-host")
# Serving commands run until Ctrl-C; each is started, waited for, and stopped.
_SERVING = {"--inbox": "Ctrl-C to stop", "inbox": "pybb inbox for run"}


def readme_commands() -> list[list[str]]:
    """The ``pybb`` commands of the README's bash blocks, in order, as words."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:1] == ["pybb"] and not any(n in part for n in _NOT_RUN):
                    commands.append(words)
    return commands


def test_the_readme_shell_commands_work_literally_top_to_bottom(tmp_path: Path) -> None:
    commands = readme_commands()
    assert commands[0] == ["pybb", "attest", "--demo", "200"]
    assert any("--inbox" in words for words in commands)
    env = {**os.environ, "PYTHONPATH": str(Path(pybb.__file__).resolve().parents[1])}
    for words in commands:
        serving = "--inbox" in words or words[1] == "inbox"
        # The one change: any free port, so the test never collides with a real inbox.
        argv = [sys.executable, "-m", *words]
        if serving:
            argv += ["--inbox-port", "0"] if words[1] == "attest" else ["--port", "0"]
        if not serving:
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
            assert done.returncode == 0, (words, done.stderr[-2000:])
            continue
        marker = _SERVING["--inbox" if words[1] == "attest" else "inbox"]
        child = subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        try:
            assert child.stdout is not None
            seen = []
            for line in child.stdout:  # until the marker (EOF ends the loop if it died)
                seen.append(line)
                if marker in line:
                    break
            assert any(marker in line for line in seen), (words, "".join(seen)[-2000:])
            child.send_signal(signal.SIGINT)
            rest, _ = child.communicate(timeout=120)
            assert child.returncode == 0, (words, ("".join(seen) + rest)[-2000:])
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()

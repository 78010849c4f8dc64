"""Running the real ``pybb`` command in a subprocess, as an operator does, and what to check.

The child imports the checkout under test (``PYTHONPATH`` set to the ``src`` folder
``pybb`` was imported from here), and every failure a test provokes must be one line
without a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import selectors
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import pybb

SRC = Path(pybb.__file__).resolve().parents[1]


def environment(**extra: str) -> dict[str, str]:
    """The child's environment: this checkout first, no colour, no terminal tricks."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYBB_INBOX_TOKEN")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def pybb_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pybb", *args]


def run(
    *args: str,
    cwd: Path,
    timeout: float = 180,
    check: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``pybb ARGS`` to its end; ``check``: the exit status it must have; ``env``: more."""
    done = subprocess.run(
        pybb_command(*args),
        cwd=cwd,
        env=environment(**(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    return done


def refused(done: subprocess.CompletedProcess[str], *fragments: str, status: int = 2) -> str:
    """Assert ``done`` failed with ``status`` and one sentence holding ``fragments``."""
    text = done.stdout + done.stderr
    assert done.returncode == status, (done.returncode, text[-3000:])
    assert "Traceback" not in text, text[-3000:]
    for fragment in fragments:
        assert fragment in text, (fragment, text[-3000:])
    return text


def store_digest(path: Path, *, lease: bool = True) -> str:
    """The content of a SQLite file (every row of every table), or its bytes if it is none.

    Content, not bytes: opening a WAL database may checkpoint it, which moves bytes
    without changing a row. ``lease=False`` leaves out the controller's lease row (its
    fencing token counts every ``pybb attest`` that held the board, even one that only
    re-read it; it is not the board's content).
    """
    if not path.exists():
        return "absent"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            dump = "\n".join(
                line for line in conn.iterdump() if lease or "'@controller'" not in line
            )
        finally:
            conn.close()
    except sqlite3.Error:
        return "bytes:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return hashlib.sha256(dump.encode()).hexdigest()


def devices_of(report: Path | str) -> list[dict[str, Any]]:
    """A report's per-device outcomes, the part that must not depend on how the run went."""
    data = json.loads(Path(report).read_text() if isinstance(report, Path) else report)
    return [
        {k: d[k] for k in ("device", "outcome", "tier", "reason", "correct")}
        for d in data["devices"]
    ]


class Child:
    """A running ``pybb`` command whose stderr (and stdout) lines are read as they come."""

    def __init__(self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            pybb_command(*args),
            cwd=cwd,
            env=environment(**(env or {})),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self._selector = selectors.DefaultSelector()
        assert self.process.stdout is not None and self.process.stderr is not None
        for stream in (self.process.stdout, self.process.stderr):
            os.set_blocking(stream.fileno(), False)
            self._selector.register(stream, selectors.EVENT_READ)

    def wait_for(self, fragment: str, timeout: float = 120) -> str:
        """Read lines until one matches the regular expression ``fragment``; return it."""
        deadline = time.monotonic() + timeout
        pattern = re.compile(fragment)
        for line in self.lines:
            if pattern.search(line):
                return line
        while time.monotonic() < deadline:
            for key, _ in self._selector.select(timeout=0.2):
                chunk = key.fileobj.read()  # type: ignore[union-attr]
                if chunk:
                    self.lines.extend(chunk.splitlines())
            for line in self.lines:
                if pattern.search(line):
                    return line
            if self.process.poll() is not None and not self._selector.select(timeout=0):
                break
        pytest.fail(f"{fragment!r} never came; got {self.lines[-20:]}")

    def finish(self, timeout: float = 180) -> tuple[int, str]:
        """Wait for the end; the exit status and everything it printed."""
        self.process.wait(timeout=timeout)
        if self._selector.get_map() is not None:
            for key in list(self._selector.get_map().values()):
                with contextlib.suppress(TypeError, ValueError):
                    rest = key.fileobj.read()  # type: ignore[union-attr]
                    if rest:
                        self.lines.extend(rest.splitlines())
            self._selector.close()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode, "\n".join(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(Exception):
            self.finish(timeout=30)


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A real small file system at ``folder`` (skips without the right to mount, except in CI)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"mount tmpfs must work in CI: {done.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)

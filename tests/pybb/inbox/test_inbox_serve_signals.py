"""``pybb inbox`` stops cleanly on Ctrl-C or SIGTERM, however soon after it says it serves.

The URL line is printed before uvicorn has installed its signal handlers. A Ctrl-C in
that window used to raise KeyboardInterrupt wherever the main thread was; once (in CI)
inside a lock's release, which the command reported as a bug (exit 3). SIGTERM went to
uvicorn, which re-raised it after its shutdown, so the process died of it. Now the server
owns both signals from before the line is printed: each only asks it to stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import pybb

_SRC = str(Path(pybb.__file__).resolve().parents[1])
_MARKER = "pybb inbox for run"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("serve-signals")
    url = f"sqlite:///{folder / 'run.db'}"
    # A run with a human loop, as the README makes one: attest with --inbox, then stop it.
    child = subprocess.Popen(
        [sys.executable, "-m", "pybb", "attest", "--demo", "20", "--inbox", "--inbox-port",
         "0", "--store", url, "--board-id", "signals", "--report", str(folder / "r.json")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    seen = []
    for line in child.stdout:
        seen.append(line)
        if "Ctrl-C to stop" in line:
            child.send_signal(signal.SIGINT)
            break
    rest, _ = child.communicate(timeout=120)
    assert child.returncode == 0, ("".join(seen) + rest)[-2000:]
    return url


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": _SRC}


def _serve_then(store: str, sig: signal.Signals) -> tuple[int, str]:
    """Start ``pybb inbox``; send ``sig`` the moment its URL line appears."""
    child = subprocess.Popen(
        [sys.executable, "-m", "pybb", "inbox", "--store", store, "--board-id", "signals",
         "--port", "0"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    seen = []
    for line in child.stdout:  # EOF ends the loop if it died first
        seen.append(line)
        if _MARKER in line:
            child.send_signal(sig)
            break
    rest, _ = child.communicate(timeout=60)
    return child.returncode, "".join(seen) + rest


@pytest.mark.parametrize("attempt", range(4))
def test_ctrl_c_right_after_the_url_stops_it_cleanly(store: str, attempt: int) -> None:
    code, output = _serve_then(store, signal.SIGINT)
    assert code == 0, output[-2000:]
    assert _MARKER in output and "pybb inbox: stopped" in output


def test_sigterm_stops_it_cleanly_too(store: str) -> None:
    code, output = _serve_then(store, signal.SIGTERM)
    assert code == 0, output[-2000:]
    assert "pybb inbox: stopped" in output

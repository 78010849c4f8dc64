"""bench/buddhi_items.py runs at its smallest sizes, the durable run skipped or tiny."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "buddhi_items.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    src = str(BENCH.parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(BENCH), "--items", "50", "--repeat", "1", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("durable", "expected"), [("0", "skipped"), ("10", "items/s  (")])
def test_the_benchmark_runs_with_no_or_few_durable_items(durable: str, expected: str) -> None:
    done = _run("--durable-items", durable)
    assert done.returncode == 0, done.stderr
    assert "evaluate_item (BoardStore, SQLite" in done.stdout
    assert expected in done.stdout

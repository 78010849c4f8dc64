"""Resume after SIGKILL: ``pybb attest`` killed at random times, restarted, gives the same report.

The child is the real command line (``attest_child.py`` wraps ``pybb.cli.main``) on a
SQLite board, attesting a 300-device demo fleet in chunks of 10. The parent kills it
with SIGKILL at a uniformly random time of the undisturbed run, checks the board file
with plain ``sqlite3``, and starts it again on the same ``--store`` until it exits 0;
the JSON report must equal the undisturbed run's. A deterministic kill point (right
after a chunk's entries are committed, before the controller runs them) is checked the
same way, and its negative control — a resume that does not finish what the killed
run left on the board — must be caught.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from storekit import sized

CHILD = Path(__file__).with_name("attest_child.py")
DEVICES = 300
SEQUENCES = sized(5, 40)
KILLS_PER_SEQUENCE = sized(4, 6)


def start(db: Path, report: Path, **env: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        str(CHILD),
        "attest",
        "--demo",
        str(DEVICES),
        "--seed",
        "7",
        "--store",
        f"sqlite:///{db}",
        "--report",
        str(report),
        "--chunk",
        "10",
        "--no-progress",
    ]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        cwd=db.parent,
    )


def comparable(report: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(report.read_text())
    del data["store"]
    return data


def board_problems(db: Path) -> list[str]:
    if not db.exists():
        return []
    with closing(sqlite3.connect(db)) as conn:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        if "bb_records" not in tables:
            return [] if check == "ok" else [f"integrity_check: {check}"]
        seqs = [s for (s,) in conn.execute("SELECT seq FROM bb_records ORDER BY seq")]
        entries = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT json_extract(payload, '$.key')) FROM bb_records"
            " WHERE region = 'pybb.entries'"
        ).fetchone()
    problems = [] if check == "ok" else [f"integrity_check: {check}"]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append("sequence numbers are not 1..N")
    if entries[0] != entries[1]:
        problems.append(f"{entries[0]} entry records for {entries[1]} devices")
    return problems


def working(child: subprocess.Popen[bytes]) -> bytes:
    """Wait until the child has opened its board and starts attesting (its first line)."""
    assert child.stdout is not None
    return child.stdout.readline()


def reference(tmp_path: Path) -> tuple[dict[str, Any], float]:
    """The undisturbed run's report, and how long it attests (from its first line)."""
    db, report = tmp_path / "reference.db", tmp_path / "reference.json"
    child = start(db, report)
    assert working(child).startswith(b"attesting fleet")
    started = time.perf_counter()
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err.decode()
    return comparable(report), time.perf_counter() - started


def test_resume_after_sigkill_at_random_times_gives_the_same_report(tmp_path: Path) -> None:
    expected, seconds = reference(tmp_path)
    assert expected["accuracy"]["rate"] == 1.0
    rng = random.Random(20261129)
    kills = 0
    for sequence in range(SEQUENCES):
        db, report = tmp_path / f"run-{sequence}.db", tmp_path / f"run-{sequence}.json"
        for attempt in range(KILLS_PER_SEQUENCE + 10):
            child = start(db, report)
            if attempt < KILLS_PER_SEQUENCE:
                working(child)
                time.sleep(rng.uniform(0, seconds))
                child.send_signal(signal.SIGKILL)
            _, err = child.communicate(timeout=300)
            if child.returncode == -signal.SIGKILL:
                kills += 1
                assert board_problems(db) == []
                continue
            assert child.returncode == 0, err.decode()
            break
        assert comparable(report) == expected
        assert board_problems(db) == []
    assert kills >= SEQUENCES  # the kills landed (a run killed after it finished counts too)


def crash_and_resume(
    tmp_path: Path, name: str, after: int, **env: str
) -> tuple[int, dict[str, Any]]:
    db, report = tmp_path / f"{name}.db", tmp_path / f"{name}.json"
    crashed = start(db, report, ATTEST_CRASH_AFTER_WRITES=str(after))
    _, err = crashed.communicate(timeout=300)
    assert crashed.returncode == 137, err.decode()
    assert board_problems(db) == []
    resumed = start(db, report, **env)
    resumed.communicate(timeout=300)
    return resumed.returncode, comparable(report)


def test_a_kill_between_a_chunks_entries_and_its_run_resumes_and_the_control_is_caught(
    tmp_path: Path,
) -> None:
    expected, _ = reference(tmp_path)
    last = DEVICES // 10
    assert crash_and_resume(tmp_path, "early", 3) == (0, expected)
    assert crash_and_resume(tmp_path, "last", last) == (0, expected)
    # negative control: a resume that does not finish what the killed run left on the
    # board (here the whole last chunk) must be caught
    code, forgetful = crash_and_resume(tmp_path, "forgetful", last, ATTEST_FORGETFUL="1")
    assert code == 1 and forgetful != expected
    assert forgetful["summary"]["pending"] == 10

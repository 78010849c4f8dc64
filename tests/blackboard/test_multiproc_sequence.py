"""RA-04 ``multiproc_sequence``, SQLite part: many processes, one WAL file, one sequence.

Eight kernel processes each open their own model on one SQLite file (WAL) and write
level contributions as fast as they can; in the close-race trials a ninth process
closes the run at a random moment. Pass: sequence unique and gap-free with the head
counter equal to it, 0 acknowledged writes missing, nothing landed that its writer was
not told of, 0 errors surfaced other than RUN_CLOSED after the close, 0 writes admitted
after the close. Run with ``-rP`` to see the throughput lines.

Durability setting: the close-race trials run at the default ``synchronous=FULL``. The
full-size 8 x 5,000 run uses ``synchronous=NORMAL``: measured at FULL it took 11 s on an
idle 2-core machine but 100 s while other suites were fsyncing the same disk, which
breaks the PR budget; at NORMAL it takes about 4 s. What this test checks, gap-free
sequencing across processes, comes from BEGIN IMMEDIATE and is the same under both;
NORMAL in WAL mode still survives a process crash (only power loss differs), and the
durability of acknowledged writes is the SIGKILL test's job, which runs at FULL.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bb_reliability import (
    WorkerPool,
    WriterReport,
    go_at,
    open_model,
    run_violations,
    sqlite_board_violations,
    sqlite_rows,
)

from storekit import sized

WRITERS = 8
WRITES = sized(5_000, 5_000)
CLOSE_TRIALS = sized(12, 100)
CLOSE_WITHIN = 1.5  # seconds: the closer fires uniformly at random in [0, CLOSE_WITHIN]
# In the close race each writer writes until the close stops it; the cap only bounds a
# close that never lands. (5,000 was too few: SQLite's lock is not fair, and one writer
# of a fast kernel could finish them all before the close, escaping the race.)
UNTIL_CLOSED = 1_000_000


def _trial(
    pool: WorkerPool,
    path: Path,
    board: str,
    *,
    writes: int,
    close_after: float | None,
    variant: str = "real",
    synchronous: str = "FULL",
) -> tuple[list[str], dict[str, Any]]:
    """One run of the writers (and the closer); returns its violations and its figures."""
    url = f"sqlite:///{path}?synchronous={synchronous}"
    open_model("log", url, board).close()
    workers = WRITERS + (close_after is not None)
    opening = {"op": "open", "url": url, "board": board, "model": "log", "variant": variant}
    assert pool.call_all([opening] * workers) == [{"ok": True}] * workers
    start = go_at()
    commands: list[dict[str, Any]] = [
        {"op": "write", "go_at": start, "n": writes, "writer": f"p{n}", "level": "events"}
        for n in range(WRITERS)
    ]
    if close_after is not None:
        commands.append({"op": "abort", "go_at": start, "delay": close_after})
    replies = pool.call_all(commands)
    failed = [r["failed"] for r in replies if "failed" in r]
    assert not failed, failed
    reports = [WriterReport.from_json(r) for r in replies[:WRITERS]]
    close_seq = replies[WRITERS]["close_seq"] if close_after is not None else None
    rows, head = sqlite_rows(path, board)
    problems = run_violations(rows, head, reports, close_seq)
    seconds = max(r["elapsed"] for r in replies[:WRITERS])
    admitted = sum(len(r.acks) for r in reports)
    figures = {
        "admitted": admitted,
        "seconds": seconds,
        "per_second": admitted / seconds,
        "raced": sum(bool(r.closed) and len(r.acks) < writes for r in reports),
    }
    return problems, figures


def test_eight_processes_one_sqlite_file_gap_free(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    with WorkerPool(WRITERS, tmp_path) as pool:
        problems, figures = _trial(
            pool, path, "full", writes=WRITES, close_after=None, synchronous="NORMAL"
        )
    assert problems == []
    assert figures["admitted"] == WRITERS * WRITES
    assert sqlite_board_violations(path, "full") == []
    print(
        f"RA-04 SQLite WAL NORMAL: {WRITERS} processes x {WRITES} writes: "
        f"{figures['per_second']:.0f} admitted writes/s ({figures['seconds']:.1f} s)"
    )


def test_close_race_admits_nothing_after_the_close(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    rng = random.Random(4)
    failures: dict[int, list[str]] = {}
    admitted = 0
    with WorkerPool(WRITERS + 1, tmp_path) as pool:
        for trial in range(CLOSE_TRIALS):
            problems, figures = _trial(
                pool,
                path,
                f"race-{trial}",
                writes=UNTIL_CLOSED,
                close_after=rng.uniform(0, CLOSE_WITHIN),
            )
            admitted += figures["admitted"]
            problems += sqlite_board_violations(path, f"race-{trial}")
            if figures["raced"] != WRITERS:  # the close must land while every writer writes
                problems.append(f"only {figures['raced']} writers were cut off by the close")
            if problems:
                failures[trial] = problems[:5]
    assert failures == {}
    print(f"RA-04 close race: {CLOSE_TRIALS}/{CLOSE_TRIALS} trials clean, {admitted} writes")


def test_negative_control_sequence_taken_outside_the_transaction_is_caught(
    tmp_path: Path,
) -> None:
    """The same trial and checker over a store that takes numbers like a SEQUENCE does."""
    path = tmp_path / "board.db"
    rng = random.Random(5)
    caught: list[str] = []
    with WorkerPool(WRITERS + 1, tmp_path) as pool:
        for trial in range(5):
            problems, _ = _trial(
                pool,
                path,
                f"broken-{trial}",
                writes=WRITES,
                close_after=rng.uniform(0.1, 0.5),
                variant="sequence-first",
            )
            caught = [p for p in problems if "gaps" in p or "head" in p]
            if caught:
                print(f"negative control caught in trial {trial}: {caught}")
                break
    assert caught, "the sequence checker missed the gaps a SEQUENCE-style counter leaves"

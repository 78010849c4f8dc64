"""Issue 7's worker tests: W1 shared by worker processes through PostgreSQL.

* One worker and four give the same board: every entry went through the same steps
  (``pybb.testing.entries_digest``, blind to how workers interleaved) and W1 ends as
  it must.
* SIGKILL one of four workers mid-run: the others take its claims over once its lease
  lapses, the run completes with the same board, nothing is lost and no attempt is
  applied twice.
* No entry is worked by two live processes at once: every execution of a source is
  logged with the machine's monotonic clock, and no two processes' executions on one
  entry overlap. The negative control runs workers that take entries without claiming
  them; the same check must catch them.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workers_support import (
    HERE,
    PgRun,
    child_environment,
    duplicate_applications,
    finish,
    overlapping_work,
    pg_run,
    start_worker,
    w1_reference,
)

from pybb import Blackboard
from pybb.testing import entries_digest
from pybb.workloads import w1, w1_expected, w1_outcomes
from storekit import sized

__all__ = ["pg_run"]

pytestmark = pytest.mark.postgres

N = sized(400, 2000)
SLOW = "worker_apps:slow_w1"


def submit(url: str, board: str, n: int) -> None:
    """Write the run's entries, as its submitter does."""
    blackboard, _ = w1(n, url, board_id=board)
    blackboard.close()


def outcome(url: str, board: str) -> tuple[dict[str, int], str]:
    with Blackboard(url, board) as blackboard:
        return w1_outcomes(blackboard), entries_digest(blackboard)


def test_four_workers_leave_the_board_one_worker_leaves(pg_run: PgRun) -> None:
    reference = w1_reference(N)
    digests = {}
    for count in (1, 4):
        board = f"w1-{count}"
        submit(pg_run.url, board, N)
        workers = [start_worker(pg_run.url, board, "w1", name=f"{board}-{i}") for i in range(count)]
        lines = finish(workers)
        assert all("settled" in line for line in lines), lines
        outcomes, digests[count] = outcome(pg_run.url, board)
        assert outcomes == w1_expected(N)
        assert duplicate_applications(pg_run.rows(board)) == []
        assert all(holder is None for holder, _ in pg_run.claims(board).values())
    assert digests[1] == digests[4] == reference


def test_a_worker_killed_mid_run_is_taken_over_and_the_run_completes(
    pg_run: PgRun, tmp_path: Path
) -> None:
    board, ledger, lease = "w1-kill", tmp_path / "ledger.jsonl", 1.5
    submit(pg_run.url, board, N)
    options = {"ledger": str(ledger), "delay": "0.004"}
    workers = [
        start_worker(pg_run.url, board, SLOW, name=f"w{i}", lease=lease, options=options)
        for i in range(4)
    ]
    victim = workers[random.Random(7).randrange(4)]
    name = f"w{workers.index(victim)}"
    _wait_until_holding(pg_run, board, name)
    victim.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    victim.wait(timeout=30)
    # What the dead worker still held (it may have released some keys between the look
    # above and the kill); nobody can take these over before the lease runs out.
    held = dict(sorted((k, t) for k, (h, t) in pg_run.claims(board).items() if h == name))
    assert held, f"worker {name} released everything before it was killed; nothing to take over"
    # Which of them still had work: the dead worker may have settled some and died before
    # releasing them. Read within the lease, before anyone else may touch them.
    with Blackboard(pg_run.url, board) as seen:
        unfinished = sorted(k for k in held if seen._state.open_work(k))
    finish(workers)
    outcomes, digest = outcome(pg_run.url, board)
    assert outcomes == w1_expected(N)
    assert digest == w1_reference(N), "the run ended on another board than W1's"
    rows = pg_run.rows(board)
    assert duplicate_applications(rows) == []
    assert [row[0] for row in rows] == list(range(1, len(rows) + 1))
    after = pg_run.claims(board)
    taken_over = [key for key, token in held.items() if after[key][1] > token]
    assert set(unfinished) <= set(taken_over), "a killed worker's unfinished entries stayed"
    # What is left is only the dead worker's, on entries it had settled, and only if its
    # lease had not lapsed when the last worker ended (else that worker cleared them).
    left = {key: holder for key, (holder, _) in after.items() if holder is not None}
    assert all(h == name and k in held and k not in unfinished for k, h in left.items()), left
    assert overlapping_work(ledger, {victim.pid: killed_at}) == []


def _wait_until_holding(pg_run: PgRun, board: str, name: str) -> dict[str, int]:
    """Wait until the run is under way and ``name`` holds claims; its keys and tokens."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # a judged entry: its first verdict is in its dispatch (docs/adr/0026), later ones apart
        judged = ("pybb.dispatches", "pybb.verdicts")
        settled = sum(1 for row in pg_run.rows(board) if row[1] in judged)
        held = {k: t for k, (h, t) in pg_run.claims(board).items() if h == name}
        if held and settled >= N // 3:
            return dict(sorted(held.items()))
        time.sleep(0.01)
    raise AssertionError(f"worker {name} never held a claim mid-run")


def test_no_entry_is_worked_by_two_processes_at_once(pg_run: PgRun, tmp_path: Path) -> None:
    board, ledger = "w1-history", tmp_path / "ledger.jsonl"
    submit(pg_run.url, board, N)
    options = {"ledger": str(ledger), "delay": "0.004"}
    workers = [
        start_worker(pg_run.url, board, SLOW, name=f"h{i}", lease=5, options=options)
        for i in range(4)
    ]
    finish(workers)
    assert overlapping_work(ledger) == []
    pids = {line.split('"pid": ')[1].split(",")[0] for line in ledger.read_text().splitlines()}
    assert len(pids) == 4, "not every worker worked: the check proves little"


def test_negative_control_workers_that_do_not_claim_are_caught(
    pg_run: PgRun, tmp_path: Path
) -> None:
    board, ledger = "w1-greedy", tmp_path / "ledger.jsonl"
    submit(pg_run.url, board, N // 4)
    command = [sys.executable, str(HERE / "worker_child.py"), pg_run.url, board, str(ledger)]
    greedy = [
        subprocess.Popen(command, stderr=subprocess.PIPE, env=child_environment()) for _ in range(4)
    ]
    for process in greedy:
        process.communicate(timeout=180)
    assert overlapping_work(ledger), "entries worked twice at once went unnoticed"

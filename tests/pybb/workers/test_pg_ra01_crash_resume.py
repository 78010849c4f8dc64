"""RA-01 ``crash_resume_kill9`` on PostgreSQL: SIGKILL the controller at random times.

The harness of ``tests/pybb/test_pybb_ra01_crash_resume.py`` (the same child workload,
the same checks) on a PostgreSQL board: the child runs the repair run, printing
``ACK <head>`` after each committed cycle; the parent SIGKILLs it at a uniformly random
moment of the run, reads the board with plain psycopg, and restarts it until ``DONE``.
After every kill: sequence numbers ``1..N`` and the head counter N; no acknowledged write
missing; the board a prefix of the undisturbed reference run ending on one of its cycle
boundaries; every idempotency key and every (entry, source, attempt) once. At the end
the digest equals the reference's. Negative controls: acknowledging before the commit,
and a resume that forgets the attempts on the board, must both be caught.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from workers_support import HERE, PgRun, child_environment, pg_run

from storekit import sized

__all__ = ["pg_run"]

pytestmark = pytest.mark.postgres

KILLS = sized(50, 500)
CHILD = HERE / "pg_child.py"


@dataclass
class Reference:
    digest: str
    rows: list[tuple[object, ...]]
    boundaries: set[int]
    seconds: float


@dataclass
class Outcome:
    kills: int = 0
    digest: str | None = None
    violations: list[str] = field(default_factory=list)


def start(url: str, board: str, variant: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(CHILD), url, board, "--variant", variant]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_environment()
    )


def acks_and_done(out: bytes) -> tuple[list[int], str | None]:
    acks, done = [], None
    for line in out.decode().splitlines():
        if line.startswith("ACK "):
            acks.append(int(line[4:]))
        elif line.startswith("DONE "):
            done = line[5:]
    return acks, done


def board_rows(pg: PgRun, board: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """The records, read with plain psycopg, and what is wrong with the board's bookkeeping."""
    problems: list[str] = []
    with pg.connect() as conn, conn.transaction():
        # One snapshot for records and head: the killed child's last COMMIT, if it was
        # already on the wire, may land while this reads (the server finishes it alone).
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if conn.execute("SELECT to_regclass('bb_records')").fetchone() == (None,):
            return problems, []  # killed before the schema was created
        rows = conn.execute(
            "SELECT seq, kind, region, writer, payload, ikey FROM bb_records"
            " WHERE board_id = %s ORDER BY seq",
            (board,),
        ).fetchall()
        head = conn.execute("SELECT head FROM bb_boards WHERE board_id = %s", (board,)).fetchone()
    if [row[0] for row in rows] != list(range(1, len(rows) + 1)):
        problems.append("sequence numbers are not 1..N")
    if head is not None and head[0] != len(rows):
        problems.append(f"head counter {head[0]} != {len(rows)} records")
    return problems, [tuple(row) for row in rows]


def violations(pg: PgRun, board: str, acked: list[int], reference: Reference) -> list[str]:
    problems, rows = board_rows(pg, board)
    n = len(rows)
    if acked and max(acked) > n:
        problems.append(f"acknowledged write {max(acked)} missing: the board ends at {n}")
    keys = Counter(row[5] for row in rows if row[5] is not None)
    problems += [f"idempotency key {k} applied {c} times" for k, c in keys.items() if c > 1]
    attempts = Counter(
        (p["key"], p["source"], p["attempt"])
        for p in (json.loads(str(row[4])) for row in rows if row[2] == "pybb.attempts")
    )
    problems += [f"attempt {a} applied {c} times" for a, c in attempts.items() if c > 1]
    if [row[:5] for row in rows] != [row[:5] for row in reference.rows[:n]]:
        problems.append("the board is not a prefix of the reference run")
    if n and n not in reference.boundaries:
        problems.append(f"the board ends at {n}, inside a cycle's transaction")
    return problems


def crash_run(
    pg: PgRun, board: str, reference: Reference, rng: random.Random, kills: int, variant: str
) -> Outcome:
    outcome = Outcome()
    for _ in range(kills * 3 + 10):
        child = start(pg.url, board, variant)
        assert child.stdout is not None
        ready = child.stdout.readline()  # Python is up and pybb imported
        if outcome.kills < kills:
            time.sleep(rng.uniform(0, reference.seconds))
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=120)
        acks, done = acks_and_done(ready + out)
        if child.returncode == -signal.SIGKILL:
            outcome.kills += 1
            outcome.violations += violations(pg, board, acks, reference)
            continue
        assert child.returncode == 0, err.decode()
        outcome.digest = done
        outcome.violations += violations(pg, board, acks, reference)
        return outcome
    raise AssertionError("the run never completed")


def reference_run(pg: PgRun) -> Reference:
    child = start(pg.url, "reference", "real")
    assert child.stdout is not None
    child.stdout.readline()
    started = time.monotonic()
    out, err = child.communicate(timeout=120)
    seconds = time.monotonic() - started
    assert child.returncode == 0, err.decode()
    acks, done = acks_and_done(out)
    assert done is not None
    problems, rows = board_rows(pg, "reference")
    assert problems == []
    regions = Counter(row[2] for row in rows)
    assert regions["pybb.resolutions"] == 1 and regions["pybb.escalations"] > 0
    opening = 1  # creating the board writes its opening premise in a transaction of its own
    return Reference(done, rows, {opening, *acks}, seconds)


def test_ra01_sigkill_at_random_times_resumes_to_the_reference_board(pg_run: PgRun) -> None:
    reference = reference_run(pg_run)
    rng = random.Random(20261130)
    kills, run = 0, 0
    while kills < KILLS:
        outcome = crash_run(pg_run, f"run{run}", reference, rng, kills=5, variant="real")
        assert outcome.violations == [], f"run {run}: {outcome.violations}"
        assert outcome.digest == reference.digest, f"run {run} ended on another board"
        kills += outcome.kills
        run += 1
    assert kills >= KILLS


def test_ra01_negative_controls_are_caught(pg_run: PgRun) -> None:
    reference = reference_run(pg_run)
    rng = random.Random(7)
    missing: list[str] = []
    for run in range(20):
        outcome = crash_run(pg_run, f"early{run}", reference, rng, kills=3, variant="ack-early")
        missing += [v for v in outcome.violations if "missing" in v]
        if missing:
            break
    assert missing, "an acknowledgement sent before its commit was never caught"
    doubled: list[str] = []
    for run in range(10):
        outcome = crash_run(pg_run, f"forget{run}", reference, rng, kills=2, variant="forgetful")
        doubled += [v for v in outcome.violations if "applied" in v or "prefix" in v]
        if outcome.digest not in (None, reference.digest):
            doubled.append("ended on another board")
        if doubled:
            break
    assert doubled, "a resume that re-applies attempts was never caught"

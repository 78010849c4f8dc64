"""RA-01 ``crash_resume_kill9`` (SQLite): SIGKILL the controller at random times; it resumes.

The child (``pybb_child.py ra01``) runs a repair run — four sources, scalar and pair
entries, on_pass and on_fail chains, escalations, and one escalation answered by a
scripted human — printing ``ACK <head>`` after every committed cycle. The parent kills
it with SIGKILL at a uniformly random time of the run (measured from when the child has
started Python, as long as the undisturbed run takes), checks the board file with plain ``sqlite3``,
and starts it again, until it prints ``DONE``. After every kill:

* ``PRAGMA integrity_check`` is ok; sequence numbers are ``1..N`` and the head counter is N;
* no acknowledged write is missing (every ACK'd head is on the board);
* the board is a prefix of the undisturbed reference run, ending on one of its cycle
  boundaries: nothing half-written, nothing applied twice, nothing out of order;
* every idempotency key, and every (entry, source, attempt), appears once.

At the end the board digest equals the reference run's. Negative controls: a board that
acknowledges before it commits, and a resume that forgets the attempts already on the
board (re-running them without their idempotency keys), must both be caught.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storekit import sized

HERE = Path(__file__).parent
CHILD = HERE / "pybb_child.py"
KILLS = sized(100, 1000)

Row = tuple[int, str, str | None, str, str, str | None]
"""A record as SQLite keeps it: seq, kind, region, writer, payload (JSON text), ikey."""


@dataclass
class Reference:
    digest: str
    rows: list[Row]
    boundaries: set[int]
    seconds: float


@dataclass
class Outcome:
    kills: int = 0
    digest: str | None = None
    violations: list[str] = field(default_factory=list)


def start(db: Path, variant: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(CHILD), "ra01", str(db), "--variant", variant]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=HERE)


def _ready(child: subprocess.Popen[bytes]) -> bytes:
    """Wait until the child has started Python and imported pybb (its first line)."""
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line in (b"READY\n", b""), line
    return line


def acks_and_done(out: bytes) -> tuple[list[int], str | None]:
    acks, done = [], None
    for line in out.decode().splitlines():
        if line.startswith("ACK "):
            acks.append(int(line[4:]))
        elif line.startswith("DONE "):
            done = line[5:]
    return acks, done


def board_rows(db: Path) -> tuple[list[str], list[Row]]:
    """The records, read with plain sqlite3, and what is wrong with the file's bookkeeping."""
    problems: list[str] = []
    with closing(sqlite3.connect(db)) as conn:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        if check != "ok":
            problems.append(f"integrity_check: {check}")
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        if "bb_records" not in tables:  # killed before the schema was created
            return problems, []
        rows = conn.execute(
            "SELECT seq, kind, region, writer, payload, ikey FROM bb_records"
            " WHERE board_id = 'ra01' ORDER BY seq"
        ).fetchall()
        head = conn.execute("SELECT head FROM bb_boards WHERE board_id = 'ra01'").fetchone()
    seqs = [row[0] for row in rows]
    if seqs != list(range(1, len(rows) + 1)):
        problems.append("sequence numbers are not 1..N")
    if head is not None and head[0] != len(rows):
        problems.append(f"head counter {head[0]} != {len(rows)} records")
    return problems, rows


def violations(db: Path, acked: list[int], reference: Reference) -> list[str]:
    """What is wrong with the board after a kill (empty: nothing)."""
    if not db.exists():
        return [f"acknowledged {max(acked)} but no board file"] if acked else []
    problems, rows = board_rows(db)
    n = len(rows)
    if acked and max(acked) > n:
        problems.append(f"acknowledged write {max(acked)} missing: the board ends at {n}")
    keys = Counter(row[5] for row in rows if row[5] is not None)
    problems += [f"idempotency key {k} applied {c} times" for k, c in keys.items() if c > 1]
    attempts = Counter(
        (p["key"], p["source"], p["attempt"])
        for p in (json.loads(row[4]) for row in rows if row[2] == "pybb.attempts")
    )
    problems += [f"attempt {a} applied {c} times" for a, c in attempts.items() if c > 1]
    if [row[:5] for row in rows] != [row[:5] for row in reference.rows[:n]]:
        problems.append("the board is not a prefix of the reference run")
    if n and n not in reference.boundaries:
        problems.append(f"the board ends at {n}, inside a cycle's transaction")
    return problems


def crash_run(
    db: Path, reference: Reference, rng: random.Random, kills: int, variant: str
) -> Outcome:
    outcome = Outcome()
    for _ in range(kills * 3 + 10):
        child = start(db, variant)
        ready = _ready(child)
        if outcome.kills < kills:
            time.sleep(rng.uniform(0, reference.seconds))
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=120)
        out = ready + out
        acks, done = acks_and_done(out)
        if child.returncode == -signal.SIGKILL:
            outcome.kills += 1
            outcome.violations += violations(db, acks, reference)
            continue
        assert child.returncode == 0, err.decode()
        outcome.digest = done
        outcome.violations += violations(db, acks, reference)
        return outcome
    raise AssertionError("the run never completed")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    db = tmp_path_factory.mktemp("ra01") / "reference.db"
    child = start(db, "real")
    _ready(child)
    started = time.monotonic()
    out, err = child.communicate(timeout=120)
    seconds = time.monotonic() - started
    assert child.returncode == 0, err.decode()
    acks, done = acks_and_done(out)
    assert done is not None
    problems, rows = board_rows(db)
    assert problems == []
    regions = Counter(row[2] for row in rows)
    assert regions["pybb.resolutions"] == 1 and regions["pybb.escalations"] > 0
    opening = 1  # creating the board writes its opening premise in a transaction of its own
    return Reference(done, rows, {opening, *acks}, seconds)


def test_ra01_sigkill_at_random_times_resumes_to_the_reference_board(
    reference: Reference, tmp_path: Path
) -> None:
    rng = random.Random(20261129)
    kills, run = 0, 0
    while kills < KILLS:
        outcome = crash_run(tmp_path / f"run{run}.db", reference, rng, kills=5, variant="real")
        assert outcome.violations == [], f"run {run}: {outcome.violations}"
        assert outcome.digest == reference.digest, f"run {run} ended on another board"
        kills += outcome.kills
        run += 1
    assert kills >= KILLS


def test_ra01_negative_control_acknowledging_before_commit_is_caught(
    reference: Reference, tmp_path: Path
) -> None:
    rng = random.Random(7)
    caught: list[str] = []
    for run in range(20):
        outcome = crash_run(
            tmp_path / f"early{run}.db", reference, rng, kills=3, variant="ack-early"
        )
        caught += [v for v in outcome.violations if "missing" in v]
        if caught:
            break
    assert caught, "an acknowledgement sent before its commit was never caught"


def test_ra01_negative_control_a_resume_that_forgets_attempts_is_caught(
    reference: Reference, tmp_path: Path
) -> None:
    rng = random.Random(11)
    caught: list[str] = []
    for run in range(10):
        outcome = crash_run(
            tmp_path / f"forget{run}.db", reference, rng, kills=2, variant="forgetful"
        )
        caught += [v for v in outcome.violations if "applied" in v or "prefix" in v]
        if outcome.digest not in (None, reference.digest):
            caught.append("ended on another board")
        if caught:
            break
    assert caught, "a resume that re-applies attempts was never caught"

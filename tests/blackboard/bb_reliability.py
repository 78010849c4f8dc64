"""Shared parts of the kernel's reliability tests (RA-03, RA-04, RA-12, the kill test).

Checkers return a list of violations (empty means the property holds) so that each test
and its negative control run the very same code: the real test asserts the list is
empty, the control asserts it is not. Nothing here mocks the kernel: the invariants are
read straight from the SQLite file with a separate ``sqlite3`` connection, and the
broken variants are subclasses of the real stores with one rule deliberately removed.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackboard import Agent, Fence, Level, Model, Premise, Record, create_model
from blackboard.stores import PendingWrite, SQLiteStore, Store, apply_writes
from blackboard.stores._base import AppendOutcome
from blackboard.stores._sqlite import _SQLiteTxn

HERE = Path(__file__).resolve().parent
WORKER = HERE / "bb_worker.py"

# -- models the tests and their worker processes share ---------------------------------


def open_model(name: str, store: str | Store, board_id: str) -> Model:
    """Open (or reopen) one of the named test models on ``store``."""
    if name == "log":
        return create_model(
            [Level("events"), Premise("p")], premises={"p": 0}, store=store, board_id=board_id
        )
    if name == "unique":
        return create_model(
            [Level("whole", unique=True), Level("keyed", unique="id"), Premise("p")],
            premises={"p": 0},
            store=store,
            board_id=board_id,
        )
    if name == "mixed":
        return create_model(
            [Level("events"), Level("ids", unique="id"), Premise("counter")],
            premises={"counter": 0},
            agents=[Agent("clerk", writes_to=["events", "ids"])],
            store=store,
            board_id=board_id,
        )
    raise ValueError(f"no test model named {name!r}")


# -- the sequence checker ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogRow:
    """One record as the checkers see it."""

    seq: int
    kind: str
    writer: str
    content: Any


def sequence_violations(rows: Sequence[LogRow], head: int) -> list[str]:
    """Sequence numbers must be exactly 1..N, each once, in log order, and head == N."""
    seqs = [r.seq for r in rows]
    problems: list[str] = []
    duplicated = sorted(s for s, n in Counter(seqs).items() if n > 1)
    if duplicated:
        problems.append(f"duplicate sequence numbers {duplicated[:10]}")
    missing = sorted(set(range(1, len(set(seqs)) + 1)) - set(seqs))
    if missing or (seqs and max(seqs) != len(set(seqs))):
        problems.append(f"gaps in the sequence: missing {missing[:10]}, max {max(seqs)}")
    if any(a >= b for a, b in itertools.pairwise(seqs)):
        problems.append("the log is not in increasing sequence order")
    if head != (max(seqs) if seqs else 0):
        problems.append(f"head {head} != highest sequence {max(seqs) if seqs else 0}")
    return problems


@dataclass
class WriterReport:
    """What one writer was told: acknowledged writes, typed rejections, anything else."""

    writer: str
    acks: list[tuple[int, int]] = field(default_factory=list)  # (i, seq) told Written
    closed: list[int] = field(default_factory=list)  # i told Rejected(RUN_CLOSED)
    errors: list[str] = field(default_factory=list)  # anything else: must stay empty

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WriterReport:
        return cls(
            data["writer"],
            [(int(i), int(s)) for i, s in data["acks"]],
            [int(i) for i in data["closed"]],
            list(data["errors"]),
        )


def run_violations(
    rows: Sequence[LogRow],
    head: int,
    reports: Iterable[WriterReport],
    close_seq: int | None,
    *,
    level_writes_only_by_writers: bool = True,
) -> list[str]:
    """The RA-04 pass criteria over one run's log and what its writers were told.

    Sequence unique and gap-free; every acknowledged write is in the log at the sequence
    it was told, exactly once; nothing landed that nobody was told about (no crash here,
    so every write is either acknowledged or rejected); no write admitted after the close;
    no error other than a typed RUN_CLOSED rejection, and none before the close.
    """
    problems = sequence_violations(rows, head)
    by_seq = {r.seq: r for r in rows}
    landed = Counter(
        (r.writer, r.content.get("i")) for r in rows if r.kind == "level" and r.content
    )
    told: set[tuple[str, int]] = set()
    for report in reports:
        problems += [f"{report.writer}: error surfaced: {e}" for e in report.errors[:5]]
        for i, seq in report.acks:
            told.add((report.writer, i))
            row = by_seq.get(seq)
            if row is None or row.writer != report.writer or row.content.get("i") != i:
                problems.append(f"{report.writer}: acknowledged write {i} at seq {seq} is missing")
        if report.closed and close_seq is None:
            problems.append(f"{report.writer}: told RUN_CLOSED but the run never closed")
        if report.closed and any(i > min(report.closed) for i, _ in report.acks):
            problems.append(f"{report.writer}: a write was admitted after it was told RUN_CLOSED")
    problems += [f"write {k} landed {n} times" for k, n in landed.items() if n > 1]
    if level_writes_only_by_writers:
        phantoms = sorted(set(landed) - told)
        problems += [f"write {k} landed but its writer was never told" for k in phantoms[:5]]
    problems += _close_violations(rows, close_seq)
    return problems


def _close_violations(rows: Sequence[LogRow], close_seq: int | None) -> list[str]:
    closes = [r.seq for r in rows if r.kind == "close"]
    if close_seq is None:
        return [f"close records {closes} but the closer closed nothing"] if closes else []
    problems = [] if closes == [close_seq] else [f"close records {closes} != [{close_seq}]"]
    late = [r.seq for r in rows if r.seq > close_seq]
    if late:
        problems.append(f"{len(late)} writes admitted after the close at {close_seq}: {late[:5]}")
    return problems


# -- reading and checking a SQLite board file independently of the kernel ---------------


def raw_connect(path: str | Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None, timeout=30.0)


def sqlite_rows(path: str | Path, board_id: str) -> tuple[list[LogRow], int]:
    """Every record of the board in sequence order, and the stored head counter."""
    with closing(raw_connect(path)) as conn:
        rows = [
            LogRow(seq, kind, writer, json.loads(payload))
            for seq, kind, writer, payload in conn.execute(
                "SELECT seq, kind, writer, payload FROM bb_records WHERE board_id = ? ORDER BY seq",
                (board_id,),
            )
        ]
        (head,) = conn.execute(
            "SELECT head FROM bb_boards WHERE board_id = ?", (board_id,)
        ).fetchone()
    return rows, int(head)


def sqlite_board_violations(path: str | Path, board_id: str) -> list[str]:
    """Everything that must hold of a board file at rest, whatever crashed or failed.

    ``integrity_check`` ok; sequence gap-free with the head counter equal to it; every
    derived row matches the records it derives from (premise versions count their
    records, unique keys point at their contributions, grants fold from the log, the
    close pointer names the one CLOSE record and nothing follows it).
    """
    with closing(raw_connect(path)) as conn:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        problems = [] if check == "ok" else [f"integrity_check: {check}"]
        rows, head = sqlite_rows(path, board_id)
        problems += sequence_violations(rows, head)
        problems += _premise_violations(conn, board_id)
        problems += _unique_violations(conn, board_id)
        problems += _grant_violations(conn, board_id)
        (closed_seq,) = conn.execute(
            "SELECT closed_seq FROM bb_boards WHERE board_id = ?", (board_id,)
        ).fetchone()
        problems += (
            _close_violations(rows, closed_seq)
            if closed_seq or any(r.kind == "close" for r in rows)
            else []
        )
    return problems


def _premise_violations(conn: sqlite3.Connection, board_id: str) -> list[str]:
    problems = []
    history: dict[str, list[tuple[int, int]]] = {}
    for region, seq, version in conn.execute(
        "SELECT region, seq, version FROM bb_records WHERE board_id = ? AND kind = 'premise'"
        " ORDER BY seq",
        (board_id,),
    ):
        history.setdefault(region, []).append((seq, version))
    stored = {
        name: (seq, version)
        for name, seq, version in conn.execute(
            "SELECT name, seq, version FROM bb_premises WHERE board_id = ?", (board_id,)
        )
    }
    for name, records in history.items():
        versions = [v for _, v in records]
        if versions != list(range(1, len(records) + 1)):
            problems.append(f"premise {name!r} record versions {versions[:10]} are not 1..n")
        if stored.get(name) != (records[-1][0], len(records)):
            problems.append(
                f"premise {name!r} row {stored.get(name)} != (last seq, count) "
                f"{(records[-1][0], len(records))}"
            )
    problems += [f"premise row {n!r} without records" for n in set(stored) - set(history)]
    return problems


def _unique_violations(conn: sqlite3.Connection, board_id: str) -> list[str]:
    (declaration,) = conn.execute(
        "SELECT declaration FROM bb_boards WHERE board_id = ?", (board_id,)
    ).fetchone()
    unique = {n for n, kind, u in json.loads(declaration)["regions"] if kind == "level" and u}
    level_seqs = {
        (region, seq)
        for region, seq in conn.execute(
            "SELECT region, seq FROM bb_records WHERE board_id = ? AND kind = 'level'",
            (board_id,),
        )
        if region in unique
    }
    keyed = Counter(
        conn.execute("SELECT region, seq FROM bb_uniques WHERE board_id = ?", (board_id,))
    )
    problems = [f"unique level record {k} has no key row" for k in level_seqs - set(keyed)]
    problems += [f"key row {k} points at no contribution" for k in set(keyed) - level_seqs]
    problems += [f"record {k} has {n} key rows" for k, n in keyed.items() if n > 1]
    return problems


def _grant_violations(conn: sqlite3.Connection, board_id: str) -> list[str]:
    folded: set[tuple[str, str]] = set()
    for kind, region, payload in conn.execute(
        "SELECT kind, region, payload FROM bb_records WHERE board_id = ?"
        " AND kind IN ('grant', 'revoke') ORDER BY seq",
        (board_id,),
    ):
        pair = (json.loads(payload)["agent"], region)
        if kind == "grant":
            folded.add(pair)
        else:
            folded.discard(pair)
    stored = set(
        conn.execute("SELECT agent, region FROM bb_grants WHERE board_id = ?", (board_id,))
    )
    return [] if stored == folded else [f"grants table {stored} != folded log {folded}"]


def read_side_file(
    path: str | Path,
) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """A kill-test writer's side file: its intents and its acknowledgements, by ``i``."""
    intents: dict[int, dict[str, Any]] = {}
    acks: dict[int, dict[str, Any]] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return intents, acks
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a torn last line from the kill
            continue
        if "intent" in entry:
            intents[entry["i"]] = entry
        else:
            acks[entry["ack"]] = entry
    return intents, acks


def in_doubt(
    intents: Mapping[int, dict[str, Any]], acks: Mapping[int, dict[str, Any]]
) -> dict[str, Any] | None:
    """The intent a killed writer acted on without hearing back, if any."""
    unanswered = [intents[i] for i in sorted(set(intents) - set(acks))]
    return unanswered[-1] if unanswered else None


# -- deliberately broken stores (negative controls) ----------------------------------------


class SequenceFirstStore(SQLiteStore):
    """BROKEN ON PURPOSE: takes sequence numbers in their own committed transaction.

    The analogue of a PostgreSQL ``SEQUENCE``: the counter is bumped and committed
    before the write is judged, so a write refused afterwards (the run closed meanwhile)
    has used up its number and leaves a gap.
    """

    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        count = len(writes)

        def take(cur: sqlite3.Cursor) -> int:
            cur.execute(
                "UPDATE bb_boards SET head = head + ? WHERE board_id = ?", (count, board_id)
            )
            (head,) = cur.execute(
                "SELECT head FROM bb_boards WHERE board_id = ?", (board_id,)
            ).fetchone()
            return int(head) - count

        first: int = self._run("take sequence numbers", take)

        def work(cur: sqlite3.Cursor) -> list[AppendOutcome]:
            txn = _TakenNumbers(cur, board_id, first)
            outcomes = apply_writes(txn, writes, fence)
            txn.flush()  # the records it held back (its insert keeps the head itself)
            return outcomes

        outcomes: list[AppendOutcome] = self._run("append", work)
        return outcomes


class _TakenNumbers(_SQLiteTxn):
    """Sequences from numbers taken earlier; never moves the committed counter back."""

    def __init__(self, cur: sqlite3.Cursor, board_id: str, first: int) -> None:
        super().__init__(cur, board_id)
        self._head = first

    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        (committed,) = self.cur.execute(
            "SELECT head FROM bb_boards WHERE board_id = ?", (self.board_id,)
        ).fetchone()
        super().insert(record, write, fingerprint)
        self.cur.execute(
            "UPDATE bb_boards SET head = ? WHERE board_id = ?",
            (max(int(committed), record.sequence), self.board_id),
        )


def store_for(url: str, variant: str) -> str | Store:
    """The store a worker opens: the real one, or a named broken variant on the same file."""
    if variant == "real":
        return url
    if variant == "sequence-first":
        return SequenceFirstStore(url.removeprefix("sqlite:///").split("?")[0])
    raise ValueError(f"no store variant {variant!r}")


# -- a pool of kernel worker processes, driven by JSON lines --------------------------------


class WorkerPool:
    """``count`` real Python processes running ``bb_worker.py serve``.

    Each holds its own model (its own store connection); commands go out on stdin, one
    JSON reply per command comes back on stdout. Commands carry a wall-clock ``go_at``
    so that all workers start their part at the same moment.
    """

    def __init__(self, count: int, log_dir: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
        self.log_dir = log_dir
        self.errs = [(log_dir / f"worker-{n}.err").open("w") for n in range(count)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )
            for err in self.errs
        ]

    def send(self, index: int, command: Mapping[str, Any]) -> None:
        stdin = self.procs[index].stdin
        assert stdin is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def receive(self, index: int) -> dict[str, Any]:
        proc = self.procs[index]
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            err = (self.log_dir / f"worker-{index}.err").read_text()
            raise RuntimeError(f"worker {index} died (rc={proc.poll()}): {err[-2000:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def call_all(self, commands: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Send one command to each of the first ``len(commands)`` workers; gather replies."""
        for index, command in enumerate(commands):
            self.send(index, command)
        return [self.receive(index) for index in range(len(commands))]

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        for err in self.errs:
            err.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def go_at(delay: float = 0.3) -> float:
    """A start moment far enough ahead for every worker to receive its command."""
    return time.time() + delay

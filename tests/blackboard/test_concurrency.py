"""Concurrent writers on one board: threads in one process, and processes on one SQLite file.

Sequence numbers must come out exactly 1..N, each once, with every acknowledged write
in the log where it was told it landed; a unique level admits exactly one of many
concurrent duplicates.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bb_reliability import (
    LogRow,
    WorkerPool,
    WriterReport,
    go_at,
    open_model,
    run_violations,
    sequence_violations,
    sqlite_board_violations,
    sqlite_rows,
)

from blackboard import (
    Accept,
    BoardReader,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedWrite,
    Reject,
    RejectionCause,
    Written,
    create_model,
)
from storekit import StoreSpec

THREADS, WRITES = 8, 1_000
PROCESSES, PROCESS_WRITES = 4, 500


def _log_rows(model: Model) -> list[LogRow]:
    return [LogRow(r.sequence, r.kind.value, r.writer, r.content) for r in model.reader.log()]


def _in_threads(count: int, work: Any) -> list[Any]:
    """Run ``work(index, barrier)`` in ``count`` threads released together; return results."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = work(index, barrier)
        except BaseException as exc:  # re-raised below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: widen every race
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    if failures:
        raise failures[0]
    return results


def test_threads_get_exactly_one_to_n(local_store_spec: StoreSpec) -> None:
    model = open_model("log", local_store_spec.open(), "threads")
    opening = model.reader.head()

    def write(index: int, barrier: threading.Barrier) -> WriterReport:
        report = WriterReport(f"t{index}")
        barrier.wait()
        for i in range(WRITES):
            result = model.control.write(report.writer, "events", {"w": report.writer, "i": i})
            if isinstance(result, Written):
                report.acks.append((i, result.sequence))
            else:
                report.errors.append(repr(result))
        return report

    reports = _in_threads(THREADS, write)
    rows = _log_rows(model)
    assert run_violations(rows, model.reader.head(), reports, None) == []
    told = sorted(seq for r in reports for _, seq in r.acks)
    assert told == list(range(opening + 1, opening + THREADS * WRITES + 1))
    for report in reports:  # one writer's writes become visible in the order it made them
        seqs = [seq for _, seq in report.acks]
        assert seqs == sorted(seqs)
    if local_store_spec.kind == "sqlite":
        assert local_store_spec.url is not None
        assert sqlite_board_violations(local_store_spec.url[len("sqlite:///") :], "threads") == []


def test_processes_on_one_sqlite_file_get_exactly_one_to_n(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    with open_model("log", url, "procs") as model:
        opening = model.reader.head()
    with WorkerPool(PROCESSES, tmp_path) as pool:
        open_cmd = {"op": "open", "url": url, "board": "procs", "model": "log"}
        assert pool.call_all([open_cmd] * PROCESSES) == [{"ok": True}] * PROCESSES
        start = go_at()
        replies = pool.call_all(
            [
                {
                    "op": "write",
                    "go_at": start,
                    "n": PROCESS_WRITES,
                    "writer": f"p{n}",
                    "level": "events",
                }
                for n in range(PROCESSES)
            ]
        )
    reports = [WriterReport.from_json(r) for r in replies]
    rows, head = sqlite_rows(tmp_path / "board.db", "procs")
    assert run_violations(rows, head, reports, None) == []
    assert head == opening + PROCESSES * PROCESS_WRITES
    assert sorted(seq for r in reports for _, seq in r.acks) == list(range(opening + 1, head + 1))
    assert sqlite_board_violations(tmp_path / "board.db", "procs") == []


# -- unique levels -----------------------------------------------------------------------

KEYS = 100


def _contents(level: str, writer: int) -> list[dict[str, Any]]:
    """Per key, what each writer proposes: identical content, or differing content, same key."""
    if level == "whole":
        return [{"finding": f"f{k}"} for k in range(KEYS)]
    return [{"id": k, "by": writer} for k in range(KEYS)]


def _key(level: str, content: dict[str, Any]) -> Any:
    return content["finding"] if level == "whole" else content["id"]


def _duplicate_violations(
    level: str, attempts: list[list[tuple[dict[str, Any], Any]]], rows: list[LogRow]
) -> list[str]:
    """Each key: exactly one writer told Written, every other told DUPLICATE, one record."""
    problems = []
    admitted = Counter(_key(level, c) for per in attempts for c, r in per if r == "written")
    others = {r for per in attempts for _, r in per if r != "written"}
    problems += [f"key {k} admitted {n} times" for k, n in admitted.items() if n != 1]
    problems += [f"key {k} never admitted" for k in range(KEYS) if admitted[_keyed(level, k)] == 0]
    if others - {RejectionCause.DUPLICATE.value}:
        problems.append(f"refusals other than DUPLICATE: {others}")
    on_board = Counter(_key(level, r.content) for r in rows if r.kind == "level")
    problems += [f"key {k} is on the board {n} times" for k, n in on_board.items() if n != 1]
    return problems


def _keyed(level: str, k: int) -> Any:
    return f"f{k}" if level == "whole" else k


def _race_duplicates(model: Model, level: str) -> list[list[tuple[dict[str, Any], Any]]]:
    def write(index: int, barrier: threading.Barrier) -> list[tuple[dict[str, Any], Any]]:
        out = []
        barrier.wait()
        for content in _contents(level, index):
            result = model.control.write(f"t{index}", level, content)
            out.append((content, "written" if isinstance(result, Written) else result.cause.value))
        return out

    attempts: list[list[tuple[dict[str, Any], Any]]] = _in_threads(THREADS, write)
    return attempts


@pytest.mark.parametrize("level", ["whole", "keyed"])
def test_unique_level_admits_one_of_concurrent_duplicates_threads(
    local_store_spec: StoreSpec, level: str
) -> None:
    model = open_model("unique", local_store_spec.open(), "unique")
    attempts = _race_duplicates(model, level)
    assert _duplicate_violations(level, attempts, _log_rows(model)) == []


@pytest.mark.parametrize("level", ["whole", "keyed"])
def test_unique_level_admits_one_of_concurrent_duplicates_processes(
    tmp_path: Path, level: str
) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    open_model("unique", url, "unique").close()
    with WorkerPool(PROCESSES, tmp_path) as pool:
        open_cmd = {"op": "open", "url": url, "board": "unique", "model": "unique"}
        pool.call_all([open_cmd] * PROCESSES)
        start = go_at()
        replies = pool.call_all(
            [
                {
                    "op": "unique",
                    "go_at": start,
                    "writer": f"p{n}",
                    "level": level,
                    "contents": _contents(level, n),
                }
                for n in range(PROCESSES)
            ]
        )
    attempts = [
        [
            (c, "written" if seq is not None else cause)
            for c, (seq, cause) in zip(_contents(level, n), reply["results"], strict=True)
        ]
        for n, reply in enumerate(replies)
    ]
    rows, _ = sqlite_rows(tmp_path / "board.db", "unique")
    assert _duplicate_violations(level, attempts, rows) == []
    assert sqlite_board_violations(tmp_path / "board.db", "unique") == []


def _refuse_duplicates(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    """The seed's duplicate-refusing rule, verbatim in substance: it runs unlocked."""
    if isinstance(proposed, ProposedContribution):
        for existing in reader.read_level(proposed.level):
            if existing.content == proposed.content:
                return Reject("a duplicate of a contribution already on the board")
    return Accept()


def test_negative_control_rule_based_dedupe_is_caught(local_store_spec: StoreSpec) -> None:
    """A duplicate-refusing *rule* only bounds duplicates; the same checks must see that."""
    caught = False
    for trial in range(20):
        model = create_model(
            [Level("whole"), Premise("p")],
            premises={"p": 0},
            admission_rule=_refuse_duplicates,
            store=local_store_spec.open(),
            board_id=f"rule-{trial}",
        )
        attempts = _race_duplicates(model, "whole")
        problems = _duplicate_violations("whole", attempts, _log_rows(model))
        if any("admitted" in p for p in problems):
            caught = True
            break
    assert caught, f"the duplicate checker never saw the racy rule admit a duplicate ({trial})"


def test_negative_control_sequence_checker_catches_doctored_logs() -> None:
    good = [LogRow(s, "level", "w", {"w": "w", "i": s - 1}) for s in range(1, 6)]
    assert sequence_violations(good, 5) == []
    gap = [r for r in good if r.seq != 3]
    duplicate = [*good[:3], good[2], *good[3:]]
    shuffled = [good[1], good[0], *good[2:]]
    assert any("gaps" in p for p in sequence_violations(gap, 5))
    assert any("duplicate" in p for p in sequence_violations(duplicate, 5))
    assert any("order" in p for p in sequence_violations(shuffled, 5))
    assert any("head" in p for p in sequence_violations(good, 6))
    report = WriterReport("w", acks=[(i, i + 1) for i in range(5)])
    assert run_violations(good, 5, [report], None) == []
    assert any("missing" in p for p in run_violations(gap, 5, [report], None))
    lying = WriterReport("w", acks=[(0, 2)])  # told seq 2 for write 0: not what the log says
    assert any("missing" in p for p in run_violations(good[:1], 1, [lying], None))

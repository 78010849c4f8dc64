"""RA-04 ``multiproc_sequence``, PostgreSQL part, and issue 7's concurrent-writes test.

Eight spawned processes, each with its own ``PostgresStore`` (its own pool), write one
board at once. Pass: sequence numbers exactly 1..N, each once, head counter = N; every
acknowledged write in the log at the sequence it was told; nothing landed that its
writer was not told of; no error surfaced; with a closer, nothing admitted after the
close. Every few writes a batch aborts inside the admitting transaction after taking its
sequence number, so the gap-free claim is tested against aborts, not only successes;
the negative control runs the same workload on a SEQUENCE-numbered store and must find
gaps. Run with ``-rP`` to see the throughput lines;
the speed itself is ``bench/pg_writes.py``'s to measure.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pg_harness import PgSpace, SequenceStore, WriterReport, go_at, pg_space, run_violations
from pg_workers import Workers, open_model, write_levels_on

from blackboard import Level, create_model
from storekit import sized

__all__ = ["pg_space"]

pytestmark = pytest.mark.postgres

WRITERS = 8
WRITES = sized(2_500, 10_000)
ISSUE_WRITES = 2_000
CAS_EVERY = 10
CLOSE_TRIALS = sized(10, 100)
CLOSE_WRITES = 150
ABORT_EVERY = 50


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers(WRITERS + 1)
    yield pool
    pool.close()


def _run(
    workers: Workers, space: PgSpace, board: str, writes: int, close_within: float | None
) -> tuple[list[str], list[WriterReport], int, float, int]:
    """Problems found, each writer's report, aborted batches, the slowest writer's seconds, head."""
    open_model("levels", space.url, board).store.close()
    start = go_at()
    for n in range(WRITERS):
        workers.send(n, "write_levels", space.url, board, f"p{n}", writes, start, ABORT_EVERY)
    if close_within is not None:
        workers.send(WRITERS, "close_at", space.url, board, start + random.uniform(0, close_within))
    indexes = list(range(WRITERS + (close_within is not None)))
    answers = workers.gather(indexes)
    workers.reset_all()
    reports = [WriterReport.from_json(answers[n]) for n in range(WRITERS)]
    close_seq = answers.get(WRITERS)
    rows, head = space.rows(board)
    problems = run_violations(rows, head, reports, close_seq) + space.violations(board)
    aborted = sum(answers[n]["aborted"] for n in range(WRITERS))
    seconds = max(answers[n]["elapsed"] for n in range(WRITERS))
    return problems, reports, aborted, seconds, head


def test_eight_processes_get_exactly_one_to_n(workers: Workers, pg_space: PgSpace) -> None:
    problems, reports, aborted, seconds, head = _run(workers, pg_space, "ra04", WRITES, None)
    admitted = sum(len(r.acks) for r in reports)
    rate = admitted / seconds
    print(f"RA-04 PostgreSQL: {WRITERS} x {WRITES} writes, {aborted} aborted batches, "
          f"{admitted} admitted in {seconds:.1f}s = {rate:.0f} writes/s")  # fmt: skip
    assert problems == []
    assert admitted == head == WRITERS * WRITES
    assert aborted == WRITERS * (WRITES // ABORT_EVERY)
    # No speed floor here: a timed assertion fails whenever the machine is busy.
    # `bench/pg_writes.py` measures writes/s against raw psycopg in the same run.


def test_close_race_admits_nothing_after_the_close(workers: Workers, pg_space: PgSpace) -> None:
    raced = 0
    for trial in range(CLOSE_TRIALS):
        board = f"close-{trial}"
        problems, reports, _, _, _ = _run(workers, pg_space, board, CLOSE_WRITES, 0.4)
        assert problems == [], f"trial {trial}: {problems}"
        raced += sum(bool(r.closed) for r in reports)
    print(f"close race: {CLOSE_TRIALS} trials, {raced} writers cut off by the close")
    assert raced > 0, "the closer never landed while writers were writing: no race was run"


def test_issue_7_levels_and_premise_cas_from_eight_processes(
    workers: Workers, pg_space: PgSpace
) -> None:
    """8 x 2,000 accepted writes, one in ten a CAS of one premise, retried on conflict."""
    board = "issue7"
    open_model("counter", pg_space.url, board).store.close()
    start = go_at()
    answers = workers.call_all(
        "levels_and_cas",
        lambda n: (pg_space.url, board, f"p{n}", ISSUE_WRITES, CAS_EVERY, start),
        WRITERS,
    )
    workers.reset_all()
    rows, head = pg_space.rows(board)
    assert [a["errors"] for a in answers] == [[]] * WRITERS
    # Sequence 1 is the premise's opening value; then exactly 16,000 accepted writes.
    assert [r.seq for r in rows] == list(range(1, WRITERS * ISSUE_WRITES + 2))
    assert head == WRITERS * ISSUE_WRITES + 1
    assert pg_space.violations(board) == []
    _check_cas(rows, answers)


def _check_cas(rows: list[Any], answers: list[dict[str, Any]]) -> None:
    by_seq = {r.seq: r for r in rows}
    premise = [r for r in rows if r.kind == "premise"]
    cas = [c | {"w": a["writer"]} for a in answers for c in a["cas"]]
    # Every version 2..V+1 was written exactly once, by exactly one accepted CAS...
    assert sorted(c["version"] for c in cas) == list(range(2, len(cas) + 2))
    assert len(premise) == len(cas) + 1
    for c in cas:
        # ...which saw the version it expected, and is in the log where it was told.
        assert c["version"] == c["expected"] + 1
        assert by_seq[c["seq"]].content == {"w": c["w"], "i": c["i"]}
    conflicts = [c for a in answers for c in a["conflicts"]]
    assert all(c["current"] != c["expected"] for c in conflicts)
    print(f"issue 7: {len(cas)} CAS accepted, {len(conflicts)} conflicts retried")


# -- the negative control --------------------------------------------------------------


def test_negative_control_a_postgres_sequence_leaves_gaps(pg_space: PgSpace) -> None:
    """The same workload (with its aborting batches) on SEQUENCE numbers must show gaps."""
    url = pg_space.url
    open_model("levels", url, "seq").store.close()
    stores = [SequenceStore(url) for _ in range(2)]
    answers: list[dict[str, Any]] = []
    try:
        threads = [
            threading.Thread(target=lambda s=store, n=n: answers.append(_write_with(s, f"t{n}")))
            for n, store in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for store in stores:
            store.close()
    reports = [WriterReport.from_json(a) for a in answers]
    assert sum(a["aborted"] for a in answers) > 0
    rows, head = pg_space.rows("seq")
    problems = run_violations(rows, head, reports, None)
    assert any("gaps in the sequence" in p for p in problems), problems


def _write_with(store: SequenceStore, writer: str) -> dict[str, Any]:
    model = create_model([Level("events")], store=store, board_id="seq")
    return write_levels_on(model.control, writer, 200, 0.0, abort_every=20)

"""The worker's face, in one process: applications by name, settings, the command line,
workers on the embedded stores, claims lost to a takeover, and incremental refresh.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from blackboard import Level
from blackboard.stores import Store
from pybb import (
    AppContext,
    Blackboard,
    BlackboardEntry,
    Controller,
    KnowledgeSource,
    PybbError,
    Worker,
    WorkerSettings,
)
from pybb._engine.worker import run_worker
from pybb.cli import main
from pybb.cli.worker import APPS, load_app
from pybb.testing import entries_digest
from pybb.workloads import w1, w1_app, w1_expected, w1_outcomes
from storekit import StoreSpec

QUICK = WorkerSettings(lease=timedelta(seconds=5), batch=8, poll=timedelta(seconds=0.2))

# -- applications ---------------------------------------------------------------------------


def test_applications_load_by_short_name_and_by_module_path() -> None:
    assert load_app("w1") is w1_app
    assert load_app("pybb.testing:w1_app") is w1_app
    assert set(APPS) >= {"w1", "attest"}
    assert callable(load_app("attest"))


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("nothing", "neither a known name"),
        ("no.such.module:app", "cannot import"),
        ("pybb.testing:no_such_app", "has no function"),
        ("pybb.testing:EPOCH", "has no function"),
    ],
)
def test_an_unusable_application_is_a_pybb_error(spec: str, match: str) -> None:
    with pytest.raises(PybbError, match=match):
        load_app(spec)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"lease": 30}, "lease"),
        ({"lease": timedelta(0)}, "lease"),
        ({"heartbeat": timedelta(seconds=60)}, "heartbeat"),
        ({"batch": 0}, "batch"),
        ({"batch": True}, "batch"),
        ({"poll": timedelta(seconds=-1)}, "poll"),
    ],
)
def test_unusable_settings_are_refused(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(PybbError, match=match):
        WorkerSettings(**changes)


def test_the_command_line_refuses_what_it_cannot_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["worker", "--store", store, "--run", "r", "--app", "nothing"]) == 2
    assert "neither a known name" in capsys.readouterr().err
    assert main(["worker", "--store", store, "--run", "r", "--app", "w1", "--app-option", "x"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["worker", "--store", "nope://x", "--run", "r", "--app", "w1"]) == 2
    assert "unknown scheme" in capsys.readouterr().err


def test_the_command_line_works_a_run_on_sqlite(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    w1(50, store, board_id="cli")[0].close()
    assert main(["worker", "--store", store, "--run", "cli", "--app", "w1", "--name", "me"]) == 0
    assert "worker me: settled" in capsys.readouterr().out
    with Blackboard(store, "cli") as board:
        assert w1_outcomes(board) == w1_expected(50)


# -- workers on the embedded stores ------------------------------------------------------------


def _workers(spec: StoreSpec, board: str, count: int, **settings: Any) -> list[Any]:
    summaries: list[Any] = []

    def work(n: int) -> None:
        controller = w1_app(AppContext(spec.open(), board, {}))
        worker = Worker(controller, name=f"t{n}", settings=WorkerSettings(**settings))
        summaries.append(worker.run())

    threads = [threading.Thread(target=work, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return summaries


def test_three_workers_on_an_embedded_store_end_as_one_controller(
    local_store_spec: StoreSpec,
) -> None:
    blackboard, _ = w1(300, local_store_spec.open(), board_id="threads")
    summaries = _workers(local_store_spec, "threads", 3, batch=10)
    assert {s.reason for s in summaries} == {"settled"}
    assert sum(s.settled for s in summaries) >= 300
    blackboard.refresh()
    reference, controller = w1(300, None, board_id="threads")
    controller.run()
    assert w1_outcomes(blackboard) == w1_expected(300)
    assert entries_digest(blackboard) == entries_digest(reference)
    assert blackboard.model.reader.claims() == ()


def test_a_settled_run_clears_the_lapsed_claims_a_dead_worker_left(
    local_store_spec: StoreSpec,
) -> None:
    """A worker killed after settling entries, before releasing them, leaves their claims."""
    blackboard, _ = w1(20, local_store_spec.open(), board_id="tidy")
    assert [s.reason for s in _workers(local_store_spec, "tidy", 1, batch=10)] == ["settled"]
    control = blackboard.model.control
    control.claim("dead", ["e0", "e1"], lease=timedelta(milliseconds=1))  # lapses at once
    control.claim("alive", ["e2"], lease=timedelta(seconds=60))  # a live holder's: kept
    time.sleep(0.01)
    assert [s.reason for s in _workers(local_store_spec, "tidy", 1, batch=10)] == ["settled"]
    holders = {claim.key: claim.holder for claim in blackboard.model.reader.claims()}
    assert holders == {"e2": "alive"}


class Never(KnowledgeSource):
    """A source that never thinks it can help."""

    def can_contribute(self, blackboard: Blackboard) -> list[str]:
        return []

    def execute(self, blackboard: Blackboard, key: str) -> Any:  # pragma: no cover
        raise AssertionError("never asked")


def test_entries_no_source_can_help_end_the_worker_quiescent() -> None:
    board = Blackboard(None, "stuck")
    controller = Controller(board)
    controller.register_predicate("no", lambda m: False)
    controller.route_predicate("no", on_fail=[Never("never", 1)])
    board.write_entries({f"e{i}": BlackboardEntry(predicate="no", measurement=i) for i in range(3)})
    summary = Worker(controller, name="w", settings=QUICK).run()
    assert summary.reason == "quiescent"
    assert board.model.reader.claims() == ()


def test_a_following_worker_waits_for_entries_and_stops_when_told(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path / 'f.db'}"
    controller = w1(0, store, board_id="follow", write=False)[1]
    settings = WorkerSettings(lease=timedelta(seconds=5), follow=True, poll=timedelta(seconds=0.1))
    worker = Worker(controller, name="f", settings=settings)
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(worker.run()))
    thread.start()
    time.sleep(0.2)
    submitter, _ = w1(40, store, board_id="follow")
    deadline = time.monotonic() + 30
    while w1_outcomes(submitter) != w1_expected(40) and time.monotonic() < deadline:
        time.sleep(0.05)
        submitter.refresh()
    worker.stop()
    thread.join(10)
    assert done and done[0].reason == "stopped" and done[0].settled == 40
    assert submitter.model.reader.claims() == ()


def test_a_closed_run_ends_its_workers() -> None:
    board, controller = w1(10, None, board_id="closing")
    board.model.control.abort("enough")
    assert Worker(controller, name="c", settings=QUICK).run().reason == "closed"


def test_run_worker_refuses_an_application_that_builds_no_controller() -> None:
    with pytest.raises(PybbError, match="not a pybb Controller"):
        run_worker(lambda context: "nope", _memory(), "x")  # type: ignore[arg-type,return-value]


def _memory() -> Store:
    from blackboard.stores import MemoryStore

    return MemoryStore()


# -- claims lost, and the cost of other writers ------------------------------------------------


def test_a_batch_for_an_entry_taken_over_writes_nothing(local_store_spec: StoreSpec) -> None:
    board = Blackboard(local_store_spec.open(), "fenced")
    board.write_entry("e", BlackboardEntry(predicate="p", measurement=1))
    control = board.model.control
    control.claim("other", ["e"], lease=timedelta(seconds=60))
    board.journal.holder = "me"
    head = board.head
    with board.batch():
        board.journal.emit("pybb.changes", "app", {"key": "e", "value": 5}, None)
    assert board.journal.take_claim_lost() and board.head == head
    assert board.get_entry("e").measurement == 1, "the refused write was taken back"
    assert board.model.reader.head() == head


def _counting_rebuilds(board: Blackboard) -> list[int]:
    calls: list[int] = []
    real = board.journal._rebuild

    def counted() -> None:
        calls.append(1)
        real()

    board.journal._rebuild = counted  # type: ignore[method-assign]
    return calls


def test_other_writers_are_folded_in_without_rereading_the_board(
    local_store_spec: StoreSpec,
) -> None:
    store = local_store_spec.open()
    board, controller = w1(30, store, board_id="shared")
    other = Blackboard(local_store_spec.open(), "shared", writer="other")
    rebuilds = _counting_rebuilds(board)
    for i in range(5):  # another process writes entries between every two cycles
        other.write_entry(f"x{i}", BlackboardEntry(predicate="less_than_3", measurement=i))
        with board.batch():
            board.journal.emit("pybb.changes", "app", {"key": f"e{i}", "value": 0}, None)
    controller.run()
    assert rebuilds == []
    fresh = Blackboard(local_store_spec.open(), "shared")
    assert board._state.head == fresh.head
    assert {k: board.get_entry(k) for k in board.entries} == {
        k: fresh.get_entry(k) for k in fresh.entries
    }


def test_another_writer_on_an_entry_of_the_batch_makes_it_reread(
    local_store_spec: StoreSpec,
) -> None:
    board = Blackboard(local_store_spec.open(), "conflict")
    other = Blackboard(local_store_spec.open(), "conflict", writer="other")
    board.write_entry("e", BlackboardEntry(predicate="p", measurement=1))
    other.refresh()
    rebuilds = _counting_rebuilds(board)
    other.journal.emit("pybb.changes", "other", {"key": "e", "value": 7}, None)
    board.journal.emit("pybb.changes", "app", {"key": "e", "value": 9}, None)
    assert rebuilds == [1]
    assert board.get_entry("e").measurement == 9  # both landed; ours is the later one


def test_a_level_declared_by_the_application_is_no_entry(
    local_store_spec: StoreSpec,
) -> None:
    board = Blackboard(local_store_spec.open(), "extra", regions=[Level("notes")])
    other = Blackboard(local_store_spec.open(), "extra", regions=[Level("notes")])
    board.write_entry("e", BlackboardEntry(predicate="p", measurement=1))
    other.model.control.write("someone", "notes", {"key": "e"})
    rebuilds = _counting_rebuilds(board)
    board.journal.emit("pybb.changes", "app", {"key": "e", "value": 2}, None)
    assert rebuilds == [], "a record on another region is not an entry's record"

"""The ``attest`` application: workers attest a fleet ``pybb attest``'s board names.

A demo fleet's devices are written to a board without running anything, as a submitter
does; two worker threads (``--app attest`` in a process each, in a deployment) rebuild
the fleet from the board's name, and the fleet's report equals that of one attestation
run of the same fleet. On a board that holds the human loop the workers supervise each
escalation once, in SQLite as in PostgreSQL (``test_worker_attest_scaleout``).
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from blackboard.stores import SQLiteStore
from pybb import AppContext, PybbError, Worker, WorkerSettings, WorkerSummary
from pybb.attestation import Attestation, generate_fleet
from pybb.cli._attest_app import attest_app
from pybb.supervision.attestation import DEFAULT_ASKS, SupervisedAttestation


def work(path: Path, board: str) -> list[WorkerSummary]:
    """Two worker threads on the board, each with its own store, until they end."""
    summaries = []

    def one(n: int) -> None:
        controller = attest_app(AppContext(SQLiteStore(path), board, {}))
        settings = WorkerSettings(lease=timedelta(seconds=10), batch=8)
        summaries.append(Worker(controller, name=f"a{n}", settings=settings).run())

    threads = [threading.Thread(target=one, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return summaries


def test_two_workers_attest_a_demo_fleet_as_one_run_does(tmp_path: Path) -> None:
    fleet = generate_fleet(40, seed=5)
    path = tmp_path / "fleet.db"
    single = Attestation(fleet, store=SQLiteStore(path), board_id="single")
    expected = single.run().counts()
    submitter = Attestation(fleet, store=SQLiteStore(path), board_id="shared")
    assert submitter.submit() == len(fleet.devices) and submitter.submit() == 0

    summaries = work(path, "shared")
    submitter.blackboard.refresh()
    assert sum(s.settled for s in summaries) >= len(fleet.devices)
    assert {s.reason for s in summaries} == {"settled"}
    assert submitter.report().counts() == expected


def test_on_a_board_with_the_human_loop_workers_supervise_each_escalation_once(
    tmp_path: Path,
) -> None:
    fleet = generate_fleet(40, seed=5)
    path = tmp_path / "fleet.db"
    with SupervisedAttestation(fleet, store=SQLiteStore(path), board_id="shared") as session:
        session.attestation.submit()
    summaries = work(path, "shared")
    assert {s.reason for s in summaries} == {"settled"}
    with SupervisedAttestation(fleet, store=SQLiteStore(path), board_id="shared") as session:
        escalated = session.attestation.blackboard.escalate
        decided = Counter(r.key for r in session.run.records() if r.kind == "decision")
        assert escalated and decided == Counter(list(escalated))
        asks = session.run.open_asks()
        assert asks and len(asks) <= DEFAULT_ASKS


def test_a_board_that_is_not_an_attestation_board_is_refused(tmp_path: Path) -> None:
    from pybb.workloads import w1

    w1(3, SQLiteStore(tmp_path / "w1.db"), board_id="w1")
    with pytest.raises(PybbError, match="not an attestation board"):
        attest_app(AppContext(SQLiteStore(tmp_path / "w1.db"), "w1", {}))

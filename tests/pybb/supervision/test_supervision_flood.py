"""RA-16, the escalation flood: open asks per run never exceed the configured cap.

1,000 entries escalate in one cycle (PYBB_NIGHTLY=1: 5,000) while a person answers an
open ask after every third escalation, so asks keep opening and closing. Replaying the
board's log afterwards (asks open, answers and closures close) must show at most
``cap`` asks open at any sequence number, every escalation past the cap DENIED with
scope ``open-asks`` at the moment the cap was full (100 %), and the others ESCALATED.
Negative control: a cap that counts open asks from a stale snapshot overshoots.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from supervision_support import decisions, open_ask_history, open_run, settings, write

from blackboard.stores import Store
from buddhi import Disposition
from pybb import ControllerObserver, Escalation
from pybb.human import answer, open_asks
from pybb.supervision import SupervisedRun, supervision_records
from storekit import sized

CAP = 25
FLOOD = sized(1_000, 5_000)


class Person(ControllerObserver):
    """Answers the oldest open ask after every ``every``-th escalation."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.seen = 0
        self.run: SupervisedRun | None = None

    def on_escalated(self, escalation: Escalation) -> None:
        self.seen += 1
        if self.seen % self.every or self.run is None:
            return
        waiting = open_asks(self.run.blackboard.model.reader)
        if waiting:
            answer(self.run.blackboard.model.control, "human:ops", waiting[0].ask_id, "reject-it")


def flood(store: str | Store | None, *, stale: bool = False) -> tuple[SupervisedRun, float]:
    run = open_run(store, settings(ceiling=FLOOD, max_open_asks=CAP))
    person = Person(every=3)
    person.run = run
    run.controller.add_observer(person)  # after the supervisor: it answers what was just asked
    if stale:
        count = run.supervisor.open_ask_count
        snapshot = [0, 0]

        def stale_count() -> int:  # refreshed every 40 calls only
            snapshot[1] += 1
            if snapshot[1] % 40 == 1:
                snapshot[0] = count()
            return snapshot[0]

        run.supervisor.store._open_asks = stale_count
    write(run.blackboard, {f"dev-{i:05d}": None for i in range(FLOOD)})
    started = time.perf_counter()
    run.run()
    return run, time.perf_counter() - started


def cap_problems(run: SupervisedRun) -> list[str]:
    reader = run.blackboard.model.reader
    most, at_decisions = open_ask_history(reader)
    open_at = dict(at_decisions)
    records = [r for r in supervision_records(reader) if r.kind == "decision"]
    problems = []
    if most > CAP:
        problems.append(f"{most} asks were open at once; the cap is {CAP}")
    if len(records) != FLOOD:
        problems.append(f"{len(records)} decisions for {FLOOD} escalations")
    for record in records:
        open_then = open_at[record.sequence]
        if record.disposition is Disposition.DENIED:
            denied = record.details["denied"]
            if (denied["scope"], denied["limit"], open_then) != ("open-asks", "open_asks", CAP):
                problems.append(f"denied without a full cap: {denied}, {open_then} open")
        elif record.disposition is not Disposition.ESCALATED:
            problems.append(f"unexpected {record.disposition}")
    return problems


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_ra16_an_escalation_flood_never_holds_more_open_asks_than_the_cap(
    tmp_path: Path, kind: str
) -> None:
    store = None if kind == "memory" else f"sqlite:///{tmp_path / 'flood.db'}"
    run, seconds = flood(store)
    assert cap_problems(run) == []
    rows = decisions(run.blackboard.model.reader).values()
    escalated = sum(1 for r in rows if r["disposition"] == "ESCALATED")
    assert CAP < escalated < FLOOD  # asks kept opening as others were answered
    assert len(run.supervisor.open_asks()) <= CAP
    print(f"{kind}: {FLOOD} escalations supervised in {seconds:.1f} s, {escalated} asked")
    run.close()


def test_negative_control_a_stale_count_of_open_asks_is_caught() -> None:
    run, _ = flood(None, stale=True)
    problems = cap_problems(run)
    assert any("asks were open at once" in p for p in problems), problems
    run.close()

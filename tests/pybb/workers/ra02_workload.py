"""RA-02's workload: what each seeded run does, in a child forked per incarnation.

A run is three phases, each on a board of its own: a supervised repair run (W1's ladder
with an on_pass tier that fails measurements of 2, so some entries escalate), whose
escalations go through ``pybb.supervision`` and a buddhi budget of two asks on the same
board; one scripted answer; a second controller run; the run closed. Every fault point
is on that path: the store's commit, the sources, escalation, budget, answer and close.

The child installs ``SeededPlan(seed, incarnation)`` and runs until it finishes (exit 0)
or a fault fires (``os._exit(137)``, or an ``InjectedFault``: exit 3); the parent starts
the next incarnation, which resumes from the board. Everything the run decides is fixed
(a frozen clock, fixed answers), so runs with and without faults can be compared.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from datetime import UTC, datetime
from typing import Any

import buddhi
from blackboard.faults import InjectedFault, SeededPlan, install
from blackboard.stores import Store, open_store
from buddhi import BudgetTree, GraduatedBar
from buddhi.reference import DEFAULT_POLICY, ReferencePack
from buddhi.testing import FakeClock
from pybb import (
    AttemptError,
    Blackboard,
    BlackboardEntry,
    Controller,
    ControllerObserver,
    KnowledgeSource,
)
from pybb._engine.journal import Journal, Pending
from pybb._engine.projection import ATTEMPTS, Projection
from pybb.human import answer_rule, compose_rules
from pybb.supervision import (
    SUPERVISION_PREMISES,
    SUPERVISION_REGIONS,
    SupervisionSettings,
    Supervisor,
    supervision_rule,
)
from pybb.workloads import Decrement, ZeroEven, less_than_3

PHASES = 3
ENTRIES = 12
CEILING = 2
ANSWER_AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
FROZEN = datetime(2026, 3, 1, tzinfo=UTC)


class Confirm(KnowledgeSource):
    """An on_pass tier that fails a measurement of 2 (so passing entries escalate too)."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        if blackboard.get_entry(key).measurement == 2:
            raise AttemptError("2 is suspicious", report={"key": key})
        return None


class Acks(ControllerObserver):
    """Appends ``ACK <board> <head>`` to a file after every committed cycle."""

    def __init__(self, path: str, board: str) -> None:
        self.path, self.board = path, board

    def on_cycle(self, cycle: Any) -> None:
        ack(self.path, self.board, cycle.sequence)


def ack(path: str, board: str, head: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"ACK {board} {head}\n".encode())
    finally:
        os.close(descriptor)


class AckEarlyJournal(Journal):
    acks = ""

    def _commit(self, items: list[Pending]) -> bool:
        ack(self.acks, self.board_id, self._state.head + len(items))
        return super()._commit(items)


class ForgetfulJournal(Journal):
    """Negative control: a resume that forgets attempts and writes them without their keys."""

    def _rebuild(self) -> None:
        state = Projection()
        for record in self.model.reader.log():
            if record.region != ATTEMPTS and record.region is not None:
                state.apply(record.region, record.content, record.sequence, record.version or 0)
            state.head = record.sequence
        self._state = state

    def emit(
        self, region: str, writer: str, content: Any, key: str | None, judged: Any = None
    ) -> None:
        super().emit(region, writer, content, None if region == ATTEMPTS else key, judged)


class AckEarly(Blackboard):
    """Negative control: acknowledges a batch before committing it."""

    journal_class = AckEarlyJournal


class Forgetful(Blackboard):
    """Negative control: a resume that forgets the attempts already on the board."""

    journal_class = ForgetfulJournal


BOARDS: dict[str, type[Blackboard]] = {
    "real": Blackboard,
    "ack-early": AckEarly,
    "forgetful": Forgetful,
}


def phase(store: Store, board_id: str, variant: str, acks: str) -> None:
    """One phase: repair, supervise, answer, repair again, close (each resumable)."""
    board = BOARDS[variant](
        store, board_id, admission_rule=compose_rules(answer_rule, supervision_rule),
        regions=SUPERVISION_REGIONS, premises=dict(SUPERVISION_PREMISES),
    )  # fmt: skip
    if isinstance(board.journal, AckEarlyJournal):
        board.journal.acks = acks
    if board.model.reader.outcome().closed:
        return
    controller = _controller(board, acks)
    board.write_entries(
        {
            f"e{i}": BlackboardEntry(predicate="less_than_3", measurement=i % 10)
            for i in range(ENTRIES)
        }
    )
    ack(acks, board_id, board.head)
    controller.run()
    _answer(board, controller)
    ack(acks, board_id, board.head)
    controller.run()
    outcome = board.model.control.complete("phase done")
    ack(acks, board_id, outcome.sequence or 0)


def _controller(board: Blackboard, acks: str) -> Controller:
    flat = dataclasses.replace(DEFAULT_POLICY, bar=GraduatedBar(floor=0.0, rise=1.000001))
    settings = SupervisionSettings(
        policy=ReferencePack(flat), budget=BudgetTree.single_pool(CEILING)
    )
    clock: buddhi.Clock = FakeClock(FROZEN)
    supervisor = Supervisor(board, settings, clock=clock)
    controller = Controller(board, max_cycles=200)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3",
        on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)],
        on_pass=[Confirm("confirm", 1)],
    )
    supervisor.bind(controller)
    controller.add_observer(Acks(acks, board.board_id))
    board.refresh()
    return controller


def _answer(board: Blackboard, controller: Controller) -> None:
    """The scripted person: answers the first escalation of the phase, once."""
    answered = [k for k in board.entries if board.get_resolution(k) is not None]
    if answered:
        return
    escalated = sorted(board.escalate, key=lambda k: board.get_escalation(k).sequence)  # type: ignore[union-attr]
    controller.resolve(escalated[0], "use 0", by="ops@example.com", at=ANSWER_AT, measurement=0)


def incarnation(
    url: str, prefix: str, seed: int | None, number: int, variant: str, acks: str,
    faults: str, errors: str, calm_after: int | None = None,
) -> None:  # fmt: skip
    """One start of a run, in a forked child: exits 0 (done), 137 or 3 (a fault), 1 (a bug)."""
    plan = None if seed is None else SeededPlan(seed, number, log=faults, calm_after=calm_after)
    install(plan)
    code = 0
    try:
        store = open_store(url)
        for n in range(PHASES):
            phase(store, f"{prefix}-{n}", variant, acks)
    except InjectedFault:
        code = 3
    except BaseException:
        with open(errors, "a") as file:
            file.write(traceback.format_exc())
        code = 1
    os._exit(code)  # no cleanup: a crash leaves what it leaves

"""Workloads shared by the pybb reliability tests and the child processes they kill."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pybb import (
    AttemptError,
    Blackboard,
    BlackboardEntry,
    Controller,
    ControllerObserver,
    KnowledgeSource,
    RetryPolicy,
)
from pybb.workloads import Decrement, FixComponent, ZeroEven

ANSWER_AT = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)


class Confirm(KnowledgeSource):
    """An on_pass tier: confirms a pass, except that it fails measurements equal to 2."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        measurement = blackboard.get_entry(key).measurement
        if measurement == 2:
            raise AttemptError("2 is suspicious", report={"why": "measurement is 2", "key": key})
        return None


def ra01_controller(board: Blackboard) -> Controller:
    """RA-01's repair run: four sources on scalar and pair entries, some escalations."""
    controller = Controller(board, max_cycles=500)
    controller.register_predicate("less_than_3", lambda m: m < 3)
    controller.register_predicate("is_positive", lambda m: m > 0)
    controller.route_predicate(
        "less_than_3",
        on_fail=[Decrement("decrement", 10), ZeroEven("zero_even", 1)],
        on_pass=[Confirm("confirm", 1)],
    )
    fix_x = FixComponent("fix_x", 8, component="x", fix=lambda x: x - 1)
    fix_y = FixComponent("fix_y", 2, component="y", fix=lambda y: y + 1)
    for i in range(ra01_pairs()):
        controller.route(f"p{i}", on_fail=[fix_x, fix_y])
    return controller


def ra01_scalars() -> int:
    return 300


def ra01_pairs() -> int:
    return 60


def ra01_entries() -> dict[str, BlackboardEntry]:
    entries = {
        f"s{i}": BlackboardEntry(predicate="less_than_3", measurement=(i * 7) % 19)
        for i in range(ra01_scalars())
    }
    for i in range(ra01_pairs()):
        entries[f"p{i}"] = BlackboardEntry(
            conditions={"x": "less_than_3", "y": "is_positive"},
            measurement={"x": 2 + i % 9, "y": -(i % 3)},
        )
    return entries


def ra01_answer(board: Blackboard, controller: Controller) -> None:
    """The scripted human: answers the first escalation on the board, once."""
    escalated = sorted(board.escalate, key=lambda k: board.get_escalation(k).sequence)  # type: ignore[union-attr]
    answered = [k for k in board.entries if board.get_resolution(k) is not None]
    key = answered[0] if answered else escalated[0]
    controller.resolve(key, "use 0", by="ops@example.com", at=ANSWER_AT, measurement=0)


# -- RA-07: a flaky source --------------------------------------------------------------

M = 3
TIMEOUT = 0.1
BACKOFF = RetryPolicy(timedelta(seconds=2), 3.0)


def behaviour(seed: int, key: str, attempt: int, kills: bool) -> str:
    """What the flaky source does on (key, attempt): succeed, raise, timeout or kill."""
    roll = random.Random(f"{seed}/{key}/{attempt}").random()
    if roll < 0.3:
        return "succeed"
    if roll < 0.8:
        return "raise"
    if roll < 0.88:
        return "timeout"
    return "kill" if kills else "raise"


class Ledger:
    """An append-only side file: one line per execution, written with one ``write(2)``."""

    def __init__(self, path: Path, generation: int) -> None:
        self.path = path
        self.generation = generation
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(self, **fields: Any) -> None:
        os.write(self.fd, (json.dumps({"gen": self.generation, **fields}) + "\n").encode())

    def executed(self) -> set[tuple[str, int]]:
        if not self.path.exists():
            return set()
        lines = self.path.read_text().splitlines()
        return {(d["key"], d["attempt"]) for d in map(json.loads, lines) if d.get("op") == "exec"}


class Flaky(KnowledgeSource):
    """Succeeds (writes 0), raises, times out or kills its own process, by a seeded roll.

    A kill happens only on the first execution of an attempt (the ledger says whether
    this attempt ran before), so a restarted process makes progress.
    """

    def __init__(self, seed: int, ledger: Ledger | None, *, kills: bool) -> None:
        super().__init__("flaky", M, timeout=TIMEOUT, retry=BACKOFF)
        self.seed = seed
        self.ledger = ledger
        self.kills = kills
        self.ran_before = ledger.executed() if ledger is not None else set()
        self.executions: list[tuple[str, int]] = []

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        attempt = blackboard.get_entry(key).ks_history.get("flaky", 0) + 1
        self.executions.append((key, attempt))
        if self.ledger is not None:
            self.ledger.log(op="exec", key=key, attempt=attempt)
        action = behaviour(self.seed, key, attempt, self.kills)
        if action == "kill" and (key, attempt) in self.ran_before:
            action = "raise"
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if action == "raise":
            raise AttemptError(f"roll says raise on attempt {attempt}", report={"attempt": attempt})
        if action == "timeout":
            time.sleep(TIMEOUT * 4)
            return 0  # too late: the attempt is over and this write is refused
        return 0


class LedgerObserver(ControllerObserver):
    """Writes each escalation and resolution it is told to the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def on_escalated(self, escalation: Any) -> None:
        self.ledger.log(op="escalated", key=escalation.key, id=escalation.id)

    def on_resolved(self, resolution: Any) -> None:
        self.ledger.log(op="resolved", key=resolution.key, seq=resolution.sequence)


def ra07_controller(board: Blackboard, source: Flaky, clock: Any = None) -> Controller:
    controller = Controller(board, max_cycles=400, clock=clock)
    controller.register_predicate("is_zero", lambda m: m == 0)
    controller.route_predicate("is_zero", [source])
    return controller


def ra07_entries(n: int) -> dict[str, BlackboardEntry]:
    return {f"a{i}": BlackboardEntry(predicate="is_zero", measurement=1 + i % 5) for i in range(n)}

"""Named fault points: the places where reliability tests make a process fail on purpose.

``fault_point("store.before_commit")`` marks a place in the code. It does nothing (one
global read) unless a test installed a plan, with :func:`install` or, in a child
process, through the ``BLACKBOARD_FAULTS`` environment variable (the JSON of
:class:`SeededPlan`'s arguments). RA-02 (``crash_points_buggify``) activates each point
under a seed and fires it as ``os._exit(137)``, an exception or a delay, FoundationDB's
"buggify" way.

Public so that every package marks its own points with the kernel's one mechanism
(pybb and buddhi's board store call :func:`fault_point`) and so that reliability tests
arm them: ``install(plan)`` in the process, or ``BLACKBOARD_FAULTS`` for a child. A new
point is added to :data:`POINTS`, which names every point and where it is.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from typing import Final, Protocol

__all__ = [
    "ENVIRONMENT",
    "EXIT_STATUS",
    "POINTS",
    "FaultPlan",
    "InjectedFault",
    "SeededPlan",
    "fault_point",
    "install",
]

POINTS: Final = {
    "store.before_commit": "inside the admitting transaction, its writes applied, before COMMIT",
    "store.after_commit": "after the store committed a batch, before the writer hears of it",
    "ks.mid": "inside a knowledge source's attempt, before its execute() runs",
    "ks.after": "after a knowledge source's attempt returned, before its record is admitted",
    "escalation.create": "as the controller escalates an entry, before the record is written",
    "answer.apply": "as a person's answer (a resolution) is applied, before it is written",
    "budget.consume": "as buddhi's board store charges a budget, before its compare-and-set",
    "run.close": "as a run is closed, before its CLOSE record is written",
}
"""Every registered fault point and where it is."""

ENVIRONMENT: Final = "BLACKBOARD_FAULTS"
"""The environment variable a child process reads its plan from (JSON, see SeededPlan)."""

EXIT_STATUS: Final = 137
"""The exit status of an ``exit`` fault: what a SIGKILLed process reports to a shell."""


class InjectedFault(BaseException):
    """A fault point fired as an exception.

    A ``BaseException``, like ``KeyboardInterrupt``: it unwinds the operation the way a
    crash would, through every ``finally`` and rollback, and no ``except Exception``
    (a knowledge source's failure, an observer's) mistakes it for the code's own error.
    """


class FaultPlan(Protocol):
    """Decides what a fault point does when it is reached."""

    def hit(self, point: str) -> None:
        """Reached ``point``: do nothing, exit, raise or sleep."""
        ...


_plan: FaultPlan | None = None


def fault_point(name: str) -> None:
    """Mark a fault point; a no-op unless a plan is installed."""
    plan = _plan
    if plan is not None:
        plan.hit(name)


def install(plan: FaultPlan | None) -> FaultPlan | None:
    """Make ``plan`` decide every fault point from now on (``None``: none); return the old one."""
    global _plan
    previous, _plan = _plan, plan
    return previous


class SeededPlan:
    """RA-02's plan: under a seed, each point is active with ``activate`` and fires with ``fire``.

    Which points are active follows from the seed alone, so every incarnation of a run
    (each restart after a crash) has the same ones; whether a hit fires, and how,
    follows from the seed, the incarnation and the order of hits, so the same seed
    replays the same faults in a deterministic program.

    Args:
        seed: The run's seed.
        incarnation: Which start of the run this is (0, then 1 after the first crash...).
        activate: The chance that a point is active in this run.
        fire: The chance that an active point fires when reached.
        actions: What a firing may do: ``"exit"`` (``os._exit(137)``), ``"raise"``
            (:class:`InjectedFault`) or ``"delay"`` (sleep 1 to 20 ms).
        points: The points the plan may activate.
        log: A file to append one JSON line to per firing, before it acts.
        calm_after: From this incarnation on, a firing only delays: a run crashed that
            many times is let finish (FoundationDB's quiet phase), so every run ends.
    """

    def __init__(
        self,
        seed: int,
        incarnation: int = 0,
        *,
        activate: float = 0.25,
        fire: float = 0.25,
        actions: Iterable[str] = ("exit", "raise", "delay"),
        points: Iterable[str] = tuple(POINTS),
        log: str | None = None,
        calm_after: int | None = None,
    ) -> None:
        self.seed = seed
        self.incarnation = incarnation
        chooser = random.Random(f"{seed}/active")
        self.active = frozenset(p for p in sorted(points) if chooser.random() < activate)
        self.fire = fire
        calm = calm_after is not None and incarnation >= calm_after
        self.actions = ("delay",) if calm else tuple(actions)
        self.log = log
        self.fired: list[tuple[str, str]] = []
        self._random = random.Random(f"{seed}/{incarnation}")

    @classmethod
    def from_environment(cls) -> SeededPlan | None:
        """The plan ``BLACKBOARD_FAULTS`` describes, if it is set."""
        text = os.environ.get(ENVIRONMENT)
        if not text:
            return None
        options = json.loads(text)
        return cls(options.pop("seed"), options.pop("incarnation", 0), **options)

    def hit(self, point: str) -> None:
        """Fire ``point`` if it is active and the roll says so."""
        if point not in self.active or self._random.random() >= self.fire:
            return
        action = self._random.choice(self.actions)
        self.fired.append((point, action))
        if self.log is not None:
            line = json.dumps({"point": point, "action": action, "pid": os.getpid()})
            descriptor = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, (line + "\n").encode())
            finally:
                os.close(descriptor)
        if action == "exit":
            os._exit(EXIT_STATUS)
        if action == "raise":
            raise InjectedFault(f"fault point {point!r} fired (seed {self.seed})")
        time.sleep(self._random.uniform(0.001, 0.02))


_plan = SeededPlan.from_environment()

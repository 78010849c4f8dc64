"""What a person's decision does beyond resolving its entry: the application's effect."""

from __future__ import annotations

from typing import Any

from pybb import Controller, Escalation
from pybb.human import Answer

__all__ = ["DecisionEffect", "NoEffect"]


class DecisionEffect:
    """Makes a person's decision take effect; subclass it and override the hooks you need.

    For each answer, the wiring asks :meth:`measurement` for the entry's new
    measurement, resolves the entry with it (``Controller.resolve``, evaluated at
    once), then calls :meth:`apply` and records the answer as applied. In the normal
    course each hook runs once per answer; after a crash between :meth:`apply` and that
    record, :meth:`apply` runs again for the same answer, so it must be idempotent
    (adding a digest to a set is; appending to a list is not). An exception from a
    hook leaves the answer to be applied again at the next poll.
    """

    def measurement(self, answer: Answer, escalation: Escalation) -> Any:
        """The entry's measurement once ``answer`` is applied, or ``None`` to keep it."""
        return None

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        """Make ``answer`` (``answer.option`` is the decision) take effect beyond its entry.

        The entry is already resolved. An effect that writes through the kernel and
        then resolves other entries calls ``controller.refresh()`` first.
        """


class NoEffect(DecisionEffect):
    """The effect of an application whose decisions only resolve their entries."""

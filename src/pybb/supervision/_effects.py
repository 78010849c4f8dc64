"""What a person's decision does beyond resolving its entry: the application's effect."""

from __future__ import annotations

from typing import Protocol

from pybb import Controller, Escalation
from pybb.human import Answer

__all__ = ["DecisionEffect", "NoEffect"]


class DecisionEffect(Protocol):
    """Makes a person's decision take effect (e.g. an accepted digest joins an allowlist).

    Called after the answer's resolution of the entry is durable on the board, once per
    answer in the normal course. After a crash between the effect and the wiring's
    record that it ran, it is called again for the same answer, so it must be
    idempotent: applying a decision twice leaves the board as applying it once does
    (adding a digest to a set is; appending to a list is not). Raising leaves the
    answer unapplied-for-effect, and it is retried at the next poll.
    """

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        """Make ``answer`` (``answer.option`` is the decision) take effect for the entry."""
        ...


class NoEffect:
    """The effect of an application whose decisions only resolve their entries."""

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        """Do nothing: resolving the entry was all."""

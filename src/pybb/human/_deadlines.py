"""Deadlines: every ask expires, and at its deadline its default decision is applied once.

A :class:`DeadlinePolicy` gives every ask a deadline (``created_at`` plus a duration)
and a default decision (one of its options), overridable per reason, class or scope by
:class:`DeadlineRule`. :func:`apply_deadlines` writes the default of every ask past its
deadline as the ask's answer, ``by="deadline"``, from :data:`DEADLINE_WRITER`. The
``answers`` level is unique on ``ask_id``, so the store admits exactly one answer per
ask: of any number of processes applying one expiry, and of a person answering while
the deadline passes, exactly one write lands and the others are refused as
duplicates. No lock, no leader: whichever process sees the deadline first applies it.
An applied default is an answer like a person's: the ask leaves the open asks (freeing
its open-ask slot) and ``pybb.supervision`` resolves its entry with ``by="deadline"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from blackboard import BoardReader, Control, RejectionCause, Written
from pybb.human._board import AskStatus, ask_state, ask_states
from pybb.human._errors import HumanLoopError
from pybb.human._protocol import ANSWERS, DEADLINE_BY, DEADLINE_WRITER, Answer, Ask

__all__ = [
    "DEFAULT_DEADLINE",
    "DeadlineApplied",
    "DeadlinePolicy",
    "DeadlineRule",
    "apply_deadlines",
    "ask_class",
    "ask_reason",
    "rule_matches",
]

DEFAULT_DEADLINE = timedelta(hours=24)
"""How long an ask waits by default before its default decision is applied."""


def ask_reason(ask: Ask) -> str | None:
    """Why the entry was escalated, as the tier reported it (else the escalation's reason)."""
    data: Mapping[str, Any] = ask.report_data
    tier = data.get("tier_report")
    found = tier.get("reason") if isinstance(tier, Mapping) else None
    found = found if isinstance(found, str) else data.get("reason")
    return found if isinstance(found, str) else None


def ask_class(ask: Ask) -> str | None:
    """The class of what the ask is about (e.g. a device class), as the tier reported it."""
    data: Mapping[str, Any] = ask.report_data
    tier = data.get("tier_report")
    found = tier.get("class") if isinstance(tier, Mapping) else None
    return found if isinstance(found, str) else None


def rule_matches(ask: Ask, reason: str | None, klass: str | None, scope: str | None) -> bool:
    """Whether a rule naming ``reason``, ``klass`` and ``scope`` (each optional) fits ``ask``.

    A scope matches itself and every scope below it (``fleet`` matches ``fleet/web``).
    """
    if reason is not None and ask_reason(ask) != reason:
        return False
    if klass is not None and ask_class(ask) != klass:
        return False
    return scope is None or ask.scope == scope or ask.scope.startswith(scope + "/")


def _check_duration(kind: str, name: str, value: object) -> None:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise HumanLoopError(f"{kind} {name} must be a positive timedelta, got {value!r}")


def _check_reminders(kind: str, value: object) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(r, timedelta) and r > timedelta(0) for r in value
    ):
        raise HumanLoopError(
            f"{kind} remind must be a tuple of positive timedeltas (how long before the "
            f"deadline each reminder goes out), got {value!r}"
        )


@dataclass(frozen=True, slots=True)
class DeadlineRule:
    """A deadline for the asks of one reason, class or scope (every given field must match).

    Attributes:
        after: How long after the ask is made its deadline falls.
        default: The option id applied at the deadline; ``None``: the ask's recommended
            option. An ask that lacks this option gets its recommended one.
        reason: Asks whose :func:`ask_reason` is this.
        klass: Asks whose :func:`ask_class` is this.
        scope: Asks whose budget scope is this or below it (``"fleet"`` matches
            ``"fleet/site-a"``).
        remind: How long before the deadline each reminder goes out.
    """

    after: timedelta
    default: str | None = None
    reason: str | None = None
    klass: str | None = None
    scope: str | None = None
    remind: tuple[timedelta, ...] = (timedelta(hours=1),)

    def __post_init__(self) -> None:
        _check_duration("DeadlineRule", "after", self.after)
        _check_reminders("DeadlineRule", self.remind)

    def matches(self, ask: Ask) -> bool:
        """Whether this rule is the one for ``ask``."""
        return rule_matches(ask, self.reason, self.klass, self.scope)


@dataclass(frozen=True, slots=True)
class DeadlinePolicy:
    """Every ask's deadline and default decision: a default, overridden by the first rule.

    Attributes:
        after: How long an ask waits before its default is applied (24 hours by default:
            generous, so a person normally answers first).
        default: The option id applied at the deadline; ``None``: the ask's recommended
            (starred) option.
        remind: How long before the deadline each reminder goes out (one hour before).
        rules: Overrides per reason, class or scope; the first that matches wins.
    """

    after: timedelta = DEFAULT_DEADLINE
    default: str | None = None
    remind: tuple[timedelta, ...] = (timedelta(hours=1),)
    rules: tuple[DeadlineRule, ...] = ()

    def __post_init__(self) -> None:
        _check_duration("DeadlinePolicy", "after", self.after)
        _check_reminders("DeadlinePolicy", self.remind)
        if not isinstance(self.rules, tuple) or not all(
            isinstance(r, DeadlineRule) for r in self.rules
        ):
            raise HumanLoopError(
                f"DeadlinePolicy rules must be a tuple of DeadlineRule, got {self.rules!r}"
            )

    def rule_for(self, ask: Ask) -> DeadlineRule:
        """The rule for ``ask``: the first that matches, else the policy's own defaults."""
        for rule in self.rules:
            if rule.matches(ask):
                return rule
        return DeadlineRule(self.after, self.default, remind=self.remind)

    def due(self, ask: Ask) -> datetime:
        """When ``ask`` expires: its own deadline, else ``created_at`` plus the rule's."""
        if ask.deadline is not None:
            return ask.deadline
        return ask.created_at + self.rule_for(ask).after

    def default_for(self, ask: Ask) -> str:
        """The option applied at the deadline: the ask's own, the rule's, or the starred one."""
        if ask.default_option is not None:
            return ask.default_option
        wanted = self.rule_for(ask).default
        if wanted is not None and ask.option(wanted) is not None:
            return wanted
        return ask.recommended.id

    def reminders(self, ask: Ask) -> tuple[datetime, ...]:
        """When the reminders of ``ask`` are due, earliest first (none before it was made)."""
        due = self.due(ask)
        times = {due - before for before in self.rule_for(ask).remind}
        return tuple(sorted(t for t in times if t > ask.created_at))

    def stamp(self, ask: Ask) -> Ask:
        """``ask`` carrying its deadline and default, as it is posted on the board."""
        return replace(ask, deadline=self.due(ask), default_option=self.default_for(ask))


@dataclass(frozen=True, slots=True)
class DeadlineApplied:
    """One default written at a deadline by this call.

    Attributes:
        ask_id: The expired ask.
        option: The default applied.
        due: The ask's deadline.
        sequence: The board sequence of the default (its answer).
    """

    ask_id: str
    option: str
    due: datetime
    sequence: int


def apply_deadlines(
    control: Control,
    reader: BoardReader,
    policy: DeadlinePolicy,
    *,
    now: datetime,
    writer: str = DEADLINE_WRITER,
) -> tuple[DeadlineApplied, ...]:
    """Write the default decision of every open ask past its deadline, exactly once.

    Each default is the ask's answer (``by="deadline"``, ``at`` = its deadline), so the
    ``answers`` level's unique ``ask_id`` admits one write per ask whoever races it:
    other processes applying the same expiry, or a person answering. A refused
    duplicate means someone else settled the ask first and is not an error.

    Args:
        control: The board's write path.
        reader: The board.
        policy: The deadlines and defaults.
        now: The time (from the run's clock, so tests may use a fake one).
        writer: Who writes the defaults (the answer rule admits ``by="deadline"`` only
            from :data:`DEADLINE_WRITER`).

    Returns:
        The defaults this call wrote (those another writer won are left out).
    """
    applied = []
    for state in ask_states(reader):
        if state.status is not AskStatus.OPEN:
            continue
        due = policy.due(state.ask)
        if due > now:
            continue
        option = policy.default_for(state.ask)
        content = Answer(state.ask.ask_id, option, DEADLINE_BY, _note(due), due)
        result = control.write(writer, ANSWERS, content.to_json())
        if isinstance(result, Written):
            applied.append(DeadlineApplied(state.ask.ask_id, option, due, result.sequence))
        elif not _settled(reader, state.ask.ask_id, result.cause):
            raise HumanLoopError(
                f"the board refused the deadline default of ask {state.ask.ask_id!r}: "
                f"{result.reason}"
            )
    return tuple(applied)


def _settled(reader: BoardReader, ask_id: str, cause: RejectionCause) -> bool:
    """Whether a refused default lost to another settlement (an answer, a closure)."""
    if cause is RejectionCause.DUPLICATE:
        return True
    found = ask_state(reader, ask_id)
    return found is not None and found.status is not AskStatus.OPEN


def _note(due: datetime) -> str:
    return f"nobody answered by the deadline ({due.isoformat()}); the default was applied"

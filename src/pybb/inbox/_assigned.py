"""Whom each ask is for and when it expires, as the inbox shows them; reassigning an ask.

Framework-free and synchronous, like ``_service``. The assignee of an ask is
:func:`pybb.human.assignees`: the latest reassignment on the board's ``assignments``
level, else the :class:`~pybb.human.AssignmentPolicy` route. The person signed in sees
their own asks first, then their teams' (their teams are board data, the ``people``
level), then the rest. A board that declares no ``pybb.human.PEOPLE_REGIONS`` keeps no
people and no reassignments: its asks go by the policy alone and cannot be reassigned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from blackboard import Model, Rejected, RejectionCause
from pybb.human import (
    ASSIGNMENTS,
    PEOPLE,
    TEAM_PREFIX,
    Ask,
    AskState,
    AskStatus,
    Assignment,
    AssignmentPolicy,
    DeadlinePolicy,
    MalformedContentError,
    Person,
    assignees,
    assignments,
    directory,
    human_name,
    reassign,
    team_name,
)
from pybb.inbox._service import Outcome, visible_state

__all__ = [
    "RANKS",
    "Due",
    "Reassigned",
    "Routing",
    "due_of",
    "reassign_rows",
    "routing",
    "submit_reassign",
]

_log = logging.getLogger("pybb.inbox")

RANKS = ("mine", "team", "other")
"""What a rank means: the person's own asks, their teams', everyone else's (or nobody's)."""

_MAX_NOTE = 2_000
_BLANKS = " \t\r\n"  # what a note may not consist of alone (the API's schema says the same)
_MAX_NAMED = 12  # people and teams named in a refusal of an unknown assignee


@dataclass(frozen=True, slots=True)
class Routing:
    """Whom the asks on a page are for, seen by one person.

    Attributes:
        human: The person signed in.
        teams: Their teams (names, without ``team:``).
        targets: Each ask's assignee by ask id (``None``: nobody).
        people: The board's people.
        recorded: Whether the board keeps reassignments (declares the ``assignments`` level).
    """

    human: str
    teams: frozenset[str] = frozenset()
    targets: Mapping[str, str | None] = field(default_factory=dict)
    people: Mapping[str, Person] = field(default_factory=dict)
    recorded: bool = False

    def target(self, ask: Ask) -> str | None:
        """Whom ``ask`` is for now."""
        return self.targets.get(ask.ask_id)

    def rank(self, ask: Ask) -> int:
        """0: the person's own ask, 1: one of their teams', 2: anyone else's or nobody's."""
        target = self.target(ask)
        if target == self.human:
            return 0
        team = team_name(target)
        return 1 if team is not None and team in self.teams else 2

    def teams_of(self, ask: Ask) -> set[str]:
        """The teams whose ask this is: the assigned team, or the assigned person's teams."""
        target = self.target(ask)
        team = team_name(target)
        if team is not None:
            return {team}
        person = self.people.get(target) if target is not None else None
        return set(person.teams) if person is not None else set()

    def shown(self, ask: Ask) -> str:
        """The assignee as the person reads it."""
        target = self.target(ask)
        if target is None:
            return "nobody"
        if target == self.human:
            return "you"
        team = team_name(target)
        return f"{target} (your team)" if team is not None and team in self.teams else target

    def choices(self) -> list[str]:
        """The people and teams an ask may be reassigned to (for the form's suggestions)."""
        teams = sorted({TEAM_PREFIX + t for p in self.people.values() for t in p.teams})
        return sorted(self.people) + teams


def routing(model: Model, human: str, policy: AssignmentPolicy, asks: Iterable[Ask]) -> Routing:
    """The :class:`Routing` of ``asks`` for ``human``."""
    regions = model.regions
    people = directory(model.reader) if PEOPLE in regions else {}
    person = people.get(human)
    recorded = ASSIGNMENTS in regions
    if recorded:
        targets = assignees(model.reader, asks, policy)
    else:
        targets = {ask.ask_id: policy.route(ask) for ask in asks}
    teams = frozenset(person.teams) if person is not None else frozenset()
    return Routing(human, teams, targets, people, recorded)


@dataclass(frozen=True, slots=True)
class Due:
    """An ask's deadline as the inbox shows it.

    Attributes:
        at: When the default is applied.
        left: The time left, in words (``"in 3 h 20 min"``, ``"overdue by 5 min"``).
        overdue: Whether the deadline has passed (the run applies the default when it
            next looks).
        option: The option applied at the deadline.
        label: Its label.
    """

    at: datetime
    left: str
    overdue: bool
    option: str
    label: str


def due_of(ask: Ask, policy: DeadlinePolicy | None, now: datetime) -> Due | None:
    """When ``ask`` expires and what is decided then; ``None`` if nothing says.

    An ask carries its deadline and default when the run posted it with a deadline
    policy (``pybb.supervision`` always does); otherwise ``policy`` computes them, and
    with no policy either the inbox does not guess.
    """
    if ask.deadline is None and policy is None:
        return None
    rules = DeadlinePolicy() if policy is None else policy
    at = rules.due(ask)
    option = rules.default_for(ask)
    chosen = ask.option(option)
    left = at - now
    overdue = left <= timedelta(0)
    words = f"overdue by {_duration(-left)}" if overdue else f"in {_duration(left)}"
    return Due(at, words, overdue, option, chosen.label if chosen else option)


def _duration(span: timedelta) -> str:
    minutes = max(1, int(span.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


@dataclass(frozen=True, slots=True)
class Reassigned:
    """The result of reassigning an ask.

    Attributes:
        outcome: How it ended (its value is the HTTP status).
        message: A sentence for the person.
        code: Why, for programs: ``written``, ``malformed``, ``note_required``,
            ``unknown_assignee``, ``not_addressed``, ``unchanged``, ``not_found``,
            ``answered``, ``closed``, ``run_closed``, ``not_recorded`` or ``forbidden``.
        assignment: The reassignment written, when written.
        sequence: Its sequence number, when written.
        state: The ask as it stands after the attempt, if it exists for this person.
    """

    outcome: Outcome
    message: str
    code: str
    assignment: Assignment | None = None
    sequence: int | None = None
    state: AskState | None = None


def submit_reassign(
    model: Model,
    human: str,
    ask_id: str,
    to: str,
    note: str,
    policy: AssignmentPolicy,
) -> Reassigned:
    """Reassign open ask ``ask_id`` to ``to`` (a person or a team) as ``human``, with a note.

    ``to`` is ``human:<name>``, ``team:<name>`` or a bare name (a person). The note is
    required: whoever gets the ask reads why. When the board knows its people, ``to``
    must be one of them or one of their teams.
    """
    if ASSIGNMENTS not in model.regions:
        message = (
            "This run keeps no reassignments: its board declares no pybb.human.PEOPLE_REGIONS."
        )
        return Reassigned(Outcome.FORBIDDEN, message, "not_recorded")
    state = visible_state(model, human, ask_id)
    if state is None:
        return Reassigned(Outcome.NOT_FOUND, "There is no such ask for you.", "not_found")
    if state.status is not AskStatus.OPEN:
        settled = "answered" if state.status is AskStatus.ANSWERED else "closed"
        message = f"This ask is {settled}; only an open ask is reassigned."
        return Reassigned(Outcome.CONFLICT, message, settled, state=state)
    target = _target(to)
    if target is None:
        message = "Reassign it to a person (human:<name>) or a team (team:<name>)."
        return Reassigned(Outcome.INVALID, message, "malformed", state=state)
    note = note.strip(_BLANKS) if isinstance(note, str) else ""
    if not note or len(note) > _MAX_NOTE:
        message = "Say why you reassign it: a note of 1 to 2,000 characters."
        return Reassigned(Outcome.INVALID, message, "note_required", state=state)
    refusal = _refusal(model, state.ask, target, human, policy)
    if refusal is not None:
        code, message = refusal
        outcome = Outcome.CONFLICT if code == "unchanged" else Outcome.INVALID
        return Reassigned(outcome, message, code, state=state)
    try:
        result = reassign(model.control, human, ask_id, target, note)
    except MalformedContentError as exc:
        return Reassigned(Outcome.INVALID, f"{exc.problem}.", "malformed", state=state)
    if isinstance(result, Rejected):
        return _lost(model, human, ask_id, result)
    _log.info("%s reassigned ask %r to %r (sequence %d)", human, ask_id, target, result.sequence)
    made = assignments(model.reader, ask_id)[-1]
    after = visible_state(model, human, ask_id)
    message = f"Reassigned to {target}."
    return Reassigned(Outcome.WRITTEN, message, "written", made, result.sequence, after)


def reassign_rows(model: Model, states: Iterable[AskState]) -> list[dict[str, Any]]:
    """Every reassignment of the asks in ``states``, as rows of the decided view."""
    if ASSIGNMENTS not in model.regions:
        return []
    by_id = {s.ask.ask_id: s.ask for s in states}
    return [
        {
            "ask": by_id[made.ask_id],
            "how": "reassigned",
            "by": made.by,
            "at": made.at,
            "what": f"to {made.to}",
            "to": made.to,
            "note": made.note,
        }
        for made in assignments(model.reader)
        if made.ask_id in by_id
    ]


def _target(to: object) -> str | None:
    if not isinstance(to, str):
        return None
    text = to.strip(_BLANKS)
    if human_name(text) is not None or team_name(text) is not None:
        return text
    bare = "human:" + text
    return bare if human_name(bare) is not None and ":" not in text else None


def _refusal(
    model: Model, ask: Ask, target: str, human: str, policy: AssignmentPolicy
) -> tuple[str, str] | None:
    found = routing(model, human, policy, [ask])
    people = found.people
    team = team_name(target)
    members = [p.who for p in people.values() if team in p.teams] if team else []
    if people and (target not in people if team is None else not members):
        named = ", ".join(found.choices()[:_MAX_NAMED])
        return (
            "unknown_assignee",
            f"Nobody on this board is {target}; reassign it to one of: {named}.",
        )
    # Whoever gets it must be able to see it: a person it is addressed to, or a team
    # with someone on it who is.
    hidden = (
        not ask.addressed_to(target)
        if team is None
        else bool(members) and not any(ask.addressed_to(m) for m in members)
    )
    if hidden:
        listed = ", ".join(ask.to)
        return "not_addressed", f"This ask is addressed to {listed} only, not to {target}."
    if found.target(ask) == target:
        return "unchanged", f"This ask is already assigned to {target}."
    return None


def _lost(model: Model, human: str, ask_id: str, result: Rejected) -> Reassigned:
    state = visible_state(model, human, ask_id)
    if result.cause is RejectionCause.RUN_CLOSED:
        message = "This run has closed; it takes no more reassignments."
        return Reassigned(Outcome.CONFLICT, message, "run_closed", state=state)
    if state is not None and state.status is not AskStatus.OPEN:
        settled = "answered" if state.status is AskStatus.ANSWERED else "closed"
        message = f"This ask was {settled} meanwhile; only an open ask is reassigned."
        return Reassigned(Outcome.CONFLICT, message, settled, state=state)
    text = result.reason[:1].upper() + result.reason[1:]
    return Reassigned(Outcome.FORBIDDEN, text.rstrip(".") + ".", "forbidden", state=state)

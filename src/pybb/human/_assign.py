"""Assignment: a policy routes each ask to a person or a team; people reassign with a note.

:class:`AssignmentPolicy` names, per reason, class or scope, who an ask is for
(``human:<name>`` or ``team:<name>``). A reassignment is a board write on the
``assignments`` level (who, to whom, note, when), admitted only from a person in their
own name, and the latest one holds. :func:`asks_for` orders a person's open asks: their
own first, then their teams', then the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from blackboard import BoardReader, Control, Rejected, Written
from pybb.human._board import AskStatus, ask_state, open_asks
from pybb.human._deadlines import rule_matches
from pybb.human._errors import MalformedContentError
from pybb.human._people import ASSIGNMENTS, TEAM_PREFIX, Person, directory, team_name
from pybb.human._protocol import Ask, human_name

__all__ = [
    "AssignRule",
    "Assignment",
    "AssignmentPolicy",
    "asks_for",
    "assignee",
    "assignees",
    "assignments",
    "reassign",
    "recipients",
]


def _check_target(kind: str, value: object) -> None:
    if human_name(value) is None and team_name(value) is None:
        raise MalformedContentError(
            kind, "to", f"{value!r} is neither 'human:<name>' nor '{TEAM_PREFIX}<name>'"
        )


@dataclass(frozen=True, slots=True)
class AssignRule:
    """Route the asks of one reason, class or scope (every given field must match).

    Attributes:
        to: ``human:<name>`` or ``team:<name>``.
        reason: Asks whose ``ask_reason`` is this.
        klass: Asks whose ``ask_class`` is this.
        scope: Asks whose budget scope is this or below it.
    """

    to: str
    reason: str | None = None
    klass: str | None = None
    scope: str | None = None

    def __post_init__(self) -> None:
        _check_target("assign rule", self.to)

    def matches(self, ask: Ask) -> bool:
        """Whether this rule routes ``ask``."""
        return rule_matches(ask, self.reason, self.klass, self.scope)


@dataclass(frozen=True, slots=True)
class AssignmentPolicy:
    """Who an ask is for: the first matching rule, else ``default`` (``None``: nobody).

    Attributes:
        rules: The routes, in order.
        default: Where an ask no rule matches goes.
    """

    rules: tuple[AssignRule, ...] = ()
    default: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rules, tuple) or not all(
            isinstance(r, AssignRule) for r in self.rules
        ):
            raise MalformedContentError(
                "assignment policy", "rules", "must be a tuple of AssignRule"
            )
        if self.default is not None:
            _check_target("assignment policy", self.default)

    def route(self, ask: Ask) -> str | None:
        """The person or team the policy assigns ``ask`` to."""
        for rule in self.rules:
            if rule.matches(ask):
                return rule.to
        return self.default

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON (what :meth:`from_json` reads)."""
        rules = []
        for rule in self.rules:
            found = {"to": rule.to, "reason": rule.reason, "class": rule.klass}
            found["scope"] = rule.scope
            rules.append({k: v for k, v in found.items() if v is not None})
        return {"default": self.default, "rules": rules}

    @classmethod
    def from_json(cls, data: object) -> AssignmentPolicy:
        """Read a policy: ``{"default": "team:triage", "rules": [{"to": ..., ...}]}``.

        Each rule has ``to`` (``human:<name>`` or ``team:<name>``) and any of ``reason``,
        ``class`` and ``scope``; the first rule that matches an ask routes it.

        Raises:
            MalformedContentError: ``data`` is not such a policy (the message names the
                key and what it takes).
        """
        kind = "assignment policy"
        if not isinstance(data, Mapping):
            raise MalformedContentError(kind, "content", "must be an object with default, rules")
        unknown = sorted(set(data) - {"default", "rules"})
        if unknown:
            raise MalformedContentError(
                kind, "content", f"{unknown[0]!r} is not a key; it takes default, rules"
            )
        raw = data.get("rules", [])
        if not isinstance(raw, list):
            raise MalformedContentError(kind, "rules", "must be a list of rule objects")
        rules = tuple(_rule_from_json(n, r) for n, r in enumerate(raw))
        default = data.get("default")
        if default is not None and not isinstance(default, str):
            raise MalformedContentError(kind, "default", "must be 'human:<name>' or 'team:<name>'")
        return cls(rules, default)


def _rule_from_json(n: int, data: object) -> AssignRule:
    kind = f"assignment rule {n + 1}"
    if not isinstance(data, Mapping):
        raise MalformedContentError(kind, "content", "must be an object with to (and reason, ...)")
    unknown = sorted(set(data) - {"to", "reason", "class", "scope"})
    if unknown:
        raise MalformedContentError(
            kind, "content", f"{unknown[0]!r} is not a key; a rule takes to, reason, class, scope"
        )
    if "to" not in data:
        raise MalformedContentError(kind, "to", "is missing: 'human:<name>' or 'team:<name>'")
    for key in ("reason", "class", "scope"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise MalformedContentError(kind, key, "must be text")
    return AssignRule(data["to"], data.get("reason"), data.get("class"), data.get("scope"))


@dataclass(frozen=True, slots=True)
class Assignment:
    """A reassignment of an ask, as the ``assignments`` level keeps it.

    Attributes:
        ask_id: The ask.
        to: Whom it is now for, ``human:<name>`` or ``team:<name>``.
        by: Who reassigned it, ``human:<name>``.
        note: Why.
        at: When.
    """

    ask_id: str
    to: str
    by: str
    note: str = ""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        _check_target("assignment", self.to)
        if human_name(self.by) is None:
            raise MalformedContentError(
                "assignment", "by", f"{self.by!r} is not a person; only people reassign asks"
            )
        if not isinstance(self.note, str) or len(self.note) > 2_000:
            raise MalformedContentError(
                "assignment", "note", "must be text of at most 2000 characters"
            )
        if not isinstance(self.at, datetime) or self.at.tzinfo is None:
            raise MalformedContentError("assignment", "at", "must be a timezone-aware datetime")

    def to_json(self) -> dict[str, Any]:
        """The assignment as JSON."""
        return {
            "ask_id": self.ask_id,
            "to": self.to,
            "by": self.by,
            "note": self.note,
            "at": self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: object) -> Assignment:
        """Read an assignment from JSON.

        Raises:
            MalformedContentError: ``data`` is not a well-formed assignment.
        """
        if not isinstance(data, Mapping):
            raise MalformedContentError("assignment", "content", "must be a JSON object")
        try:
            at = datetime.fromisoformat(data["at"])
            return cls(data["ask_id"], data["to"], data["by"], data.get("note", ""), at)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, MalformedContentError):
                raise
            raise MalformedContentError("assignment", "content", f"is incomplete: {exc}") from exc


def reassign(
    control: Control,
    human: str,
    ask_id: str,
    to: str,
    note: str = "",
    *,
    at: datetime | None = None,
) -> Written | Rejected:
    """Reassign ``ask_id`` to ``to`` (a person or a team), as ``human``, with a note.

    The board admits it only from a person writing in their own name, for an open ask
    (``pybb.human.answer_rule`` judges it).

    Raises:
        MalformedContentError: ``human``, ``to`` or ``note`` is malformed.
    """
    content = Assignment(ask_id, to, human, note, at or datetime.now(UTC))
    return control.write(human, ASSIGNMENTS, content.to_json())


def assignments(reader: BoardReader, ask_id: str | None = None) -> tuple[Assignment, ...]:
    """The reassignments on the board (of one ask, if given), oldest first."""
    found = []
    for row in reader.read_level(ASSIGNMENTS):
        try:
            made = Assignment.from_json(row.content)
        except MalformedContentError:
            continue
        if ask_id is None or made.ask_id == ask_id:
            found.append(made)
    return tuple(found)


def assignee(reader: BoardReader, ask: Ask, policy: AssignmentPolicy) -> str | None:
    """Whom ``ask`` is for now: the latest reassignment, else the policy's route."""
    made = assignments(reader, ask.ask_id)
    return made[-1].to if made else policy.route(ask)


def assignees(
    reader: BoardReader, asks: Iterable[Ask], policy: AssignmentPolicy
) -> dict[str, str | None]:
    """:func:`assignee` of many asks, by ask id, reading the reassignments once."""
    latest = {made.ask_id: made.to for made in assignments(reader)}  # oldest first: last wins
    return {ask.ask_id: latest.get(ask.ask_id) or policy.route(ask) for ask in asks}


def recipients(
    reader: BoardReader,
    ask: Ask,
    policy: AssignmentPolicy,
    people: Mapping[str, Person] | None = None,
) -> tuple[str, ...]:
    """Who is told about ``ask``: its assignee, or the assigned team's members, else ``to``.

    Only people the ask is addressed to are told (an ask with ``to`` set is answerable
    by those people only).
    """
    people = directory(reader) if people is None else people
    target = assignee(reader, ask, policy)
    team = team_name(target)
    if team is not None:
        found = tuple(sorted(p.who for p in people.values() if team in p.teams))
    elif target is not None:
        found = (target,)
    else:
        found = ask.to
    return tuple(p for p in found if ask.addressed_to(p))


def asks_for(
    reader: BoardReader, human: str, policy: AssignmentPolicy | None = None
) -> tuple[Ask, ...]:
    """The open asks ``human`` may answer: their own first, then their teams', then the rest.

    Within each group, oldest first (the order the inbox lists them in).
    """
    policy = AssignmentPolicy() if policy is None else policy
    person = directory(reader).get(human)
    teams = {TEAM_PREFIX + t for t in (person.teams if person else ())}
    reassigned: dict[str, str] = {a.ask_id: a.to for a in assignments(reader)}

    def rank(ask: Ask) -> int:
        target = reassigned.get(ask.ask_id) or policy.route(ask)
        if target == human:
            return 0
        return 1 if target in teams else 2

    mine = open_asks(reader, human=human)
    return tuple(sorted(mine, key=rank))  # sorted is stable: oldest first within a rank


def judge_assignment(reader: BoardReader, writer: str, content: Any) -> str | None:
    """Why a write to ``assignments`` is refused, or ``None`` to admit it."""
    if human_name(writer) is None:
        return f"only a person reassigns an ask, not {writer!r}"
    try:
        made = Assignment.from_json(content)
    except MalformedContentError as exc:
        return f"this reassignment cannot be kept: {exc}"
    if made.by != writer:
        return f"this reassignment says it is by {made.by!r} but {writer!r} wrote it"
    state = ask_state(reader, made.ask_id)
    if state is None:
        return f"there is no ask {made.ask_id!r} on this board to reassign"
    if state.status is not AskStatus.OPEN:
        return f"ask {made.ask_id!r} is {state.status.value}; only an open ask is reassigned"
    return None

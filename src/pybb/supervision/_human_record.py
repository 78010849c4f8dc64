"""The record of the human loop, per escalated entry: what the budget decided, who decided what.

Read off the board and nothing else (the ``supervision`` level, the ``asks``/``answers``/
``ask_closures`` levels, the entries' resolutions and the ``budget`` premise), so any
process that can open the board can write the same record: the command that attested
the fleet, the report step after workers, a person's script.

Who decided is the entry's resolution's ``by``, whatever wrote it: a person's answer
applied by the wiring (``human:<name>``, with the answer's note), a deadline's default
decision (``by="deadline"``), or anyone who resolved the entry on the board out of band
(e.g. a person's ``accept-digest`` that also explained this device). An answer that is on
the board but not applied yet is shown too, as not applied.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from blackboard import Premise
from buddhi import Disposition
from pybb import Blackboard, Escalation, Resolution
from pybb.human import ASKS, Answer, AskState, ask_state
from pybb.supervision._records import SUPERVISION, BoardIndex, SupervisionRecord

__all__ = [
    "BUDGET_DECISIONS",
    "BudgetSummary",
    "HumanDecision",
    "HumanRecord",
    "budget_summary",
    "human_record",
]

BUDGET_DECISIONS: Mapping[Disposition, str] = {
    Disposition.ESCALATED: "asked",
    Disposition.DENIED: "denied",
    Disposition.RESOLVED_OOB: "resolved_oob",
    Disposition.DISCARDED: "discarded",
    Disposition.MODEL_HANDLED: "model_handled",
    Disposition.CONVERGED: "converged",
    Disposition.INVALID_ASK: "invalid_ask",
}
"""What each of buddhi's dispositions means for a person: was one asked, and if not, why."""

UNDECIDED = "undecided"
"""The budget decision of an escalation no supervisor has decided yet."""

DEADLINE = "deadline"
"""The ``by`` of a deadline's default decision."""

_BUDGET_PREMISE = "budget"


@dataclass(frozen=True, slots=True)
class HumanDecision:
    """Who decided an escalated entry, what and when.

    Attributes:
        by: Who: ``human:<name>``, ``deadline`` or whoever resolved the entry.
        decision: What: the option chosen (the resolution's decision).
        at: When they decided.
        note: What the person added to their answer (``""`` for none).
        via: ``answer`` (a person answered the ask), ``deadline`` (the ask's deadline
            applied its default) or ``out_of_band`` (the entry was resolved on the board
            otherwise).
        applied: Whether the decision resolved the entry (an answer waits to be
            applied until a supervising process runs).
    """

    by: str
    decision: str
    at: datetime
    note: str = ""
    via: str = "out_of_band"
    applied: bool = True

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON (times in ISO 8601)."""
        return {
            "by": self.by,
            "decision": self.decision,
            "at": self.at.isoformat(),
            "note": self.note,
            "via": self.via,
            "applied": self.applied,
        }


@dataclass(frozen=True, slots=True)
class HumanRecord:
    """One escalated entry's passage through the human loop.

    Attributes:
        key: The entry (for an attestation, the device).
        escalation_id: Its latest escalation.
        budget_decision: ``asked``, ``denied``, ``resolved_oob``, ``discarded``,
            ``model_handled``, ``converged``, ``invalid_ask`` (see
            :data:`BUDGET_DECISIONS`) or ``undecided``.
        disposition: buddhi's disposition (``None`` while undecided).
        decided_by: The buddhi decision that ended the item.
        reason: Why, in buddhi's sentence.
        scope: The budget scope it was judged in.
        decided_at: When the supervisor decided it.
        denied: For a denial, the refusal: scope, limit, spent, ceiling.
        ask_id: The ask posted for it, if one was.
        asked_at: When the ask was posted.
        ask_status: ``open``, ``answered`` or ``closed`` (``None`` without an ask).
        closed_at: When the ask was closed without an answer.
        closed_reason: Why it was closed.
        decision: Who decided what and when (``None`` while nobody has).
    """

    key: str
    escalation_id: str
    budget_decision: str
    disposition: str | None = None
    decided_by: str | None = None
    reason: str = ""
    scope: str = ""
    decided_at: datetime | None = None
    denied: Mapping[str, Any] | None = None
    ask_id: str | None = None
    asked_at: datetime | None = None
    ask_status: str | None = None
    closed_at: datetime | None = None
    closed_reason: str | None = None
    decision: HumanDecision | None = None

    @property
    def asked(self) -> bool:
        """Whether a person was asked."""
        return self.ask_id is not None

    def to_json(self) -> dict[str, Any]:
        """The record as JSON: every key present, ``None`` for what did not happen."""
        return {
            "escalation": self.escalation_id,
            "budget_decision": self.budget_decision,
            "disposition": self.disposition,
            "decided_by": self.decided_by,
            "reason": self.reason,
            "scope": self.scope,
            "decided_at": _iso(self.decided_at),
            "denied": None if self.denied is None else dict(self.denied),
            "ask_id": self.ask_id,
            "asked_at": _iso(self.asked_at),
            "ask_status": self.ask_status,
            "closed_at": _iso(self.closed_at),
            "closed_reason": self.closed_reason,
            "decision": None if self.decision is None else self.decision.to_json(),
        }


@dataclass(frozen=True, slots=True)
class BudgetSummary:
    """What the attention budget decided over a run.

    Attributes:
        limit: The root scope's ceiling: how many asks the run may make (``None``
            when the board holds no budget).
        spent: How much of it was spent.
        asked: Escalations a person was asked about.
        denied: Escalations the budget refused to ask about.
        by_decision: Escalations per budget decision (``asked``, ``denied``, ...).
        scopes: Every scope's ``{"scope", "spent", "ceiling"}``.
    """

    limit: float | None
    spent: float | None
    asked: int
    denied: int
    by_decision: Mapping[str, int] = field(default_factory=dict)
    scopes: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON."""
        return {
            "limit": self.limit,
            "spent": self.spent,
            "asked": self.asked,
            "denied": self.denied,
            "by_decision": dict(self.by_decision),
            "scopes": [dict(s) for s in self.scopes],
        }


def human_record(blackboard: Blackboard) -> dict[str, HumanRecord]:
    """Per escalated entry, what the budget decided and who decided what and when.

    Args:
        blackboard: A board with the human loop (``SupervisedRun``,
            ``SupervisedAttestation``); on a board without it the result is empty.

    Returns:
        One record per entry that was escalated (its latest escalation), by key, in the
        order the supervisor decided them (undecided ones last).
    """
    reader = blackboard.model.reader
    if SUPERVISION not in reader.regions:
        return {}
    latest: dict[str, SupervisionRecord] = {}
    closed: dict[str, SupervisionRecord] = {}
    for record in BoardIndex(reader).records():
        if record.kind == "decision":
            latest.pop(record.key, None)  # re-inserted: ordered by the latest decision
            latest[record.key] = record
        elif record.kind == "closed":
            closed[record.escalation_id] = record
    found: dict[str, HumanRecord] = {}
    for key, record in latest.items():
        escalation = blackboard.get_escalation(key)
        if escalation is not None and escalation.id != record.escalation_id:
            continue  # escalated again since: the newer escalation is read below
        found[key] = _record(blackboard, key, record)
    for key in list(blackboard.escalate):
        escalation = blackboard.get_escalation(key)
        if key not in found and escalation is not None and escalation.sequence:
            found[key] = _undecided(blackboard, escalation)
    return found


def budget_summary(
    blackboard: Blackboard, records: Mapping[str, HumanRecord] | None = None
) -> BudgetSummary | None:
    """What the budget decided over the run (``None`` on a board without the human loop).

    Args:
        blackboard: The board.
        records: Its :func:`human_record`, if already read.
    """
    reader = blackboard.model.reader
    if SUPERVISION not in reader.regions:
        return None
    records = human_record(blackboard) if records is None else records
    counts = Counter(r.budget_decision for r in records.values())
    scopes = _scopes(blackboard)
    root = next((s for s in scopes if "/" not in s["scope"]), None)
    return BudgetSummary(
        limit=None if root is None else root["ceiling"],
        spent=None if root is None else root["spent"],
        asked=counts["asked"],
        denied=counts["denied"],
        by_decision=dict(sorted(counts.items())),
        scopes=scopes,
    )


def _record(blackboard: Blackboard, key: str, record: SupervisionRecord) -> HumanRecord:
    reader = blackboard.model.reader
    state = ask_state(reader, record.ask_id) if record.ask_id and ASKS in reader.regions else None
    closure = _closed(state)
    denied = record.details.get("denied")
    return HumanRecord(
        key=key,
        escalation_id=record.escalation_id,
        budget_decision=BUDGET_DECISIONS.get(record.disposition, record.disposition.value),
        disposition=record.disposition.value,
        decided_by=record.decided_by.value,
        reason=record.reason,
        scope=record.scope,
        decided_at=record.at,
        denied=denied if isinstance(denied, Mapping) else None,
        ask_id=record.ask_id,
        asked_at=None if state is None else state.ask.created_at,
        ask_status=None if state is None else state.status.value,
        closed_at=None if closure is None else closure[0],
        closed_reason=None if closure is None else closure[1],
        decision=_decision(blackboard, key, record, state),
    )


def _undecided(blackboard: Blackboard, escalation: Escalation) -> HumanRecord:
    resolution = _resolution_after(blackboard, escalation.key, escalation.sequence)
    return HumanRecord(
        key=escalation.key,
        escalation_id=escalation.id,
        budget_decision=UNDECIDED,
        reason="no supervisor has decided this escalation yet",
        decision=None if resolution is None else _by_resolution(resolution, None),
    )


def _closed(state: AskState | None) -> tuple[datetime, str] | None:
    """When and why an ask was closed unanswered (``None`` if it was not)."""
    if state is None or state.closure is None or state.status.value != "closed":
        return None
    return state.closure.at, state.closure.reason


def _decision(
    blackboard: Blackboard, key: str, record: SupervisionRecord, state: AskState | None
) -> HumanDecision | None:
    tail = record.escalation_id.rsplit("/", 1)[-1]
    sequence = int(tail) if tail.isdigit() else 0
    resolution = _resolution_after(blackboard, key, sequence)
    answer = None if state is None or state.status.value != "answered" else state.answer
    if resolution is not None:
        return _by_resolution(resolution, answer)
    if answer is not None:  # answered, not applied yet: the next supervising run applies it
        return HumanDecision(answer.by, answer.option, answer.at, answer.note, "answer", False)
    return None


def _by_resolution(resolution: Resolution, answer: Answer | None) -> HumanDecision:
    if answer is not None and (answer.option, answer.by, answer.at) == (
        resolution.decision,
        resolution.by,
        resolution.at,
    ):
        via, note = "answer", answer.note
    else:
        via, note = ("deadline" if resolution.by == DEADLINE else "out_of_band"), ""
    return HumanDecision(resolution.by, resolution.decision, resolution.at, note, via)


def _resolution_after(blackboard: Blackboard, key: str, sequence: int) -> Resolution | None:
    """The entry's resolution, if it resolved this escalation (not an earlier one)."""
    resolution = blackboard.get_resolution(key)
    if resolution is None or resolution.sequence < sequence:
        return None
    return resolution


def _scopes(blackboard: Blackboard) -> tuple[Mapping[str, Any], ...]:
    reader = blackboard.model.reader
    if not isinstance(reader.regions.get(_BUDGET_PREMISE), Premise):
        return ()
    value: Any = reader.read_premise(_BUDGET_PREMISE).value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ()
    if not isinstance(value, dict):
        return ()
    scopes = []
    for path, entry in sorted(value.items()):
        if (
            isinstance(entry, dict)
            and _number(entry.get("spent"))
            and _number(entry.get("ceiling"))
        ):
            scopes.append(
                {"scope": str(path), "spent": entry["spent"], "ceiling": entry["ceiling"]}
            )
    return tuple(scopes)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()

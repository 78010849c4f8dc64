"""The board protocol of the human loop: its regions and the values written to them.

An ask is posted on the ``asks`` level; a person answers it on ``answers``; an ask that
is settled without a person (resolved out of band, withdrawn) is closed on
``ask_closures``. All three levels are unique on ``ask_id``, so the store admits exactly
one ask, one answer and one closure per ask id, even under concurrency.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from blackboard import Level
from pybb.human._errors import MalformedContentError

__all__ = [
    "ANSWERS",
    "ASKS",
    "ASK_CLOSURES",
    "DEADLINE_BY",
    "DEADLINE_WRITER",
    "HUMAN_PREFIX",
    "HUMAN_REGIONS",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "Answer",
    "Ask",
    "Closure",
    "Option",
    "human_name",
    "human_writer",
    "is_valid_id",
]

ASKS = "asks"
"""The level asks are posted to (unique on ``ask_id``)."""
ANSWERS = "answers"
"""The level people's answers are written to (unique on ``ask_id``: one answer per ask)."""
ASK_CLOSURES = "ask_closures"
"""The level of asks closed without a person's answer (unique on ``ask_id``)."""

HUMAN_REGIONS: tuple[Level, ...] = (
    Level(ASKS, unique="ask_id"),
    Level(ANSWERS, unique="ask_id"),
    Level(ASK_CLOSURES, unique="ask_id"),
)
"""The regions every run with a human loop declares, next to its own."""

DEADLINE_BY = "deadline"
"""The ``by`` of the answer a deadline applies: the policy's default decision."""
DEADLINE_WRITER = "pybb:deadline"
"""The writer of deadline defaults; the only writer whose answers may say ``by="deadline"``."""

HUMAN_PREFIX = "human:"
"""The writer-name prefix of a person: a person named ``alice`` writes as ``human:alice``."""

MIN_OPTIONS = 2
"""The fewest options an ask offers."""
MAX_OPTIONS = 4
"""The most options an ask offers."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_LIMITS = {
    "entry": 500,
    "subject": 500,
    "title": 300,
    "report": 65_536,
    "scope": 500,
    "label": 200,
    "detail": 2_000,
    "note": 2_000,
    "to": 200,
    "reason": 2_000,
}


def human_writer(name: str) -> str:
    """Return the writer name of the person called ``name`` (``"alice"`` → ``"human:alice"``).

    Raises:
        MalformedContentError: ``name`` is not 1–64 letters, digits, ``.``, ``_`` or ``-``
            starting with a letter or digit.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise MalformedContentError(
            "human",
            "name",
            f"{name!r} is not a person's name; use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return HUMAN_PREFIX + name


def human_name(writer: object) -> str | None:
    """Return the person's name if ``writer`` is a well-formed ``human:<name>``, else ``None``."""
    if not isinstance(writer, str) or not writer.startswith(HUMAN_PREFIX):
        return None
    name = writer[len(HUMAN_PREFIX) :]
    return name if _NAME.fullmatch(name) else None


@dataclass(frozen=True, slots=True)
class Option:
    """One choice an ask offers.

    Attributes:
        id: The option's identifier, unique within its ask (what an answer names).
        label: The short text a person reads on the button.
        recommended: Whether this is the starred recommendation (exactly one per ask).
        detail: What choosing it does, in a sentence or two.
    """

    id: str
    label: str
    recommended: bool = False
    detail: str = ""

    def __post_init__(self) -> None:
        _check_id("option", "id", self.id)
        _check_text("option", "label", self.label, required=True)
        _check_text("option", "detail", self.detail)
        if not isinstance(self.recommended, bool):
            raise MalformedContentError("option", "recommended", "must be true or false")

    def to_json(self) -> dict[str, Any]:
        """The option as a JSON object."""
        return {
            "id": self.id,
            "label": self.label,
            "recommended": self.recommended,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: object) -> Option:
        """Read an option from its JSON object.

        Raises:
            MalformedContentError: ``data`` is not a well-formed option.
        """
        obj = _object("option", data)
        return cls(
            id=_get(obj, "option", "id"),
            label=_get(obj, "option", "label"),
            recommended=obj.get("recommended", False),
            detail=obj.get("detail", ""),
        )


@dataclass(frozen=True, slots=True)
class Ask:
    """A pre-reasoned question for a person: 2–4 options, exactly one recommended.

    Everything in an ask was written by an agent and is shown to people as text only.

    Attributes:
        ask_id: Unique on the board; 1–128 characters of ``[A-Za-z0-9._:@+-]``.
        entry: The key of the entry the ask is about.
        subject: What the entry concerns, e.g. a device id.
        title: One line a person reads first.
        report: The tier's report, as plain text.
        options: 2–4 options with distinct ids, exactly one recommended.
        confidence: How sure the supervisor is that a person is needed, in [0, 1].
        scope: The budget scope path the ask was charged to, e.g. ``"fleet/site-a"``.
        created_at: When the ask was made (timezone-aware).
        report_data: The report's structured form (any JSON object).
        to: The people (``human:<name>``) it is addressed to; empty means anyone.
        deadline: When the ask expires and ``default_option`` is applied as its answer
            (``by="deadline"``); ``None``: the deadline policy computes it from
            ``created_at`` (asks posted by ``pybb.supervision`` always carry one).
        default_option: The option applied at the deadline; ``None``: the policy's.
    """

    ask_id: str
    entry: str
    subject: str
    title: str
    report: str
    options: tuple[Option, ...]
    confidence: float
    scope: str
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    report_data: Mapping[str, Any] = field(default_factory=dict, hash=False)
    to: tuple[str, ...] = ()
    deadline: datetime | None = None
    default_option: str | None = None

    def __post_init__(self) -> None:
        _check_id("ask", "ask_id", self.ask_id)
        for name in ("entry", "subject", "scope"):
            _check_text("ask", name, getattr(self, name))
        _check_text("ask", "title", self.title, required=True)
        _check_text("ask", "report", self.report)
        object.__setattr__(self, "options", _options(self.options))
        object.__setattr__(self, "confidence", _confidence(self.confidence))
        _check_time("ask", "created_at", self.created_at)
        _check_report_data(self.report_data)
        object.__setattr__(self, "to", _addressees(self.to))
        if self.deadline is not None:
            _check_time("ask", "deadline", self.deadline)
        if self.default_option is not None and self.option(self.default_option) is None:
            ids = ", ".join(repr(o.id) for o in self.options)
            raise MalformedContentError(
                "ask", "default_option", f"{self.default_option!r} is not one of {ids}"
            )

    @property
    def recommended(self) -> Option:
        """The starred option."""
        return next(option for option in self.options if option.recommended)

    def option(self, option_id: str) -> Option | None:
        """The option with id ``option_id``, or ``None``."""
        return next((o for o in self.options if o.id == option_id), None)

    def addressed_to(self, writer: str) -> bool:
        """Whether the person writing as ``writer`` may see and answer this ask."""
        return not self.to or writer in self.to

    def to_json(self) -> dict[str, Any]:
        """The ask as the JSON object kept on the ``asks`` level."""
        data: dict[str, Any] = {
            "ask_id": self.ask_id,
            "entry": self.entry,
            "subject": self.subject,
            "title": self.title,
            "report": self.report,
            "report_data": dict(self.report_data),
            "options": [option.to_json() for option in self.options],
            "confidence": self.confidence,
            "scope": self.scope,
            "created_at": self.created_at.isoformat(),
            "to": list(self.to),
        }
        if self.deadline is not None:  # kept out when unset: older asks read the same
            data["deadline"] = self.deadline.isoformat()
        if self.default_option is not None:
            data["default_option"] = self.default_option
        return data

    @classmethod
    def from_json(cls, data: object) -> Ask:
        """Read an ask from its JSON object (unknown keys are ignored).

        Raises:
            MalformedContentError: ``data`` is not a well-formed ask.
        """
        obj = _object("ask", data)
        options = _get(obj, "ask", "options")
        if not isinstance(options, list):
            raise MalformedContentError("ask", "options", "must be a list of option objects")
        to = obj.get("to", [])
        if not isinstance(to, list):
            raise MalformedContentError("ask", "to", "must be a list of 'human:<name>' strings")
        return cls(
            ask_id=_get(obj, "ask", "ask_id"),
            entry=obj.get("entry", ""),
            subject=obj.get("subject", ""),
            title=_get(obj, "ask", "title"),
            report=obj.get("report", ""),
            options=tuple(Option.from_json(o) for o in options),
            confidence=_get(obj, "ask", "confidence"),
            scope=obj.get("scope", ""),
            created_at=_parse_time("ask", "created_at", _get(obj, "ask", "created_at")),
            report_data=obj.get("report_data", {}),
            to=tuple(to),
            deadline=(
                None
                if obj.get("deadline") is None
                else _parse_time("ask", "deadline", obj["deadline"])
            ),
            default_option=obj.get("default_option"),
        )


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to an ask.

    Attributes:
        ask_id: The ask answered.
        option: The id of the option chosen.
        by: Who answered, ``human:<name>`` (the board admits it only when this is the
            writer), or :data:`DEADLINE_BY` for the default a deadline applied.
        note: Anything the person added.
        at: When they answered.
    """

    ask_id: str
    option: str
    by: str
    note: str = ""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        _check_id("answer", "ask_id", self.ask_id)
        _check_id("answer", "option", self.option)
        if self.by != DEADLINE_BY and human_name(self.by) is None:
            raise MalformedContentError(
                "answer", "by", f"{self.by!r} is not a person; use 'human:<name>'"
            )
        _check_text("answer", "note", self.note)
        _check_time("answer", "at", self.at)

    def to_json(self) -> dict[str, Any]:
        """The answer as the JSON object kept on the ``answers`` level."""
        return {
            "ask_id": self.ask_id,
            "option": self.option,
            "by": self.by,
            "note": self.note,
            "at": self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: object) -> Answer:
        """Read an answer from its JSON object.

        Raises:
            MalformedContentError: ``data`` is not a well-formed answer.
        """
        obj = _object("answer", data)
        return cls(
            ask_id=_get(obj, "answer", "ask_id"),
            option=_get(obj, "answer", "option"),
            by=_get(obj, "answer", "by"),
            note=obj.get("note", ""),
            at=_parse_time("answer", "at", _get(obj, "answer", "at")),
        )


@dataclass(frozen=True, slots=True)
class Closure:
    """An ask closed without a person's answer (resolved out of band, withdrawn).

    Attributes:
        ask_id: The ask closed.
        reason: Why, for the people who would have answered it.
        at: When it was closed.
    """

    ask_id: str
    reason: str
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        _check_id("closure", "ask_id", self.ask_id)
        _check_text("closure", "reason", self.reason, required=True)
        _check_time("closure", "at", self.at)

    def to_json(self) -> dict[str, Any]:
        """The closure as the JSON object kept on the ``ask_closures`` level."""
        return {"ask_id": self.ask_id, "reason": self.reason, "at": self.at.isoformat()}

    @classmethod
    def from_json(cls, data: object) -> Closure:
        """Read a closure from its JSON object.

        Raises:
            MalformedContentError: ``data`` is not a well-formed closure.
        """
        obj = _object("closure", data)
        return cls(
            ask_id=_get(obj, "closure", "ask_id"),
            reason=_get(obj, "closure", "reason"),
            at=_parse_time("closure", "at", _get(obj, "closure", "at")),
        )


# -- checks ---------------------------------------------------------------------------


def is_valid_id(value: object) -> bool:
    """Whether ``value`` may be an ask id or option id."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def _check_id(kind: str, name: str, value: object) -> None:
    if not is_valid_id(value):
        raise MalformedContentError(
            kind,
            name,
            f"{_short(value)} is not an id; use 1-128 letters, digits or '._:@+-', "
            "starting with a letter or digit",
        )


def _check_text(kind: str, name: str, value: object, *, required: bool = False) -> None:
    if not isinstance(value, str):
        raise MalformedContentError(kind, name, f"must be a string, not {type(value).__name__}")
    if required and not value.strip():
        raise MalformedContentError(kind, name, "must not be empty")
    limit = _LIMITS[name]
    if len(value) > limit:
        raise MalformedContentError(
            kind, name, f"is {len(value)} characters long; keep it within {limit}"
        )


def _options(options: object) -> tuple[Option, ...]:
    if not isinstance(options, Sequence) or isinstance(options, str):
        raise MalformedContentError("ask", "options", "must be a sequence of Option")
    found = tuple(options)
    if not all(isinstance(o, Option) for o in found):
        raise MalformedContentError("ask", "options", "must hold only Option values")
    if not MIN_OPTIONS <= len(found) <= MAX_OPTIONS:
        raise MalformedContentError(
            "ask", "options", f"offers {len(found)}; offer {MIN_OPTIONS} to {MAX_OPTIONS}"
        )
    ids = [o.id for o in found]
    if len(set(ids)) != len(ids):
        raise MalformedContentError("ask", "options", f"repeat an id ({ids}); make ids distinct")
    starred = sum(o.recommended for o in found)
    if starred != 1:
        raise MalformedContentError("ask", "options", f"recommend {starred}; recommend exactly one")
    return found


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedContentError("ask", "confidence", "must be a number in [0, 1]")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise MalformedContentError("ask", "confidence", f"{value!r} is outside [0, 1]")
    return float(value)


def _addressees(to: object) -> tuple[str, ...]:
    if isinstance(to, str) or not isinstance(to, Sequence):
        raise MalformedContentError("ask", "to", "must be a sequence of 'human:<name>' strings")
    found = tuple(to)
    for writer in found:
        if human_name(writer) is None:
            raise MalformedContentError(
                "ask", "to", f"{_short(writer)} is not a person; use 'human:<name>'"
            )
    return found


def _check_report_data(data: object) -> None:
    if not isinstance(data, Mapping):
        raise MalformedContentError("ask", "report_data", "must be a JSON object (a mapping)")
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedContentError("ask", "report_data", f"is not plain JSON: {exc}") from exc
    if len(text) > _LIMITS["report"]:
        raise MalformedContentError(
            "ask", "report_data", f"is {len(text)} characters of JSON; keep it within 65536"
        )


def _check_time(kind: str, name: str, value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise MalformedContentError(kind, name, "must be a timezone-aware datetime")


def _parse_time(kind: str, name: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise MalformedContentError(kind, name, "must be an ISO 8601 timestamp string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise MalformedContentError(kind, name, f"{_short(value)} is not ISO 8601") from exc
    if parsed.tzinfo is None:
        raise MalformedContentError(kind, name, "must carry a timezone offset")
    return parsed


def _object(kind: str, data: object) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise MalformedContentError(kind, "content", f"must be a JSON object, not {_short(data)}")
    return data


def _get(obj: Mapping[str, Any], kind: str, key: str) -> Any:
    if key not in obj:
        raise MalformedContentError(kind, key, "is missing")
    return obj[key]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

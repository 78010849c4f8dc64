"""What the inbox shows beyond one ask: filters, groups, pages, views, previews.

Framework-free and synchronous: the filters, the root-cause groups, the pages, the
decided and not-asked views, and the preview of accepting a digest.

An ask's *root cause* is its reason, its device class and its first unexplained finding
(the PCR and digest found there), read from the tier report the wiring put in
``report_data``; asks with the same root cause are shown as one group that one answer
settles (each member still its own board write, admitted once).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from blackboard import Model
from pybb.human import Ask, AskState, AskStatus
from pybb.inbox._assigned import Routing

__all__ = [
    "PAGE_SIZE",
    "Filters",
    "Group",
    "Page",
    "decided_rows",
    "digest_preview",
    "group_asks",
    "group_token",
    "not_asked_rows",
    "page_of",
    "parse_filters",
]

PAGE_SIZE = 50
"""Groups (or rows) per page."""

ACCEPT_DIGEST = "accept-digest"
"""The option that changes fleet policy, and so is confirmed after a preview."""

_AGE = re.compile(r"^(\d{1,6})([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
_FILTERS = ("reason", "class", "team", "age")
_MAX_LISTED = 12  # member subjects listed on a group's card; the rest are counted


@dataclass(frozen=True, slots=True)
class Filters:
    """The list's filters (query parameters); empty strings filter nothing.

    Attributes:
        reason: The escalation reason (e.g. ``tampered_component``).
        device_class: The device class (``class=``).
        team: The team the ask is for: its assignee (a reassignment, else the
            assignment policy's route) is ``team:<name>`` or a person on that team. An
            ask assigned to nobody falls back to a ``team`` in its report data.
        age: Only asks at least this old: ``30m``, ``2h``, ``1d``.
    """

    reason: str = ""
    device_class: str = ""
    team: str = ""
    age: str = ""

    def query(self, **more: object) -> str:
        """The filters as a query string (with ``more`` parameters), for links."""
        pairs = [
            ("reason", self.reason),
            ("class", self.device_class),
            ("team", self.team),
            ("age", self.age),
            *((k, str(v)) for k, v in more.items()),
        ]
        return urlencode([(k, v) for k, v in pairs if v])

    def admits(self, ask: Ask, now: datetime, routed: Routing | None = None) -> bool:
        """Whether ``ask`` passes every filter (its team from ``routed``, if given)."""
        cause = root_cause(ask)
        if self.reason and cause[0] != self.reason:
            return False
        if self.device_class and cause[1] != self.device_class:
            return False
        if self.team and self.team not in _teams(ask, routed):
            return False
        minimum = age_of(self.age)
        return minimum is None or now - ask.created_at >= minimum


@dataclass(frozen=True, slots=True)
class Group:
    """Open asks with one root cause, oldest first."""

    cause: tuple[str, str, str]
    states: tuple[AskState, ...]

    @property
    def first(self) -> AskState:
        """The member shown in full: the oldest (of the person's own, if any are theirs)."""
        return self.states[0]

    @property
    def ask_ids(self) -> tuple[str, ...]:
        """Every member's ask id."""
        return tuple(s.ask.ask_id for s in self.states)

    @property
    def listed(self) -> tuple[AskState, ...]:
        """The members named on the card (the rest are counted)."""
        return self.states[1 : 1 + _MAX_LISTED]

    @property
    def unlisted(self) -> int:
        """How many members the card counts without naming."""
        return max(0, len(self.states) - 1 - _MAX_LISTED)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list."""

    items: Sequence[Any]
    number: int
    pages: int
    total: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def previous(self) -> int | None:
        """The previous page's number, if any."""
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        """The next page's number, if any."""
        return self.number + 1 if self.number < self.pages else None


def parse_filters(params: Mapping[str, str]) -> Filters | str:
    """The filters of a query, or a sentence saying what is wrong with it."""
    age = params.get("age", "").strip()
    if age and age_of(age) is None:
        return "age must be a number and a unit: 30m, 2h or 1d."
    for name in _FILTERS:
        if len(params.get(name, "")) > 200:
            return f"{name} is too long (at most 200 characters)."
    return Filters(
        reason=params.get("reason", "").strip(),
        device_class=params.get("class", "").strip(),
        team=params.get("team", "").strip(),
        age=age,
    )


def page_number(raw: str | None) -> int | None:
    """A page number from the query (1 by default), or ``None`` if it is not one."""
    if raw is None or raw == "":
        return 1
    return int(raw) if raw.isdigit() and 0 < len(raw) < 7 and int(raw) > 0 else None


def age_of(text: str) -> timedelta | None:
    """``30m``/``2h``/``1d`` as a duration (``None`` if empty or unreadable)."""
    match = _AGE.match(text)
    if match is None:
        return None
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def tier_report(ask: Ask) -> Mapping[str, Any]:
    """The tier report the wiring attached to ``ask`` (empty if none)."""
    data: Mapping[str, Any] = ask.report_data
    report = data.get("tier_report")
    return report if isinstance(report, Mapping) else {}


def root_cause(ask: Ask) -> tuple[str, str, str]:
    """The ask's reason, device class and first unexplained finding (``pcr<n>:<digest>``)."""
    report = tier_report(ask)
    data: Mapping[str, Any] = ask.report_data
    reason = str(report.get("reason") or data.get("reason") or "")
    device_class = str(report.get("class") or "")
    finding = ""
    for found in _unexplained(report):
        finding = f"pcr{found.get('pcr')}:{found.get('found') or found.get('reason') or ''}"
        break
    return reason, device_class, finding


def _teams(ask: Ask, routed: Routing | None) -> set[str]:
    found = routed.teams_of(ask) if routed is not None else set()
    if routed is not None and routed.target(ask) is not None:
        return found
    return found | teams_of(ask)


def teams_of(ask: Ask) -> set[str]:
    """The teams an ask is addressed to."""
    data: Mapping[str, Any] = ask.report_data
    teams = {t.removeprefix("team:") for t in (ask.to or ()) if t.startswith("team:")}
    if isinstance(data.get("team"), str):
        teams.add(data["team"])
    return teams


def group_asks(
    states: Iterable[AskState], filters: Filters, now: datetime, routed: Routing | None = None
) -> list[Group]:
    """The open asks that pass ``filters``, grouped by root cause, oldest group first.

    With ``routed``, the person's own asks come first, then their teams', then the
    rest (a group ranks as its best member, and lists its members in that order too);
    oldest first within each.
    """
    groups: dict[tuple[str, str, str], list[AskState]] = {}
    if routed is not None:  # sorted is stable: oldest first within a rank
        states = sorted(states, key=lambda s: routed.rank(s.ask))
    for state in states:
        if state.status is AskStatus.OPEN and filters.admits(state.ask, now, routed):
            cause = root_cause(state.ask)
            # An ask without a tier report has no known root cause: it stands alone.
            key = cause if cause[0] and cause[1] else ("", "", state.ask.ask_id)
            groups.setdefault(key, []).append(state)
    return [Group(cause, tuple(members)) for cause, members in groups.items()]


def page_of(items: Sequence[Any], number: int, size: int = PAGE_SIZE) -> Page:
    """Page ``number`` (from 1) of ``items``; a number past the end gives the last page."""
    pages = max(1, -(-len(items) // size))
    number = min(number, pages)
    return Page(items[(number - 1) * size : number * size], number, pages, len(items))


def group_token(ask_ids: Iterable[str]) -> str:
    """What a group's nonce is bound to: the exact set of asks the person saw."""
    joined = "\x1f".join(sorted(ask_ids))
    return "group:" + hashlib.sha256(joined.encode()).hexdigest()


def decided_rows(
    states: Iterable[AskState], reassigned: Iterable[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Every settled ask, and every reassignment, newest first: who, what, when, how."""
    rows: list[dict[str, Any]] = [dict(row) for row in reassigned]
    for state in states:
        ask = state.ask
        if state.answer is not None:
            chosen = ask.option(state.answer.option)
            by = state.answer.by
            how = "answer" if by.startswith("human:") else "deadline default"
            rows.append(
                {
                    "ask": ask, "how": how, "by": by, "at": state.answer.at,
                    "what": chosen.label if chosen else state.answer.option,
                    "note": state.answer.note,
                }
            )  # fmt: skip
        elif state.closure is not None:
            reason = state.closure.reason
            how = "out of band" if reason.startswith("resolved_oob") else "closed"
            if reason.startswith("deadline"):
                how = "deadline default"
            rows.append(
                {
                    "ask": ask, "how": how, "by": _closer(reason), "at": state.closure.at,
                    "what": "closed without an answer", "note": reason,
                }
            )  # fmt: skip
    rows.sort(key=lambda row: row["at"].isoformat(), reverse=True)
    return rows


def not_asked_rows(model: Model) -> list[dict[str, Any]]:
    """The escalations the budget denied and nobody has pulled into an ask, oldest first."""
    try:
        from pybb.supervision._records import BoardIndex
    except ImportError:  # pragma: no cover - buddhi ships with pybb
        return []
    rows = BoardIndex(model.reader).rows()
    pulled = {str(c.get("escalation")): c for _, c in rows if c.get("kind") in ("pull", "pulled")}
    found = []
    for sequence, content in rows:
        if content.get("kind") != "decision" or content.get("disposition") != "DENIED":
            continue
        details = content.get("details") or {}
        denied = details.get("denied") if isinstance(details, Mapping) else None
        tier = details.get("tier") if isinstance(details, Mapping) else None
        found.append(
            {
                "tier": tier if isinstance(tier, Mapping) else {},
                "escalation": content.get("escalation"), "key": content.get("key"),
                "reason": content.get("reason"), "scope": content.get("scope"),
                "denied": denied if isinstance(denied, Mapping) else {},
                "at": _parsed_time(content.get("at")), "sequence": sequence,
                "pulled": pulled.get(str(content.get("escalation"))),
            }
        )  # fmt: skip
    return found


def digest_preview(
    states: Iterable[AskState], ask: Ask, not_asked: Iterable[Mapping[str, Any]] = ()
) -> list[str]:
    """The devices accepting ``ask``'s digests would repair, the answered one first.

    A device is repaired when every unexplained finding of its tier report is a
    tampered component whose digest, in that slot (PCR, event type, label) of that
    class, is one of ``ask``'s allowlist candidates: the devices of the other open asks,
    and the escalations the budget did not ask about (``not_asked``, from their
    decision records' brief of the tier report).
    """
    candidates = {
        (
            str(c.get("class")),
            c.get("pcr"),
            str(c.get("digest")),
            c.get("event_type"),
            c.get("label"),
        )
        for c in tier_report(ask).get("allowlist_candidates", ())
        if isinstance(c, Mapping)
    }
    repaired = [ask.entry] if candidates else []
    for state in states:
        other = state.ask
        if other.ask_id == ask.ask_id or state.status is not AskStatus.OPEN:
            continue
        if _repaired_by(tier_report(other), candidates):
            repaired.append(other.entry)
    for row in not_asked:
        key = str(row.get("key"))
        fixed = row.get("pulled") is None and _repaired_by(row.get("tier") or {}, candidates)
        if fixed and key not in repaired:
            repaired.append(key)
    return repaired


def _repaired_by(report: Mapping[str, Any], candidates: set[tuple[Any, ...]]) -> bool:
    findings = _unexplained(report)
    if not findings or report.get("reason") != "tampered_component":
        return False
    device_class = str(report.get("class"))
    return all(
        f.get("reason") == "tampered_component"
        and (device_class, f.get("pcr"), str(f.get("found")), f.get("event_type"), f.get("label"))
        in candidates
        for f in findings
    )


def now_utc() -> datetime:
    """The time filters are judged at."""
    return datetime.now(UTC)


def _unexplained(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    findings = report.get("findings")
    if not isinstance(findings, list):
        return []
    return [
        f for f in findings if isinstance(f, Mapping) and f.get("reason") != "sanctioned_update"
    ]


def _parsed_time(value: object) -> datetime | str:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else ""
    except ValueError:
        return value if isinstance(value, str) else ""


def _closer(reason: str) -> str:
    match = re.search(r"(human:[\w.@-]+|pybb:[\w.-]+|deadline)", reason)
    return match.group(1) if match else ""

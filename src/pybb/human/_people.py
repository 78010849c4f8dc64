"""People as board data: their channels, quiet hours and teams, and the people-side levels.

Who a person is reached through (a webhook URL, an email address), when not to disturb
them (quiet hours in their own timezone) and which teams they are on is a record on
the ``people`` level; the latest record of a person is the one that holds, so the
history of changes stays on the board. :data:`PEOPLE_REGIONS` are the levels the
notifications, links and assignments write; a run declares them beside
``HUMAN_REGIONS`` (``pybb.supervision`` does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from blackboard import BoardReader, Control, Level, Rejected, Written
from pybb.human._errors import MalformedContentError
from pybb.human._protocol import human_name

__all__ = [
    "ASSIGNMENTS",
    "CHANNEL_KINDS",
    "DELIVERIES",
    "LINK_USES",
    "NOTIFICATIONS",
    "PEOPLE",
    "PEOPLE_REGIONS",
    "TEAM_PREFIX",
    "Channel",
    "Person",
    "QuietHours",
    "directory",
    "set_person",
    "team_name",
]

PEOPLE = "people"
"""The level of person records (channels, quiet hours, teams); the latest per person holds."""
ASSIGNMENTS = "assignments"
"""The level of reassignments (who, to whom, note, when); the latest per ask holds."""
NOTIFICATIONS = "notifications"
"""The level of notifications claimed for sending (unique on ``id``: each is sent once)."""
DELIVERIES = "deliveries"
"""The level of what became of each notification: sent, failed (every attempt), refused."""
LINK_USES = "link_uses"
"""The level of redeemed links (unique on ``link``: a link is accepted exactly once)."""

PEOPLE_REGIONS: tuple[Level, ...] = (
    Level(PEOPLE),
    Level(ASSIGNMENTS),
    Level(NOTIFICATIONS, unique="id"),
    Level(DELIVERIES),
    Level(LINK_USES, unique="link"),
)
"""The levels of people, assignments, notifications, deliveries and link uses."""

TEAM_PREFIX = "team:"
"""How a team is named where a person could be: ``team:<name>``."""

CHANNEL_KINDS = ("webhook", "email")
"""The kinds of channel a person may be reached through."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}")


def team_name(value: object) -> str | None:
    """The team's name if ``value`` is a well-formed ``team:<name>``, else ``None``."""
    if not isinstance(value, str) or not value.startswith(TEAM_PREFIX):
        return None
    name = value[len(TEAM_PREFIX) :]
    return name if _NAME.fullmatch(name) else None


@dataclass(frozen=True, slots=True)
class Channel:
    """One way to reach a person.

    Attributes:
        kind: ``"webhook"`` (``address`` is an http(s) URL) or ``"email"`` (an address).
    """

    kind: str
    address: str

    def __post_init__(self) -> None:
        if self.kind not in CHANNEL_KINDS:
            raise MalformedContentError(
                "channel", "kind", f"{self.kind!r} is not one of {', '.join(CHANNEL_KINDS)}"
            )
        ok = (
            isinstance(self.address, str)
            and len(self.address) <= 2_000
            and (
                self.address.startswith(("http://", "https://"))
                if self.kind == "webhook"
                else _EMAIL.fullmatch(self.address) is not None
            )
        )
        if not ok:
            wanted = "an http(s) URL" if self.kind == "webhook" else "an email address"
            raise MalformedContentError("channel", "address", f"{self.address!r} is not {wanted}")

    def to_json(self) -> dict[str, str]:
        """The channel as JSON."""
        return {"kind": self.kind, "address": self.address}

    @classmethod
    def from_json(cls, data: object) -> Channel:
        """Read a channel from JSON."""
        if not isinstance(data, Mapping):
            raise MalformedContentError("channel", "content", "must be a JSON object")
        return cls(str(data.get("kind")), data.get("address"))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class QuietHours:
    """When a person is not to be disturbed, in their own timezone.

    ``start`` to ``end`` wall-clock time, wrapping over midnight when ``end`` is not
    after ``start`` (22:00–07:00 is the night).

    Attributes:
        start: When the quiet begins (local time).
        end: When it ends (local time).
        tz: An IANA timezone name, e.g. ``"Europe/Berlin"``.
    """

    start: time
    end: time
    tz: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.start, time) or not isinstance(self.end, time):
            raise MalformedContentError("quiet_hours", "start", "start and end must be times")
        if self.start == self.end:
            raise MalformedContentError(
                "quiet_hours", "end", "equals start; omit quiet hours instead of making them empty"
            )
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise MalformedContentError(
                "quiet_hours", "tz", f"{self.tz!r} is not an IANA timezone (e.g. 'Europe/Berlin')"
            ) from exc

    def until(self, at: datetime) -> datetime | None:
        """When the quiet hours containing ``at`` end, or ``None`` when ``at`` is not quiet."""
        zone = ZoneInfo(self.tz)
        local = at.astimezone(zone)
        for day in (local.date() - timedelta(days=1), local.date()):
            begin = datetime.combine(day, self.start, zone)
            end_day = day if self.end > self.start else day + timedelta(days=1)
            end = datetime.combine(end_day, self.end, zone)
            if begin <= local < end:
                return end.astimezone(UTC)
        return None

    def to_json(self) -> dict[str, str]:
        """The quiet hours as JSON."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "tz": self.tz}

    @classmethod
    def from_json(cls, data: object) -> QuietHours:
        """Read quiet hours from JSON."""
        if not isinstance(data, Mapping):
            raise MalformedContentError("quiet_hours", "content", "must be a JSON object")
        try:
            start, end = time.fromisoformat(data["start"]), time.fromisoformat(data["end"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedContentError(
                "quiet_hours", "start", "start and end must be 'HH:MM' times"
            ) from exc
        return cls(start, end, str(data.get("tz", "UTC")))


@dataclass(frozen=True, slots=True)
class Person:
    """A person as the board knows them.

    Attributes:
        who: ``human:<name>``.
        channels: How to reach them; none: they are not notified.
        quiet: When not to notify them; ``None``: any time.
        teams: The teams they are on (names, without ``team:``).
    """

    who: str
    channels: tuple[Channel, ...] = ()
    quiet: QuietHours | None = None
    teams: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if human_name(self.who) is None:
            raise MalformedContentError("person", "who", f"{self.who!r} is not 'human:<name>'")
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "teams", tuple(self.teams))
        if not all(isinstance(c, Channel) for c in self.channels):
            raise MalformedContentError("person", "channels", "must hold only Channel values")
        for team in self.teams:
            if not isinstance(team, str) or not _NAME.fullmatch(team):
                raise MalformedContentError("person", "teams", f"{team!r} is not a team name")

    def to_json(self) -> dict[str, Any]:
        """The person as the JSON object kept on the ``people`` level."""
        return {
            "who": self.who,
            "channels": [c.to_json() for c in self.channels],
            "quiet": None if self.quiet is None else self.quiet.to_json(),
            "teams": list(self.teams),
        }

    @classmethod
    def from_json(cls, data: object) -> Person:
        """Read a person from JSON.

        Raises:
            MalformedContentError: ``data`` is not a well-formed person.
        """
        if not isinstance(data, Mapping):
            raise MalformedContentError("person", "content", "must be a JSON object")
        channels, teams = data.get("channels", []), data.get("teams", [])
        if not isinstance(channels, list) or not isinstance(teams, list):
            raise MalformedContentError("person", "channels", "channels and teams are lists")
        quiet = data.get("quiet")
        return cls(
            who=data.get("who"),  # type: ignore[arg-type]
            channels=tuple(Channel.from_json(c) for c in channels),
            quiet=None if quiet is None else QuietHours.from_json(quiet),
            teams=tuple(teams),
        )


def set_person(control: Control, person: Person, *, writer: str) -> Written | Rejected:
    """Record ``person`` (their channels, quiet hours, teams); it replaces the last record.

    A person may record only themselves (``writer`` = ``person.who``); any other writer
    is the application's (an administrator's tool).
    """
    return control.write(writer, PEOPLE, person.to_json())


def directory(reader: BoardReader) -> dict[str, Person]:
    """Every person on the board, as their latest well-formed record says."""
    found: dict[str, Person] = {}
    for row in reader.read_level(PEOPLE):
        try:
            person = Person.from_json(row.content)
        except MalformedContentError:
            continue
        found[person.who] = person
    return found


def judge_person(reader: BoardReader, writer: str, content: Any) -> str | None:
    """Why a ``people`` write is refused, or ``None``: a person may write only their own."""
    try:
        person = Person.from_json(content)
    except MalformedContentError as exc:
        return f"this person record cannot be kept: {exc}"
    if writer.startswith("human:") and writer != person.who:
        return f"{writer} may record only their own channels and quiet hours, not {person.who}'s"
    return None

"""Notifications: telling people there is an ask, and reminding them before its deadline.

:class:`Notifier` is the transport seam (``send(notification) -> Delivery``, ``close()``);
:class:`WebhookNotifier` POSTs JSON signed with HMAC-SHA256 and retries with backoff,
:class:`EmailNotifier` sends mail through ``smtplib`` (STARTTLS optional).
:class:`NotificationDispatcher` decides what is due (an ask when it is posted, each
reminder before its deadline), for whom (the ask's assignee or team, see
``pybb.human.recipients``), defers what falls in a person's quiet hours to their end,
claims each notification once on the ``notifications`` level (unique on ``id``),
charges it to the attention budget through a :data:`Charge` (the same budget the ask
was charged to; ``pybb.supervision`` passes buddhi's), and records on the
``deliveries`` level what became of it: refused by the budget, sent, or failed (every
attempt). Each notification carries a signed, single-use, expiring link to its ask.

A notification is sent at most once: the claim comes before the send, so a crash
between them loses that notification rather than interrupting the person twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

from blackboard import BoardReader, Control, RejectionCause, Written
from pybb.human._assign import AssignmentPolicy, recipients
from pybb.human._board import AskStatus, ask_states
from pybb.human._deadlines import DeadlinePolicy
from pybb.human._errors import HumanLoopError
from pybb.human._links import sign_link
from pybb.human._people import DELIVERIES, NOTIFICATIONS, Channel, Person, directory
from pybb.human._protocol import Ask

__all__ = [
    "NOTIFY_WRITER",
    "Attempt",
    "Charge",
    "Delivery",
    "DispatchReport",
    "EmailNotifier",
    "Notification",
    "NotificationDispatcher",
    "Notifier",
    "WebhookNotifier",
    "deliveries",
    "webhook_signature",
]

NOTIFY_WRITER = "pybb:notify"
"""The writer of notification claims and delivery records."""

SIGNATURE_HEADER = "X-Pybb-Signature"

Charge = Callable[["Notification", Ask], str | None]
"""Charges a notification to the attention budget: ``None`` if admitted, else why not."""


@dataclass(frozen=True, slots=True)
class Notification:
    """One message to one person about one ask.

    Attributes:
        id: ``<ask id>/<kind>/<person>``: what makes it once-only on the board.
        ask_id: The ask it is about.
        person: Whom it is for, ``human:<name>``.
        kind: ``"ask"`` (there is a new ask) or ``"reminder-<n>"``.
        subject: One line.
        text: The message.
        link: The signed, single-use link to the ask.
        deadline: When the ask's default is applied.
        channel: Where this copy goes (set per channel when it is sent).
    """

    id: str
    ask_id: str
    person: str
    kind: str
    subject: str
    text: str
    link: str
    deadline: datetime
    channel: Channel | None = None

    def payload(self) -> dict[str, Any]:
        """The notification as the JSON a webhook receives."""
        return {
            "id": self.id,
            "ask_id": self.ask_id,
            "person": self.person,
            "kind": self.kind,
            "subject": self.subject,
            "text": self.text,
            "link": self.link,
            "deadline": self.deadline.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at delivering: when, the status received (if any), the error (if any)."""

    at: datetime
    status: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As JSON."""
        return {"at": self.at.isoformat(), "status": self.status, "error": self.error}


@dataclass(frozen=True, slots=True)
class Delivery:
    """What became of sending one notification over one channel.

    Attributes:
        ok: Whether it was delivered.
        attempts: Every try, failures included.
    """

    ok: bool
    attempts: tuple[Attempt, ...] = ()

    @property
    def error(self) -> str | None:
        """The last failure, if it was not delivered."""
        return None if self.ok or not self.attempts else self.attempts[-1].error


class Notifier(ABC):
    """The transport seam: deliver one notification over its channel."""

    @abstractmethod
    def send(self, notification: Notification) -> Delivery:
        """Deliver ``notification`` to ``notification.channel``; never raise for a failure."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing to release
        """Release what the transport holds."""


def webhook_signature(body: bytes, secret: bytes) -> str:
    """The ``X-Pybb-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class WebhookNotifier(Notifier):
    """POSTs the notification as JSON, signed, with timeouts and retries with backoff.

    A receiver checks ``X-Pybb-Signature`` against :func:`webhook_signature` of the
    raw body with the shared secret. Connection errors, timeouts, 429 and 5xx are
    retried (``backoff``, doubling); any other 4xx is final.

    Args:
        secret: The shared secret (at least 16 bytes).
        timeout: How long one attempt may take.
        retries: Attempts after the first.
        backoff: The wait before the first retry; doubled for each further one.
        now: The attempts' times (default: the wall clock).
        sleep: Waits between attempts, in seconds (tests pass a recorder).
    """

    def __init__(
        self,
        secret: bytes,
        *,
        timeout: timedelta = timedelta(seconds=5),
        retries: int = 3,
        backoff: timedelta = timedelta(seconds=0.5),
        now: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise HumanLoopError("a webhook secret must be at least 16 bytes")
        if timeout <= timedelta(0) or retries < 0 or backoff < timedelta(0):
            raise HumanLoopError(
                f"timeout must be > 0, retries and backoff >= 0 (got {timeout!r}, {retries!r}, "
                f"{backoff!r})"
            )
        self._secret = secret
        self._timeout = timeout.total_seconds()
        self._retries = retries
        self._backoff = backoff.total_seconds()
        self._now = now or _utcnow
        self._sleep = sleep

    def send(self, notification: Notification) -> Delivery:
        """POST the notification to its channel's URL."""
        channel = notification.channel
        if channel is None or channel.kind != "webhook":
            raise HumanLoopError("WebhookNotifier sends only over a webhook channel")
        body = json.dumps(notification.payload(), sort_keys=True).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: webhook_signature(body, self._secret),
            "User-Agent": "pybb-notify",
        }
        attempts: list[Attempt] = []
        wait = self._backoff
        for number in range(self._retries + 1):
            if number:
                self._sleep(wait)
                wait *= 2
            attempt, final = self._post(channel.address, body, headers)
            attempts.append(attempt)
            if attempt.error is None:
                return Delivery(True, tuple(attempts))
            if final:
                break
        return Delivery(False, tuple(attempts))

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[Attempt, bool]:
        at = self._now()
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            return Attempt(at, None, f"{url!r} is not an http(s) URL; give the webhook's URL"), True
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            # The scheme is checked above (no file: or ftp: from board data); B310 is that.
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # nosec B310
                return Attempt(at, response.status), True
        except urllib.error.HTTPError as exc:
            retry = exc.code == 429 or exc.code >= 500
            return Attempt(at, exc.code, f"HTTP {exc.code} {exc.reason}"), not retry
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            return Attempt(at, None, f"{type(exc).__name__}: {reason}"), False


class EmailNotifier(Notifier):
    """Sends the notification by email through SMTP (the standard library's ``smtplib``).

    Args:
        host, port: The SMTP server.
        sender: The ``From`` address.
        starttls: Upgrade the connection with STARTTLS before sending.
        username, password: Log in after STARTTLS, if given.
        timeout: How long the connection may take.
        ssl_context: For STARTTLS (default: the system's, verifying the server).
        now: The attempts' times (default: the wall clock).
    """

    def __init__(
        self,
        host: str,
        port: int = 25,
        *,
        sender: str,
        starttls: bool = False,
        username: str | None = None,
        password: str | None = None,
        timeout: timedelta = timedelta(seconds=10),
        ssl_context: ssl.SSLContext | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._host, self._port, self._sender = host, port, sender
        self._starttls, self._username, self._password = starttls, username, password
        self._timeout = timeout.total_seconds()
        self._context = ssl_context
        self._now = now or _utcnow

    def send(self, notification: Notification) -> Delivery:
        """Mail the notification to its channel's address."""
        channel = notification.channel
        if channel is None or channel.kind != "email":
            raise HumanLoopError("EmailNotifier sends only over an email channel")
        message = EmailMessage()
        message["From"] = self._sender
        message["To"] = channel.address
        message["Subject"] = notification.subject
        message["X-Pybb-Ask"] = notification.ask_id
        message.set_content(
            f"{notification.text}\n\nOpen the ask (this link works once, until "
            f"{notification.deadline:%Y-%m-%d %H:%M %Z}):\n{notification.link}\n"
        )
        at = self._now()
        try:
            with smtplib.SMTP(self._host, self._port, timeout=self._timeout) as smtp:
                if self._starttls:
                    smtp.starttls(context=self._context or ssl.create_default_context())
                if self._username is not None:
                    smtp.login(self._username, self._password or "")
                smtp.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            return Delivery(False, (Attempt(at, None, f"{type(exc).__name__}: {exc}"),))
        return Delivery(True, (Attempt(at, 250),))


@dataclass(frozen=True, slots=True)
class DispatchReport:
    """What one dispatch did.

    Attributes:
        sent: Notifications delivered over at least one channel.
        failed: Notifications no channel delivered (every attempt is on the board).
        refused: Notifications the budget refused (not sent), with why.
        deferred: Notifications in the person's quiet hours, with when they end.
    """

    sent: tuple[Notification, ...] = ()
    failed: tuple[Notification, ...] = ()
    refused: tuple[tuple[Notification, str], ...] = ()
    deferred: tuple[tuple[Notification, datetime], ...] = ()


@dataclass
class NotificationDispatcher:
    """Sends what is due about the open asks, once, within the budget, outside quiet hours.

    Args:
        control, reader: The board.
        notifiers: A notifier per channel kind (``"webhook"``, ``"email"``); a channel
            with no notifier is skipped.
        link_secret: The key of the links (the inbox verifies them with the same).
        base_url: The inbox's address; links are ``<base_url>/link/<token>``.
        deadlines: When asks expire (reminders are due before it).
        assignment: Who an ask is for.
        charge: Charges a notification to the budget; ``None`` charges nothing.
        writer: The writer of claims and deliveries.
    """

    control: Control
    reader: BoardReader
    notifiers: Mapping[str, Notifier]
    link_secret: bytes
    base_url: str
    deadlines: DeadlinePolicy = field(default_factory=DeadlinePolicy)
    assignment: AssignmentPolicy = field(default_factory=AssignmentPolicy)
    charge: Charge | None = None
    writer: str = NOTIFY_WRITER

    def due(self, now: datetime) -> list[tuple[Notification, Person, Ask]]:
        """The notifications due by ``now`` that nobody has claimed yet."""
        claimed = {row.content.get("id") for row in self.reader.read_level(NOTIFICATIONS)}
        people = directory(self.reader)
        found = []
        for state in ask_states(self.reader):
            if state.status is not AskStatus.OPEN:
                continue
            ask = state.ask
            deadline = self.deadlines.due(ask)
            if deadline <= now:
                continue  # expired: the default is applied, nobody is told to answer
            times = [("ask", ask.created_at)] + [
                (f"reminder-{n}", at) for n, at in enumerate(self.deadlines.reminders(ask), 1)
            ]
            kinds = [kind for kind, at in times if at <= now]
            if not kinds:
                continue
            kind = kinds[-1]  # only the latest due one: one interruption, not a backlog
            for who in recipients(self.reader, ask, self.assignment, people):
                person = people.get(who)
                notification_id = f"{ask.ask_id}/{kind}/{who}"
                if person is None or not person.channels or notification_id in claimed:
                    continue
                found.append((self._compose(ask, who, kind, deadline, now), person, ask))
        return found

    def dispatch(self, now: datetime) -> DispatchReport:
        """Send every notification due by ``now``; see the module's docstring for the order."""
        outcomes: dict[str, list[Any]] = {"sent": [], "failed": [], "refused": [], "deferred": []}
        for notification, person, ask in self.due(now):
            kind, detail = self._one(notification, person, ask, now)
            if kind is not None:
                outcomes[kind].append(notification if detail is None else (notification, detail))
        return DispatchReport(
            tuple(outcomes["sent"]),
            tuple(outcomes["failed"]),
            tuple(outcomes["refused"]),
            tuple(outcomes["deferred"]),
        )

    def _one(
        self, notification: Notification, person: Person, ask: Ask, now: datetime
    ) -> tuple[str | None, Any]:
        """Defer, claim, charge, send: what became of one notification, and its detail."""
        quiet_until = None if person.quiet is None else person.quiet.until(now)
        if quiet_until is not None:
            return "deferred", quiet_until
        if not self._claim(notification, now):
            return None, None  # another process has it
        why = None if self.charge is None else self.charge(notification, ask)
        if why is not None:
            self._record(notification, None, "refused", now, reason=why)
            return "refused", why
        delivered = [self._send(notification, channel, now) for channel in person.channels]
        return ("sent" if any(delivered) else "failed"), None

    def _send(self, notification: Notification, channel: Channel, now: datetime) -> bool:
        notifier = self.notifiers.get(channel.kind)
        if notifier is None:
            return False  # no transport for this kind of channel here
        copy = _with_channel(notification, channel)
        delivery = notifier.send(copy)
        self._record(copy, delivery, "sent" if delivery.ok else "failed", now)
        return delivery.ok

    def _compose(
        self, ask: Ask, who: str, kind: str, deadline: datetime, now: datetime
    ) -> Notification:
        token = sign_link(self.link_secret, ask.ask_id, who, deadline)
        remind = kind.startswith("reminder")
        subject = f"{'Reminder: ' if remind else ''}{ask.title}"[:300]
        default = self.deadlines.default_for(ask)
        label = (ask.option(default) or ask.recommended).label
        text = (
            f"{ask.subject}: {ask.title}\n\nIf nobody answers by "
            f"{deadline:%Y-%m-%d %H:%M %Z}, “{label}” is applied."
        )
        return Notification(
            f"{ask.ask_id}/{kind}/{who}", ask.ask_id, who, kind, subject, text,
            f"{self.base_url.rstrip('/')}/link/{token}", deadline,
        )  # fmt: skip

    def _claim(self, notification: Notification, now: datetime) -> bool:
        content = {
            "id": notification.id,
            "ask_id": notification.ask_id,
            "person": notification.person,
            "kind": notification.kind,
            "at": now.isoformat(),
        }
        result = self.control.write(self.writer, NOTIFICATIONS, content)
        if isinstance(result, Written):
            return True
        if result.cause is RejectionCause.DUPLICATE:
            return False  # another process claimed it: it sends it
        raise HumanLoopError(f"the board refused the claim of {notification.id!r}: {result.reason}")

    def _record(
        self,
        notification: Notification,
        delivery: Delivery | None,
        status: str,
        now: datetime,
        *,
        reason: str | None = None,
    ) -> None:
        channel = notification.channel
        content = {
            "id": notification.id,
            "ask_id": notification.ask_id,
            "person": notification.person,
            "status": status,
            "channel": None if channel is None else channel.to_json(),
            "reason": reason if delivery is None else delivery.error,
            "attempts": [] if delivery is None else [a.to_json() for a in delivery.attempts],
            "at": now.isoformat(),
        }
        self.control.write(self.writer, DELIVERIES, content)

    def close(self) -> None:
        """Close every notifier."""
        for notifier in self.notifiers.values():
            notifier.close()


def deliveries(reader: BoardReader, ask_id: str | None = None) -> tuple[Mapping[str, Any], ...]:
    """The delivery records on the board (of one ask, if given), oldest first."""
    return tuple(
        row.content
        for row in reader.read_level(DELIVERIES)
        if ask_id is None or row.content.get("ask_id") == ask_id
    )


def _with_channel(notification: Notification, channel: Channel) -> Notification:
    return replace(notification, channel=channel)


def _utcnow() -> datetime:
    return datetime.now(UTC)

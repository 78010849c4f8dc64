"""How an inbox behaves: hosts it answers to, limits, lifetimes. Defaults live here only."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

__all__ = ["LOOPBACK_HOSTS", "InboxSettings", "RateLimit"]

LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
"""The host names an inbox on loopback answers to."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: ``burst`` requests at once, refilled at ``per_minute``.

    Attributes:
        per_minute: The sustained rate.
        burst: How many requests may come at once before the rate applies.
    """

    per_minute: float = 60.0
    burst: int = 10

    def __post_init__(self) -> None:
        if not self.per_minute > 0 or self.burst < 1:
            raise ValueError(
                f"RateLimit(per_minute={self.per_minute!r}, burst={self.burst!r}): both must "
                "be positive"
            )


@dataclass(frozen=True, slots=True)
class InboxSettings:
    """The inbox's knobs; every default is a safe one for a loopback inbox.

    Attributes:
        allowed_hosts: Host names (without port) the inbox answers to; any other
            ``Host`` header is refused with 403.
        max_body_bytes: Request bodies larger than this are refused with 413.
        answer_rate: Per person: answers and other state changes.
        login_rate: Per client address: login attempts.
        session_ttl: How long a login lasts (never longer than its token).
        timeline_length: How many recent board records the page shows.
        secure_cookies: Mark the session cookie ``Secure``; ``None``: when the request
            came over https (a plain-http loopback inbox then still works).
        nonce_secret: The key of the answer nonces; ``None``: a random one per app.
        heartbeat: How often the live-update stream says it is alive.
        stream_lifetime: How long one live-update stream lasts before the browser
            reconnects (which re-checks the login).
        title: The page title.
        link_secret: The key of the signed links in notifications (the same as the
            notifier's, ``pybb.supervision.NotifySettings.link_secret``); ``None``: the
            inbox accepts no links (``/link/...`` is 404).
    """

    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    max_body_bytes: int = 64 * 1024
    answer_rate: RateLimit = field(default_factory=RateLimit)
    login_rate: RateLimit = field(default_factory=lambda: RateLimit(per_minute=20, burst=10))
    session_ttl: timedelta = timedelta(hours=12)
    timeline_length: int = 30
    secure_cookies: bool | None = None
    nonce_secret: bytes | None = None
    heartbeat: timedelta = timedelta(seconds=15)
    stream_lifetime: timedelta = timedelta(minutes=5)
    title: str = "pybb inbox"
    link_secret: bytes | None = None

"""Logins: server-side sessions, their CSRF tokens, and the answer nonces bound to them.

The cookie carries only a random session id. Each session has its own CSRF token for
its forms, and every answer form carries a nonce, HMAC(secret, session id, ask id), so
a form is good for one ask in one session only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pybb.inbox._tokens import TokenInfo

__all__ = ["Session", "Sessions"]

_MAX_SESSIONS = 10_000


@dataclass(frozen=True, slots=True)
class Session:
    """One login.

    Attributes:
        session_id: The random id the cookie carries.
        human: Who logged in, ``human:<name>``.
        token_id: The public id of the token they logged in with.
        csrf: The CSRF token of this session's forms.
        expires_at: When the login ends.
        ask_id: A sign-in from a notification's link opens this one ask only (``None``:
            a login with a token, which opens the whole inbox).
    """

    session_id: str
    human: str
    token_id: str
    csrf: str
    expires_at: datetime
    ask_id: str | None = None


class Sessions:
    """The open logins of one inbox, in memory (a restart logs everyone out)."""

    def __init__(self, ttl: timedelta, secret: bytes, clock: Callable[[], datetime]) -> None:
        self._ttl = ttl
        self._secret = secret
        self._clock = clock
        self._lock = threading.Lock()
        self._open: OrderedDict[str, Session] = OrderedDict()

    def open(self, token: TokenInfo) -> Session:
        """Start a login for ``token``'s person; it ends with the session ttl or the token."""
        expires = self._clock() + self._ttl
        if token.expires_at is not None:
            expires = min(expires, token.expires_at)
        session = Session(
            secrets.token_urlsafe(32),
            token.human,
            token.token_id,
            secrets.token_urlsafe(32),
            expires,
        )
        return self._keep(session)

    def open_link(self, human: str, ask_id: str, link_id: str, expires: datetime) -> Session:
        """Start a sign-in from a redeemed link: ``human``, for ``ask_id`` only.

        It ends with the session ttl or the link's expiry, whichever comes first; there
        is no token behind it, so ``token_id`` names the link (``link:<id>``).
        """
        ends = min(self._clock() + self._ttl, expires)
        session = Session(
            secrets.token_urlsafe(32),
            human,
            f"link:{link_id}",
            secrets.token_urlsafe(32),
            ends,
            ask_id,
        )
        return self._keep(session)

    def _keep(self, session: Session) -> Session:
        with self._lock:
            self._open[session.session_id] = session
            while len(self._open) > _MAX_SESSIONS:
                self._open.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The open, unexpired session with this id, or ``None``."""
        if not session_id or len(session_id) > 128:
            return None
        with self._lock:
            session = self._open.get(session_id)
            if session is not None and self._clock() >= session.expires_at:
                del self._open[session_id]
                session = None
        return session

    def close(self, session_id: str) -> None:
        """End a login."""
        with self._lock:
            self._open.pop(session_id, None)

    def nonce(self, session: Session, ask_id: str) -> str:
        """The nonce that lets ``session`` answer ``ask_id`` (and nothing else)."""
        message = f"{session.session_id}\x1f{ask_id}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def nonce_ok(self, session: Session, ask_id: str, nonce: object) -> bool:
        """Whether ``nonce`` is this session's nonce for ``ask_id``."""
        return _same(self.nonce(session, ask_id), nonce)

    def sign(self, *parts: str) -> str:
        """An HMAC of ``parts`` under the inbox's key, for tokens bound to what they name.

        The link page's CSRF token (bound to the link and the browser) and the API's
        accept-digest confirmation (bound to the person, the ask and the preview) are.
        """
        message = "\x1f".join(("sign", *parts)).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def signed_ok(self, value: object, *parts: str) -> bool:
        """Whether ``value`` is :meth:`sign` of ``parts``."""
        return _same(self.sign(*parts), value)

    @staticmethod
    def csrf_ok(session: Session, token: object) -> bool:
        """Whether ``token`` is this session's CSRF token."""
        return _same(session.csrf, token)


def _same(expected: str, given: object) -> bool:
    """Whether ``given`` is the secret ``expected``, compared in constant time.

    ``hmac.compare_digest`` raises on a str with non-ASCII characters, and a form field or
    JSON value can hold any; such a value is simply not the (hex or URL-safe) secret.
    """
    return isinstance(given, str) and given.isascii() and hmac.compare_digest(expected, given)

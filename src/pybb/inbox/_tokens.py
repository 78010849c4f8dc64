"""The token table: who may use the inbox. It keeps only SHA-256 digests, never tokens.

A token is shown once, when it is issued; the table (in memory, and in a JSON file
when given a path) holds its digest, the person it stands for, when it expires and
whether it was revoked. A file-backed table re-reads its file when it changes, so a
revocation made by another process takes effect at the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pybb.human import MalformedContentError, human_name, human_writer
from pybb.inbox._errors import TokenError

__all__ = ["TOKEN_PREFIX", "TokenInfo", "TokenTable"]

TOKEN_PREFIX = "pybb_"
"""Issued tokens start with this, so secret scanners can recognise them."""

_MIN_LENGTH = 16
_FILE_VERSION = 1


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What the table knows about one token (never the token itself).

    Attributes:
        token_id: A short public id of the token (the first 16 hex digits of its digest).
        human: The person it stands for, ``human:<name>``.
        digest: The SHA-256 hex digest of the token.
        created_at: When it was added.
        expires_at: When it stops working, or ``None``.
        revoked_at: When it was revoked, or ``None``.
    """

    token_id: str
    human: str
    digest: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    def valid_at(self, now: datetime) -> bool:
        """Whether the token works at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


class TokenTable:
    """Tokens by digest, each standing for one person.

    Args:
        path: A JSON file to keep the table in (created mode 0600); ``None``: memory only.
        clock: The time now, timezone-aware (tests pass a fake one).

    Raises:
        TokenError: The file exists but is not a token table.
    """

    def __init__(
        self, path: str | Path | None = None, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._path = None if path is None else Path(path)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._by_digest: dict[str, TokenInfo] = {}
        self._stamp: tuple[int, int] | None = None
        if self._path is not None and self._path.exists():
            self._load()

    def now(self) -> datetime:
        """The table's time now (its clock), which expiries are measured against."""
        return self._clock()

    @property
    def path(self) -> Path | None:
        """The file the table is kept in, if any."""
        return self._path

    def issue(self, human: str, *, ttl: timedelta | None = None) -> str:
        """Make a new random token for ``human``; return it. It is not kept anywhere.

        Args:
            human: The person's name (``alice``) or writer name (``human:alice``).
            ttl: How long it works; ``None``: until revoked.
        """
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires = None if ttl is None else self._clock() + ttl
        self.add(token, human, expires_at=expires)
        return token

    def add(self, token: str, human: str, *, expires_at: datetime | None = None) -> TokenInfo:
        """Accept a token chosen elsewhere (e.g. from the environment) for ``human``.

        Adding a token the table already holds replaces its person and expiry (a
        configured token is added again at every start); a revoked one stays revoked.

        Raises:
            TokenError: The token is shorter than 16 characters, was revoked, or ``human``
                is malformed.
        """
        if not isinstance(token, str) or len(token) < _MIN_LENGTH or not token.isprintable():
            raise TokenError(
                f"a token must be a printable string of at least {_MIN_LENGTH} characters; "
                "use TokenTable.issue() to make a strong one"
            )
        if expires_at is not None and expires_at.tzinfo is None:
            raise TokenError("expires_at must be timezone-aware, e.g. datetime.now(UTC) + ttl")
        digest = _digest(token)
        info = TokenInfo(digest[:16], _writer(human), digest, self._clock(), expires_at)
        with self._lock:
            self._refresh()
            known = self._by_digest.get(digest)
            if known is not None and known.revoked_at is not None:
                raise TokenError(
                    f"token {known.token_id} was revoked at {known.revoked_at:%Y-%m-%d %H:%M}; "
                    "a revoked token stays revoked, so choose a new one"
                )
            self._by_digest[digest] = info
            self._save()
        return info

    def verify(self, token: str) -> TokenInfo | None:
        """The token's entry if it is known, unexpired and unrevoked; else ``None``."""
        if not isinstance(token, str) or not token or len(token) > 1024:
            return None
        digest = _digest(token)
        with self._lock:
            self._refresh()
            info = self._by_digest.get(digest)
        if info is None or not hmac.compare_digest(info.digest, digest):
            return None
        return info if info.valid_at(self._clock()) else None

    def check(self, token_id: str) -> TokenInfo | None:
        """The entry with ``token_id`` if it still works (sessions re-check this)."""
        with self._lock:
            self._refresh()
            info = next((i for i in self._by_digest.values() if i.token_id == token_id), None)
        return info if info is not None and info.valid_at(self._clock()) else None

    def revoke(self, token_or_id: str) -> bool:
        """Revoke a token, given the token itself or its ``token_id``; True if one was found."""
        digest = _digest(token_or_id)
        with self._lock:
            self._refresh()
            for key, info in self._by_digest.items():
                if key == digest or info.token_id == token_or_id:
                    self._by_digest[key] = replace(info, revoked_at=self._clock())
                    self._save()
                    return True
        return False

    def entries(self) -> tuple[TokenInfo, ...]:
        """Every entry, valid or not, oldest first."""
        with self._lock:
            self._refresh()
            return tuple(sorted(self._by_digest.values(), key=lambda i: i.created_at))

    # -- the file --------------------------------------------------------------------

    def _refresh(self) -> None:
        if self._path is not None and self._path.exists() and self._file_stamp() != self._stamp:
            self._load()

    def _file_stamp(self) -> tuple[int, int]:
        assert self._path is not None
        stat = self._path.stat()
        return (stat.st_mtime_ns, stat.st_size)

    def _load(self) -> None:
        assert self._path is not None
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
            entries = [_entry_from_json(e) for e in document["tokens"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TokenError(
                f"{str(self._path)!r} is not a pybb token table ({type(exc).__name__}); "
                "point --token-file at a new path and the inbox will create one"
            ) from exc
        self._by_digest = {e.digest: e for e in entries}
        self._stamp = self._file_stamp()

    def _save(self) -> None:
        if self._path is None:
            return
        document = {
            "version": _FILE_VERSION,
            "tokens": [_entry_to_json(e) for e in self._by_digest.values()],
        }
        temporary = self._path.with_name(self._path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
        os.replace(temporary, self._path)
        self._stamp = self._file_stamp()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _writer(human: str) -> str:
    try:
        return human if human_name(human) is not None else human_writer(human)
    except MalformedContentError as exc:
        raise TokenError(str(exc)) from exc


def _entry_to_json(info: TokenInfo) -> dict[str, Any]:
    return {
        "token_id": info.token_id,
        "human": info.human,
        "sha256": info.digest,
        "created_at": info.created_at.isoformat(),
        "expires_at": None if info.expires_at is None else info.expires_at.isoformat(),
        "revoked_at": None if info.revoked_at is None else info.revoked_at.isoformat(),
    }


def _entry_from_json(data: dict[str, Any]) -> TokenInfo:
    def when(key: str) -> datetime | None:
        value = data.get(key)
        return None if value is None else datetime.fromisoformat(value)

    created = when("created_at")
    if created is None or human_name(data["human"]) is None:
        raise ValueError("malformed entry")
    digest = str(data["sha256"])
    return TokenInfo(
        digest[:16], data["human"], digest, created, when("expires_at"), when("revoked_at")
    )

"""Leased claims on a board's keys: who works on what, and the fence a holder writes behind.

A claim is a lease on one key of a board (an application's key, such as a pybb entry):
while one holder has it, no one else can take it; a holder renews it (a heartbeat), and
when a lease lapses unrenewed, another holder may take it over. Claims are coordination
state beside the board, not records of it: they take no sequence number and are not in
the board's log or digest.

A holder that writes behind a :class:`Fence` has its batch land only if it still holds
every fenced key at the moment the batch commits, checked inside the admitting
transaction: a holder that stalled past its lease and was taken over cannot write over
the one that took over (Kleppmann's fencing token). ``docs/adr/0006-leased-claims.md``
gives the argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from blackboard._json import is_utf8
from blackboard.errors import ContentError

__all__ = ["Claim", "Fence", "check_holder", "check_keys", "check_lease", "key_list"]

MAX_HOLDER = 200
"""The longest holder name."""
MAX_CLAIM_KEY = 256
"""The longest claimed key (as long as an idempotency key)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A lease on one key of a board.

    Attributes:
        key: What is claimed.
        holder: Who holds it.
        expires: When the lease lapses unless renewed (by the store's clock).
        token: How many times the key has been taken, by anyone (a fencing token): it
            grows each time the key passes to a holder that did not hold it already.
    """

    key: str
    holder: str
    expires: datetime
    token: int


@dataclass(frozen=True, slots=True)
class Fence:
    """A batch of writes that lands only while ``holder`` still holds every one of ``keys``.

    "Holds" means no one else has taken the key since ``holder`` did: a lease that
    lapsed unrenewed still fences, as long as nobody took the key over.

    Attributes:
        holder: The holder the writes are made for.
        keys: The claimed keys the writes are about.
    """

    holder: str
    keys: frozenset[str]

    def __post_init__(self) -> None:
        check_holder(self.holder)
        if not isinstance(self.keys, frozenset):
            raise ContentError("fence keys", f"must be a frozenset of keys, not {self.keys!r:.80}")
        check_keys(self.keys)


def check_holder(holder: object) -> None:
    """Refuse a holder name the stores cannot keep."""
    if (
        not isinstance(holder, str)
        or not holder
        or len(holder) > MAX_HOLDER
        or "\x00" in holder
        or not is_utf8(holder)
    ):
        raise ContentError(
            "holder",
            f"{holder!r:.80} is not a usable holder name; use a non-empty string of at most "
            f"{MAX_HOLDER} characters of valid Unicode, without NUL",
        )


def check_keys(keys: Iterable[object]) -> None:
    """Refuse a claimed key the stores cannot keep."""
    if isinstance(keys, str | bytes):
        raise ContentError("keys", f"must be a list of keys, not the single string {keys!r:.80}")
    for key in keys:
        if not isinstance(key, str) or not key or len(key) > MAX_CLAIM_KEY or not is_utf8(key):
            raise ContentError(
                "key",
                f"{key!r:.80} is not a claimable key; use a non-empty string of valid Unicode "
                f"of at most {MAX_CLAIM_KEY} characters",
            )


def key_list(keys: Iterable[str]) -> list[str]:
    """``keys`` as a list, each checked (a lone string is refused, not split)."""
    if isinstance(keys, str | bytes):
        check_keys(keys)
    wanted = list(keys)
    check_keys(wanted)
    return wanted


def check_lease(lease: object) -> timedelta:
    """Refuse a lease that is not a positive ``timedelta``."""
    if not isinstance(lease, timedelta) or lease <= timedelta(0):
        raise ContentError(
            "lease",
            f"{lease!r:.80} must be a positive datetime.timedelta, e.g. timedelta(seconds=30)",
        )
    return lease

"""The claim rules for stores that keep claims as rows they judge in Python (memory, SQLite).

PostgreSQL judges the same rules in SQL (``FOR UPDATE SKIP LOCKED``); these functions are
the reference the contract checks hold every store to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from blackboard._claims import Claim

__all__ = ["Lease", "now", "taken", "to_claim"]


@dataclass(slots=True)
class Lease:
    """One key's claim row: its holder (``None`` once released), lease end and token."""

    holder: str | None
    expires: float
    token: int


def now() -> float:
    """The store's clock for leases: wall-clock seconds (leases outlive a process)."""
    return time.time()


def taken(lease: Lease | None, holder: str, at: float, until: float) -> Lease | None:
    """The row after ``holder`` takes the key at ``at``, or ``None`` if it cannot.

    A key is taken when no one holds it, its lease lapsed, or ``holder`` has it already
    (a renewal, which keeps the token); taking it from anyone else raises the token.
    """
    if lease is None:
        return Lease(holder, until, 1)
    if lease.holder == holder:
        return Lease(holder, until, lease.token)
    if lease.holder is None or lease.expires <= at:
        return Lease(holder, until, lease.token + 1)
    return None


def to_claim(key: str, lease: Lease) -> Claim:
    """The public view of a held row."""
    assert lease.holder is not None
    return Claim(key, lease.holder, datetime.fromtimestamp(lease.expires, UTC), lease.token)

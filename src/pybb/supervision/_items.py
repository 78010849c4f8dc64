"""From a pybb escalation to a buddhi item, and the names derived from an escalation."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from buddhi import Attempt, Item
from pybb import AttemptStatus, AttemptSummary, Escalation

__all__ = ["ItemFactory", "ask_id_for", "entry_key", "escalation_item"]

ItemFactory = Callable[[Escalation], Item]
"""Builds the buddhi item for an escalation; its ``id`` must be ``escalation.id``."""

NO_TIER = "pybb"
"""An item's source when no tier failed (the entry's chain was empty)."""

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def escalation_item(escalation: Escalation) -> Item:
    """The buddhi item for an escalated entry, carrying its tier's report.

    * ``id``: the escalation's id (board, key, sequence);
    * ``source``: the tier whose failure escalated it (the exclusion lattice is keyed
      by it), or ``"pybb"`` for an empty chain;
    * ``payload``: the :class:`~pybb.Escalation` itself (``payload.report.tier_report``
      is the tier's report);
    * ``confidence``: the tier report's ``"confidence"`` (a number in [0, 1]: how sure
      the automation is that it can handle the entry), else 0;
    * ``history``: one attempt per knowledge-source attempt: a timeout is transient, an
      attempt whose report holds a finite ``"score"`` scored it, any other a failure.
    """
    tier = escalation.report.tier_report
    confidence = _unit(tier.get("confidence")) if isinstance(tier, Mapping) else None
    return Item(
        escalation.id,
        escalation.source or NO_TIER,
        escalation,
        0.0 if confidence is None else confidence,
        tuple(_attempt(a) for a in escalation.report.attempts),
    )


def ask_id_for(escalation: Escalation) -> str:
    """The id of the ask posted for an escalation: stable, readable, a valid ask id."""
    slug = _SLUG.sub("-", escalation.key).strip("-._")[:60] or "entry"
    digest = hashlib.sha256(escalation.id.encode()).hexdigest()[:12]
    return f"esc-{escalation.sequence}-{slug}-{digest}"


def entry_key(item_id: str, board_id: str) -> str | None:
    """The entry key inside an escalation id of board ``board_id``, or ``None``."""
    prefix = board_id + "/"
    cut = item_id.rfind("/")
    if not item_id.startswith(prefix) or cut < len(prefix) or not item_id[cut + 1 :].isdigit():
        return None
    return item_id[len(prefix) : cut] or None


def _attempt(summary: AttemptSummary) -> Attempt:
    if summary.status is AttemptStatus.TIMEOUT:
        return Attempt(transient=True)
    report = summary.report
    score = _finite(report.get("score")) if isinstance(report, Mapping) else None
    return Attempt() if score is None else Attempt(score=score)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _unit(value: Any) -> float | None:
    number = _finite(value)
    return number if number is not None and 0.0 <= number <= 1.0 else None

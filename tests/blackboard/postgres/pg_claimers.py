"""What the claim tests run in their worker processes: claim, write behind fences, stall.

Imported by name in spawned children (the parent's ``sys.path`` comes along), so it
imports nothing from the test modules. :func:`claim_history` is the checker both the
real test and its negative control run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from blackboard import Fence, Level, ProposedContribution, Rejected, RejectionCause, create_model
from blackboard.stores import open_store

LEASE = timedelta(seconds=0.25)
KEYS = [f"k{i}" for i in range(6)]


def claimer(
    url: str, board: str, holder: str, seconds: float, seed: int, fenced: bool
) -> dict[str, int]:
    """Claim keys, write behind a fence on each, now and then stall past the lease.

    Returns counts of what happened; the board's log is the history the parent checks.
    """
    rng = random.Random(seed)
    store = open_store(url)
    model = create_model([Level("work")], store=store, board_id=board)
    counts = {"claimed": 0, "written": 0, "lost": 0, "stalls": 0}
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            taken = model.control.claim(holder, rng.sample(KEYS, len(KEYS)), lease=LEASE, limit=2)
            counts["claimed"] += len(taken)
            for claim in taken:
                if rng.random() < 0.2:  # a stall: the lease lapses while we "work"
                    counts["stalls"] += 1
                    time.sleep(LEASE.total_seconds() * 1.6)
                content = {"key": claim.key, "holder": holder, "token": claim.token}
                fence = Fence(holder, frozenset({claim.key})) if fenced else None
                (result,) = model.control.write_all(
                    [ProposedContribution(holder, "work", content)], fence=fence
                )
                if isinstance(result, Rejected) and result.cause is RejectionCause.CLAIM_LOST:
                    counts["lost"] += 1
                else:
                    counts["written"] += 1
            if rng.random() < 0.5:
                model.control.release(holder, [c.key for c in taken])
    finally:
        store.close()
    return counts


def claim_history(contents: Sequence[Any]) -> list[str]:
    """Violations of "no key held by two holders at once" in a log of fenced writes.

    Each write names its key, holder and the claim's token. Per key, in log order, the
    tokens must never go back (a write under an older claim after a newer one), and a
    token belongs to one holder.
    """
    problems: list[str] = []
    last: dict[str, int] = {}
    owner: dict[tuple[str, int], str] = {}
    for content in contents:
        key, holder, token = content["key"], content["holder"], content["token"]
        if token < last.get(key, 0):
            problems.append(f"{key}: a write under token {token} after token {last[key]}")
        last[key] = max(last.get(key, 0), token)
        if owner.setdefault((key, token), holder) != holder:
            problems.append(f"{key}: token {token} held by {owner[(key, token)]} and {holder}")
    return problems

"""What accepting a digest would repair, for the page's and the API's confirmation.

Both ask a person to confirm before an accepted digest changes fleet policy, and both
show the same preview: the devices it would repair. The API's confirmation token is
bound to that preview (its digest), so a preview that changed since — another device
arrived, another ask was settled — needs a new confirmation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from blackboard import Model
from pybb.inbox._service import visible_states
from pybb.inbox._views import digest_preview, not_asked_rows

__all__ = ["preview_id", "repairs"]


def repairs(model: Model, human: str, ask_ids: Sequence[str]) -> list[str] | None:
    """The devices accepting the digests of ``ask_ids`` would repair, in order, once each.

    ``None`` when one of the asks is not there for ``human``.
    """
    states = visible_states(model, human)
    unasked = not_asked_rows(model)
    by_id = {s.ask.ask_id: s for s in states}
    repaired: list[str] = []
    for ask_id in ask_ids:
        state = by_id.get(ask_id)
        if state is None:
            return None
        for device in digest_preview(states, state.ask, unasked):
            if device not in repaired:
                repaired.append(device)
    return repaired


def preview_id(devices: Sequence[str]) -> str:
    """A digest of a preview: what a confirmation of it is bound to."""
    return hashlib.sha256(json.dumps(list(devices)).encode()).hexdigest()

"""The budget as the wiring uses it: one admission per escalation, and a cap on open asks.

:class:`OncePerItemStore` wraps any ``buddhi.Store``. Before it charges an item it looks
the item up among the admissions already made: a redelivered escalation gets its first
admission back instead of a second charge. With a ``buddhi.board.BoardStore`` the
lookup reads the store's own audit trail, which the store writes in the same
transaction as the charge, so "was this item charged?" has an exact answer after any
crash. It also refuses an admission while the board holds ``max_open_asks`` open asks
(:class:`AskCapReached`, a refusal, so buddhi records it as ``DENIED``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from buddhi import (
    Admission,
    AdmissionRefused,
    AdmissionRequest,
    ExclusionCause,
    Exclusions,
    Scope,
    ScopeCounter,
    ScopePath,
    Store,
)

__all__ = ["OPEN_ASKS_SCOPE", "AskCapReached", "OncePerItemStore"]

OPEN_ASKS_SCOPE: ScopePath = ("open-asks",)
"""The scope named in the refusal of an escalation past the open-asks cap."""

AdmissionLedger = Callable[[str], Admission | None]
"""Looks up the admission already made for an item id."""


class AskCapReached(AdmissionRefused):
    """The run already holds as many open asks as it may: the escalation is denied.

    Named for the decision, as buddhi names its refusals (``BudgetExhausted``).

    Attributes:
        item_id: The item whose escalation was refused.
        open_asks: The asks open on the board when it was refused.
        cap: The most asks the run may hold open at once.
    """

    def __init__(self, *, item_id: str, open_asks: int, cap: int) -> None:
        super().__init__(
            f"escalation of item {item_id!r} refused: {open_asks} asks are open and the run "
            f"holds at most {cap} at once; it can interrupt again when one is answered or closed",
            item_id=item_id,
        )
        self.open_asks = open_asks
        self.cap = cap


class OncePerItemStore(Store):
    """A ``buddhi.Store`` that charges each item at most once and caps the open asks.

    Args:
        inner: The store that keeps the counters (it is closed with this one only if
            ``owns_inner``).
        ledger: The admission already made for an item id, if any (e.g. read from a
            BoardStore's audit trail); admissions made through this object are also
            remembered in memory.
        open_asks: How many asks are open now (called only when ``cap`` is set).
        cap: The most open asks; ``None`` for no cap.
        owns_inner: Close ``inner`` on :meth:`close`.
    """

    def __init__(
        self,
        inner: Store,
        *,
        ledger: AdmissionLedger | None = None,
        open_asks: Callable[[], int] | None = None,
        cap: int | None = None,
        owns_inner: bool = False,
    ) -> None:
        self.inner = inner
        self._ledger = ledger
        self._open_asks = open_asks
        self._cap = cap
        self._owns = owns_inner
        self._seen: dict[str, Admission] = {}
        self._lock = threading.Lock()

    def admit(self, request: AdmissionRequest) -> Admission:
        """Return the item's earlier admission, or check the cap and charge the inner store.

        Raises:
            AskCapReached: The run holds ``cap`` open asks (nothing was charged).
            BudgetExhausted, SourceExcluded, UnknownScopeError: As the inner store.
        """
        with self._lock:  # one supervisor's lookups, cap check and charge, in order
            earlier = self._earlier(request.item_id)
            if earlier is not None:
                return earlier
            self._check_cap(request.item_id)
            admission = self.inner.admit(request)
            self._seen[request.item_id] = admission
            return admission

    def _earlier(self, item_id: str) -> Admission | None:
        earlier = self._seen.get(item_id)
        if earlier is None and self._ledger is not None:
            earlier = self._ledger(item_id)
        return earlier

    def _check_cap(self, item_id: str) -> None:
        if self._cap is None or self._open_asks is None:
            return
        count = self._open_asks()
        if count >= self._cap:
            raise AskCapReached(item_id=item_id, open_asks=count, cap=self._cap)

    def open_scope(self, scope: Scope) -> None:
        """Open a scope in the inner store."""
        self.inner.open_scope(scope)

    def counter(self, path: ScopePath) -> ScopeCounter:
        """The inner store's counters of a scope."""
        return self.inner.counter(path)

    def scopes(self) -> tuple[Scope, ...]:
        """The inner store's scopes."""
        return self.inner.scopes()

    def exclude(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Exclude a source in the inner store."""
        return self.inner.exclude(source, cause)

    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Retract a transient cause in the inner store."""
        return self.inner.retract(source, cause)

    def exclusions(self, source: str) -> Exclusions:
        """A source's exclusions in the inner store."""
        return self.inner.exclusions(source)

    def close(self) -> None:
        """Close the inner store if this one owns it."""
        if self._owns:
            self.inner.close()


def admission_from_audit(record: Mapping[str, Any]) -> Admission:
    """The :class:`~buddhi.Admission` a BoardStore's ``admitted`` audit record describes."""
    request, bar = record["request"], record.get("bar") or {}
    scope = request["scope"]
    counter = record.get("counters", {}).get(scope, {})
    return Admission(
        item_id=request["item_id"],
        scope=tuple(scope.split("/")),
        load=float(bar.get("load") or 0.0),
        required=float(bar.get("required") or 0.0),
        confidence=float(request.get("confidence", 0.0)),
        spent=int(counter.get("spent", 0)),
        ceiling=int(counter.get("ceiling", 0)),
    )

"""The reference Store: counters and exclusions in memory, every change under one lock."""

from __future__ import annotations

import threading

from buddhi._budget import Scope, ScopePath
from buddhi._store import (
    Admission,
    AdmissionRequest,
    Clock,
    ExclusionCause,
    Exclusions,
    ScopeCounter,
    Store,
    SystemClock,
    assess_admission,
)
from buddhi.errors import (
    AdmissionRefused,
    ScopeConflictError,
    SeamError,
    StoreError,
    UnknownScopeError,
)

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A thread-safe in-memory store: admission is atomic under one lock.

    ``admit`` reads the clock, the counters along the path and the source's
    exclusions, applies :func:`~buddhi.assess_admission`, and charges the path, all
    while holding the lock, so sixteen threads admitting at once never overshoot.

    Args:
        clock: Where windows read the time; by default the wall clock.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = SystemClock() if clock is None else clock
        self._lock = threading.Lock()
        self._counters: dict[ScopePath, ScopeCounter] = {}
        self._exclusions: dict[str, Exclusions] = {}
        self._closed = False

    def open_scope(self, scope: Scope) -> None:
        """Open a scope with zeroed counters; opening it again unchanged does nothing."""
        if not isinstance(scope, Scope):
            raise SeamError(f"open_scope takes a buddhi.Scope, got {scope!r}")
        with self._lock:
            self._require_open()
            existing = self._counters.get(scope.path)
            if existing is not None:
                _same_definition(existing.scope, scope)
                return
            if scope.parent is not None and scope.parent not in self._counters:
                raise _unknown(scope.parent, f"cannot open {'/'.join(scope.path)!r}: its parent")
            self._counters[scope.path] = ScopeCounter(scope)

    def admit(self, request: AdmissionRequest) -> Admission:
        """Atomically admit one interrupt, charging the scope and its ancestors."""
        if not isinstance(request, AdmissionRequest):
            raise SeamError(f"admit takes a buddhi.AdmissionRequest, got {request!r}")
        with self._lock:
            self._require_open()
            now = self._clock.now()
            scope = request.scope
            if len(scope) == 1:  # the single global pool: no slicing, no loop
                chain = [self._read(scope).at(now)]
            else:
                chain = [self._read(scope[:depth]).at(now) for depth in _depths(scope)]
            # A source never excluded is clear: assess_admission reads only ``excluded``
            # of a clear source, so the shared empty value stands in for a new one.
            exclusions = self._exclusions.get(request.source) or _CLEAR
            verdict = assess_admission(request, chain, exclusions)
            if isinstance(verdict, AdmissionRefused):
                raise verdict
            last = len(chain) - 1
            if last == 0:
                self._counters[scope] = chain[0].charged(own=True)
                return verdict
            for depth, counter in enumerate(chain):
                self._counters[counter.scope.path] = counter.charged(own=depth == last)
            return verdict

    def counter(self, path: ScopePath) -> ScopeCounter:
        """Return a scope's counters as of now."""
        with self._lock:
            self._require_open()
            return self._read(path).at(self._clock.now())

    def scopes(self) -> tuple[Scope, ...]:
        """Return every open scope, each after its parent."""
        with self._lock:
            self._require_open()
            return tuple(counter.scope for counter in self._counters.values())

    def exclude(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically add ``cause`` to ``source``'s exclusions."""
        _check_cause(source, cause)
        with self._lock:
            self._require_open()
            updated = self._exclusions_of(source).adding(cause)
            self._exclusions[source] = updated
            return updated

    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically retract a transient ``cause`` from ``source``."""
        _check_cause(source, cause)
        with self._lock:
            self._require_open()
            updated = self._exclusions_of(source).retracting(cause)
            self._exclusions[source] = updated
            return updated

    def exclusions(self, source: str) -> Exclusions:
        """Return ``source``'s exclusions."""
        with self._lock:
            self._require_open()
            return self._exclusions_of(source)

    def close(self) -> None:
        """Close the store; later calls raise :class:`~buddhi.errors.StoreError`."""
        self._closed = True

    def _read(self, path: ScopePath) -> ScopeCounter:
        counter = self._counters.get(path)
        if counter is None:
            raise _unknown(path, "scope")
        return counter

    def _exclusions_of(self, source: str) -> Exclusions:
        return self._exclusions.get(source) or Exclusions(source)

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError("the memory store is closed; build a new one")


_CLEAR = Exclusions("")
"""What :meth:`MemoryStore.admit` passes for a source it holds no exclusions of."""


def _depths(path: ScopePath) -> range:
    return range(1, len(path) + 1)


def _unknown(path: ScopePath, what: str) -> UnknownScopeError:
    return UnknownScopeError(
        f"{what} {'/'.join(path)!r} was never opened; open it with store.open_scope "
        "(or BudgetTree.install) first",
        path=path,
    )


def _same_definition(existing: Scope, scope: Scope) -> None:
    if existing != scope:
        raise ScopeConflictError(
            f"scope {'/'.join(scope.path)!r} is open as {existing}; it cannot be reopened as "
            f"{scope}"
        )


def _check_cause(source: object, cause: object) -> None:
    if not isinstance(source, str) or not source:
        raise SeamError(f"an excluded source is a non-empty str, got {source!r}")
    if not isinstance(cause, ExclusionCause):
        raise SeamError(f"an exclusion cause is a buddhi.ExclusionCause, got {cause!r}")

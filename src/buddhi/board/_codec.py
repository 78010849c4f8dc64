"""The JSON shapes BoardStore keeps on the board, and their translation to buddhi values.

Everything here is pure: a premise value in, buddhi values out (and back). A malformed
value on the board raises :class:`~buddhi.errors.StoreError` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from buddhi._budget import Scope, ScopePath
from buddhi._store import ExclusionCause, Exclusions, ScopeCounter
from buddhi.errors import BudgetError, StoreError, UnknownScopeError

__all__ = [
    "ADMISSIONS_LEVEL",
    "AUDIT_KEY",
    "BUDGET_PREMISE",
    "EXCLUSIONS_PREMISE",
    "Budget",
    "chain_of",
    "counters_of",
    "decode_exclusions",
    "encode_counter",
    "encode_exclusions",
    "scope_key",
    "usage",
]

BUDGET_PREMISE = "budget"
"""The premise holding every scope's definition and counters."""

EXCLUSIONS_PREMISE = "exclusions"
"""The premise holding every excluded source's causes, by tier."""

ADMISSIONS_LEVEL = "admissions"
"""The level holding the audit trail: one record per decision and per change."""

AUDIT_KEY = "step"
"""The key the admissions level is unique on; see :mod:`buddhi.board`."""

Budget = Mapping[str, Any]
"""The decoded value of the budget premise: ``{scope key: entry}``."""


def scope_key(path: ScopePath) -> str:
    """Return a scope's key in the budget premise: its names joined by ``/``."""
    return "/".join(path)


def encode_counter(counter: ScopeCounter) -> dict[str, Any]:
    """Return a counter's entry in the budget premise."""
    scope = counter.scope
    return {
        "path": list(scope.path),
        "parent": None if scope.parent is None else scope_key(scope.parent),
        "spent": counter.spent,
        "ceiling": scope.ceiling,
        "total": counter.total,
        "own": counter.own,
        "weight": scope.weight,
        "window_us": None if scope.window is None else scope.window // _MICROSECOND,
        "window_start": None if counter.window_start is None else counter.window_start.isoformat(),
    }


def decode_counter(key: str, entry: object) -> ScopeCounter:
    """Return the counter an entry of the budget premise holds.

    Raises:
        StoreError: The entry is not one :func:`encode_counter` wrote.
    """
    try:
        if not isinstance(entry, dict):
            raise TypeError("an entry is a JSON object")
        window_us, started = entry["window_us"], entry["window_start"]
        scope = Scope(
            tuple(entry["path"]),
            entry["ceiling"],
            float(entry["weight"]),
            None if window_us is None else timedelta(microseconds=window_us),
        )
        start = None if started is None else datetime.fromisoformat(started)
        counter = ScopeCounter(scope, entry["spent"], entry["total"], entry["own"], start)
        _require(scope_key(scope.path) == key)
        _require(all(_count(n) for n in (counter.spent, counter.total, counter.own)))
        _require(counter.spent <= counter.total and counter.own <= counter.total)
    except (KeyError, TypeError, ValueError, BudgetError) as exc:
        raise StoreError(
            f"the {BUDGET_PREMISE!r} premise holds a malformed entry for scope {key!r}: "
            f"{entry!r}; only BoardStore should write that premise"
        ) from exc
    return counter


def chain_of(budget: Budget, path: ScopePath) -> list[ScopeCounter]:
    """Return the counters from the root down to ``path``, as stored.

    Raises:
        UnknownScopeError: A scope on the path was never opened.
    """
    return [_stored(budget, path[:depth]) for depth in range(1, len(path) + 1)]


def counters_of(budget: Budget) -> list[ScopeCounter]:
    """Return every stored counter, each after its parent."""
    counters = [decode_counter(key, entry) for key, entry in budget.items()]
    return sorted(counters, key=_path)


def usage(counters: list[ScopeCounter]) -> dict[str, dict[str, int]]:
    """Return ``{scope key: {"spent", "ceiling"}}`` for the audit trail."""
    return {
        scope_key(c.scope.path): {"spent": c.spent, "ceiling": c.scope.ceiling} for c in counters
    }


def encode_exclusions(exclusions: Exclusions) -> dict[str, list[str]]:
    """Return a source's entry in the exclusions premise."""
    return {"permanent": sorted(exclusions.permanent), "transient": sorted(exclusions.transient)}


def decode_exclusions(value: Mapping[str, Any], source: str) -> Exclusions:
    """Return ``source``'s exclusions from the exclusions premise (clear when absent).

    Raises:
        StoreError: The source's entry is not one :func:`encode_exclusions` wrote.
    """
    entry = value.get(source)
    if entry is None:
        return Exclusions(source)
    try:
        permanent, transient = entry["permanent"], entry["transient"]
        _require(all(isinstance(name, str) for name in (*permanent, *transient)))
        return Exclusions(source, frozenset(permanent), frozenset(transient))
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(
            f"the {EXCLUSIONS_PREMISE!r} premise holds a malformed entry for source "
            f"{source!r}: {entry!r}; only BoardStore should write that premise"
        ) from exc


def describe_cause(cause: ExclusionCause) -> dict[str, str]:
    """Return a cause as the audit trail records it."""
    return {"name": cause.name, "tier": cause.tier.value}


_MICROSECOND = timedelta(microseconds=1)


def _stored(budget: Budget, path: ScopePath) -> ScopeCounter:
    key = scope_key(path)
    entry = budget.get(key)
    if entry is None:
        raise UnknownScopeError(
            f"scope {key!r} was never opened on this board; open it with store.open_scope "
            "(or BudgetTree.install) first",
            path=path,
        )
    counter = decode_counter(key, entry)
    if counter.scope.path != path:
        raise UnknownScopeError(
            f"scope {path!r} was never opened on this board (its key {key!r} belongs to "
            f"{counter.scope.path!r}); scope names holding '/' can collide, rename one",
            path=path,
        )
    return counter


def _require(condition: bool) -> None:
    if not condition:
        raise ValueError("malformed")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _path(counter: ScopeCounter) -> ScopePath:
    return counter.scope.path

"""Budget scopes: a tree of weighted scopes, its graduated bar, and time windows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from buddhi._errors import BudgetError, ScopeTreeError

__all__ = [
    "GLOBAL_SCOPE",
    "Bar",
    "BudgetTree",
    "GraduatedBar",
    "Scope",
    "ScopeOpener",
    "ScopePath",
    "ScopeSpec",
    "window_start",
]

ScopePath = tuple[str, ...]
"""A scope's names from the root down, the root's name first: ``("global", "team-a")``."""

GLOBAL_SCOPE: ScopePath = ("global",)
"""The path of the default single global pool."""


class Bar(Protocol):
    """The graduated admission bar: required escalation confidence at a load.

    ``load`` is the spent fraction of the most loaded scope on the path, in [0, 1].
    A bar must be monotone non-decreasing and exceed 1 at load 1, so that no ask
    can be admitted by a full scope.
    """

    def __call__(self, load: float) -> float:
        """Return the escalation confidence an ask needs at this load."""
        ...


@dataclass(frozen=True, slots=True)
class GraduatedBar:
    """The linear bar ``floor + rise * load``: monotone, and above 1 at the ceiling.

    Attributes:
        floor: The confidence required while the scope is empty, in [0, 1].
        rise: How much the requirement grows from empty to full; ``floor + rise`` must
            exceed 1 so that a full scope admits nothing.
    """

    floor: float = 0.5
    rise: float = 0.6

    def __post_init__(self) -> None:
        if not _finite(self.floor) or not 0.0 <= self.floor <= 1.0:
            raise BudgetError(f"the bar's floor must be a number in [0, 1], got {self.floor!r}")
        if not _finite(self.rise) or self.floor + self.rise <= 1.0:
            raise BudgetError(
                f"the bar must exceed 1 at the ceiling, but floor {self.floor!r} + rise "
                f"{self.rise!r} <= 1; raise the rise"
            )

    def __call__(self, load: float) -> float:
        """Return the escalation confidence an ask needs at this load."""
        return self.floor + self.rise * load


@dataclass(frozen=True, slots=True)
class Scope:
    """One budget scope: a ceiling of interrupts, optionally per time window.

    Attributes:
        path: The scope's names from the root down.
        ceiling: The most interrupts its whole subtree may spend per window.
        weight: The share of the parent's ceiling it was derived from (1 for a root).
        window: The length of its budget window, or ``None`` for one lifetime budget.
    """

    path: ScopePath
    ceiling: int
    weight: float = 1.0
    window: timedelta | None = None

    def __post_init__(self) -> None:
        _require_path(self.path)
        _require_ceiling("/".join(self.path), self.ceiling)
        _require_weight("/".join(self.path), self.weight)
        _require_window("/".join(self.path), self.window)

    @property
    def name(self) -> str:
        """The scope's own name, the last element of its path."""
        return self.path[-1]

    @property
    def parent(self) -> ScopePath | None:
        """The parent's path, or ``None`` for a root."""
        return self.path[:-1] or None

    def child(self, name: str, weight: float) -> Scope:
        """Derive a child scope: ceiling ``floor(weight * ceiling)``, the same window.

        Args:
            name: The child's name.
            weight: Its share of this scope's ceiling, in [0, 1].

        Returns:
            The child scope.
        """
        _require_weight(f"{'/'.join(self.path)}/{name}", weight)
        ceiling = math.floor(weight * self.ceiling)
        return Scope((*self.path, name), ceiling, weight, self.window)


@dataclass(frozen=True, slots=True)
class ScopeSpec:
    """One scope of a declared tree, naming its parent.

    Attributes:
        name: The scope's name, unique in the tree.
        parent: The parent's name; ``None`` for the one root.
        ceiling: The root's ceiling; children derive theirs from their weight.
        weight: A child's share of its parent's ceiling, in [0, 1].
        window: The scope's window; ``None`` inherits the parent's.
    """

    name: str
    parent: str | None = None
    ceiling: int | None = None
    weight: float = 1.0
    window: timedelta | None = None


@dataclass(frozen=True, slots=True)
class BudgetTree:
    """A validated tree of budget scopes, parents before children.

    Build one with :meth:`single_pool` (the default) or :meth:`from_specs`, then
    :meth:`install` it in a store.

    Attributes:
        scopes: Every scope, each after its parent.
    """

    scopes: tuple[Scope, ...]

    @classmethod
    def single_pool(
        cls, ceiling: int, window: timedelta | None = None, name: str = GLOBAL_SCOPE[0]
    ) -> BudgetTree:
        """The degenerate tree: one global pool.

        Args:
            ceiling: The pool's ceiling of interrupts (per window).
            window: The window length, or ``None`` for one lifetime budget.
            name: The pool's name.

        Returns:
            The one-scope tree.
        """
        return cls((Scope((name,), ceiling, 1.0, window),))

    @classmethod
    def from_specs(cls, specs: Iterable[ScopeSpec]) -> BudgetTree:
        """Validate a declared tree and derive every child's ceiling from its weight.

        Args:
            specs: The scopes, in any order, each naming its parent.

        Returns:
            The tree.

        Raises:
            ScopeTreeError: A duplicate name, not exactly one root, an orphan, a cycle,
                or a ceiling given to a child.
            BudgetError: A negative or non-finite ceiling, or a bad weight or window.
        """
        by_name = _index_specs(tuple(specs))
        root = _the_root(by_name)
        _reject_orphans(by_name)
        order = _parents_first(by_name, root)
        return cls(_resolve(order, by_name))

    @property
    def root(self) -> Scope:
        """The root scope."""
        return self.scopes[0]

    def scope(self, name: str) -> Scope:
        """Return the scope with this name.

        Raises:
            ScopeTreeError: No scope of the tree has that name.
        """
        for scope in self.scopes:
            if scope.name == name:
                return scope
        raise ScopeTreeError(f"the tree has no scope named {name!r}")

    def install(self, store: ScopeOpener) -> None:
        """Open every scope of the tree in a store (a :class:`~buddhi.Store`), parents first."""
        for scope in self.scopes:
            store.open_scope(scope)


class ScopeOpener(Protocol):
    """What ``BudgetTree.install`` needs of a store: every ``buddhi.Store`` is one.

    A protocol rather than the ``Store`` class, so that the budget types do not import
    the Store seam, which is built on them.
    """

    def open_scope(self, scope: Scope) -> None:
        """Open ``scope`` (idempotent for the same definition)."""
        ...


def window_start(now: datetime, window: timedelta) -> datetime:
    """Return the start of the window holding ``now``; windows are aligned to the epoch."""
    epoch = datetime(1970, 1, 1, tzinfo=now.tzinfo)
    return epoch + ((now - epoch) // window) * window


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _require_path(path: object) -> None:
    if not isinstance(path, tuple) or not path:
        raise BudgetError(f"a scope path must be a non-empty tuple of names, got {path!r}")
    for name in path:
        if not isinstance(name, str) or not name:
            raise BudgetError(f"scope path {path!r} holds {name!r}; names are non-empty str")


def _require_ceiling(where: str, ceiling: object) -> None:
    if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 0:
        raise BudgetError(
            f"scope {where!r}: the ceiling must be a finite, non-negative whole number of "
            f"interrupts, got {ceiling!r}"
        )


def _require_weight(where: str, weight: object) -> None:
    if not _finite(weight) or not 0.0 <= weight <= 1.0:  # type: ignore[operator]
        raise BudgetError(f"scope {where!r}: the weight must be a number in [0, 1], got {weight!r}")


def _require_window(where: str, window: object) -> None:
    if window is None:
        return
    if not isinstance(window, timedelta) or window <= timedelta(0):
        raise BudgetError(
            f"scope {where!r}: the window must be a positive timedelta, got {window!r}"
        )


def _index_specs(specs: Sequence[ScopeSpec]) -> dict[str, ScopeSpec]:
    by_name: dict[str, ScopeSpec] = {}
    for spec in specs:
        if not isinstance(spec, ScopeSpec):
            raise ScopeTreeError(f"a scope tree is built from ScopeSpec values, got {spec!r}")
        if spec.name in by_name:
            raise ScopeTreeError(f"two scopes are named {spec.name!r}; scope names are unique")
        by_name[spec.name] = spec
    return by_name


def _the_root(by_name: Mapping[str, ScopeSpec]) -> ScopeSpec:
    roots = [spec for spec in by_name.values() if spec.parent is None]
    if len(roots) != 1:
        names = sorted(spec.name for spec in roots)
        raise ScopeTreeError(f"a scope tree needs exactly one root (no parent), found {names}")
    if roots[0].ceiling is None:
        raise ScopeTreeError(f"the root scope {roots[0].name!r} needs a ceiling")
    return roots[0]


def _reject_orphans(by_name: Mapping[str, ScopeSpec]) -> None:
    for spec in by_name.values():
        if spec.parent is not None and spec.parent not in by_name:
            raise ScopeTreeError(
                f"scope {spec.name!r} names parent {spec.parent!r}, which is not declared; "
                "declare the parent or fix the name"
            )
        if spec.parent is not None and spec.ceiling is not None:
            raise ScopeTreeError(
                f"scope {spec.name!r} is a child; its ceiling derives from its weight, "
                "so give it a weight instead of a ceiling"
            )


def _parents_first(by_name: Mapping[str, ScopeSpec], root: ScopeSpec) -> list[ScopeSpec]:
    children: dict[str, list[ScopeSpec]] = {}
    for spec in by_name.values():
        if spec.parent is not None:
            children.setdefault(spec.parent, []).append(spec)
    order, frontier = [root], [root]
    while frontier:
        kids = children.get(frontier.pop().name, [])
        order.extend(kids)
        frontier.extend(kids)
    if len(order) != len(by_name):
        raise ScopeTreeError(_cycle_message(by_name, {spec.name for spec in order}))
    return order


def _cycle_message(by_name: Mapping[str, ScopeSpec], reached: set[str]) -> str:
    start = min(set(by_name) - reached)
    chain, name = [start], by_name[start].parent
    while name is not None and name not in chain:
        chain.append(name)
        name = by_name[name].parent
    loop = " -> ".join([*chain, name or ""])
    return f"scopes form a cycle that never reaches the root: {loop}; break it"


def _resolve(order: Sequence[ScopeSpec], by_name: Mapping[str, ScopeSpec]) -> tuple[Scope, ...]:
    resolved: dict[str, Scope] = {}
    for spec in order:
        if spec.parent is None:
            assert spec.ceiling is not None  # checked by _the_root
            scope = Scope((spec.name,), spec.ceiling, 1.0, spec.window)
        else:
            scope = resolved[spec.parent].child(spec.name, spec.weight)
            if spec.window is not None:
                scope = Scope(scope.path, scope.ceiling, scope.weight, spec.window)
        resolved[spec.name] = scope
    return tuple(resolved[spec.name] for spec in order)

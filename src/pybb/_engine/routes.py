"""Routes: the two chains an entry can be dispatched onto, and the checks that keep them sound.

A route is declared per key (``route``) or per predicate (``route_predicate``). A source
scoped to a component the entry does not have can never apply; such a route is refused
where it is declared, where the entry is written, or before a run writes anything, so one
bad route never fails a cycle half-way. A route that comes too late (its key already
dispatched onto another chain) or names a key with no entry is reported, not ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from pybb._engine.projection import EntryState, View
from pybb._engine.source import KnowledgeSource
from pybb._engine.types import Chain, Stage
from pybb.errors import RouteError, UnknownSourceError

__all__ = ["NO_ROUTE", "DispatchedView", "Route", "RouteTable"]

_log = logging.getLogger("pybb")

_UNDISPATCHED = frozenset({Stage.NEW, Stage.EVALUATED})


@dataclass(frozen=True, slots=True)
class Route:
    """The two chains an entry can be dispatched onto, chosen by its first verdict.

    Attributes:
        on_pass: Sources that confirm a passing first verdict (empty: the pass is final).
        on_fail: The repair ladder for a failing first verdict (empty: escalate at once).
    """

    on_pass: tuple[KnowledgeSource, ...] = ()
    on_fail: tuple[KnowledgeSource, ...] = ()


NO_ROUTE = Route()


class RouteTable:
    """Every route of a controller, by key and by predicate, checked against the board.

    Args:
        view: The board's projection, to check routes against the entries on it.
        add: Called with each source a route names (the controller adds it).
    """

    def __init__(self, view: Callable[[], View], add: Callable[[KnowledgeSource], None]) -> None:
        self.by_key: dict[str, Route] = {}
        self.by_predicate: dict[str, Route] = {}
        self.default: Route | None = None
        self.late: dict[str, None] = {}
        self._view = view
        self._add = add

    def of(self, key: str, predicate: str | None) -> Route | None:
        """The entry's route: its own, else its predicate's, else the default, else none."""
        return self.by_key.get(key) or self.by_predicate.get(predicate or "") or self.default

    def route(self, key: str, built: Route) -> None:
        """Declare ``key``'s route, refused if it cannot apply to the entry on the board."""
        entry = self._view().entries.get(key)
        if entry is not None:
            check_scopes(key, entry.conditions, built)
            self._note_late(entry, built)
        self.by_key[key] = built

    def route_predicate(self, predicate: str, built: Route) -> None:
        """Declare the route of ``predicate``'s entries, refused if one cannot take it."""
        for entry in self._view().entries.values():
            undispatched = entry.chain_name is None and entry.stage in _UNDISPATCHED
            if undispatched and entry.predicate == predicate and entry.key not in self.by_key:
                check_scopes(entry.key, entry.conditions, built)
        self.by_predicate[predicate] = built

    def route_all(self, built: Route) -> None:
        """Declare the route of every entry with none of its own or of its predicate."""
        for entry in self._view().entries.values():
            undispatched = entry.chain_name is None and entry.stage in _UNDISPATCHED
            routed = entry.key in self.by_key or (entry.predicate or "") in self.by_predicate
            if undispatched and not routed:
                check_scopes(entry.key, entry.conditions, built)
        self.default = built

    def build(
        self,
        what: str,
        chain: Sequence[KnowledgeSource] | None,
        on_pass: Sequence[KnowledgeSource] | None,
        on_fail: Sequence[KnowledgeSource] | None,
    ) -> Route:
        """The route the arguments of ``route``/``route_predicate`` describe, its sources added.

        Raises:
            RouteError: Both ``chain`` and ``on_fail``, a chain that is not a list of
                sources, or a source twice in one chain.
        """
        if chain is not None and on_fail is not None:
            raise RouteError(
                f"route for {what}: give chain or on_fail, not both (chain means on_fail)"
            )
        built = Route(
            _chain(what, "on_pass", on_pass),
            _chain(what, "on_fail", on_fail if chain is None else chain),
        )
        for source in (*built.on_pass, *built.on_fail):
            self._add(source)
        return built

    def check_new_entry(self, key: str, predicate: str | None, conditions: object) -> None:
        """Refuse an entry about to be written whose route has a source that cannot apply.

        Raises:
            RouteError: A source of the entry's route is scoped to a component the
                entry does not have.
        """
        route = self.of(key, predicate)
        if route is not None:
            # ``conditions is None`` first: most entries have none, and ``isinstance`` of an
            # ABC such as Mapping costs a dozen times a plain test.
            scoped = (
                conditions if conditions is not None and isinstance(conditions, Mapping) else None
            )
            check_scopes(key, scoped, route)

    def check_board(self) -> None:
        """Refuse, before anything is written, a scoped source that cannot apply to its entry."""
        view = self._view()
        # A route that fits an entry without components fits every such entry (only the
        # key, in the message, would differ): checked once per route, not once per entry.
        fits_plain: set[int] = set()
        for key in view.unsettled:
            entry = view.entries[key]
            if entry.chain_name is None and entry.stage in _UNDISPATCHED:
                route = self.of(key, entry.predicate)
                if route is None:
                    continue
                if entry.conditions is not None:
                    check_scopes(key, entry.conditions, route)
                elif id(route) not in fits_plain:
                    check_scopes(key, None, route)
                    fits_plain.add(id(route))

    def without_entry(self, board_id: str) -> tuple[str, ...]:
        """The keys routed by ``route()`` that have no entry on the board (logged)."""
        entries = self._view().entries
        missing = tuple(key for key in self.by_key if key not in entries)
        if missing:
            _log.warning(
                "%d routed key(s) have no entry on board %r, so their routes are not used: %s",
                len(missing),
                board_id,
                ", ".join(repr(key) for key in missing[:10]),
            )
        return missing

    def _note_late(self, entry: EntryState, route: Route) -> None:
        if entry.chain_name is None:
            return
        chain = route.on_pass if entry.chain_name is Chain.ON_PASS else route.on_fail
        if tuple(source.name for source in chain) == entry.chain:
            return  # the same route again (a resumed script): nothing is lost
        self.late[entry.key] = None
        _log.warning(
            "route for entry %r comes after it was dispatched onto %s %s; dispatch is once "
            "per key, so this route is not used",
            entry.key,
            entry.chain_name.value,
            list(entry.chain),
        )


def check_scopes(key: str, conditions: Mapping[str, str] | None, route: Route) -> None:
    """Refuse a route with a source scoped to a component the entry does not have.

    Raises:
        RouteError: Naming the source, the component, the entry and its components.
    """
    for source in (*route.on_pass, *route.on_fail):
        component = source.component
        if component is None or (conditions is not None and component in conditions):
            continue
        has = (
            "a single measurement, no components"
            if conditions is None
            else f"components {sorted(conditions)}"
        )
        raise RouteError(
            f"route for entry {key!r}: knowledge source {source.name!r} is scoped to "
            f"component {component!r}, which the entry does not have (it has {has}); "
            "scope the source to one of its components or route the entry to another "
            "source. Nothing was written"
        )


def _chain(
    what: str, name: str, chain: Sequence[KnowledgeSource] | None
) -> tuple[KnowledgeSource, ...]:
    if chain is None:
        return ()
    if isinstance(chain, KnowledgeSource | str) or not isinstance(chain, Sequence):
        raise RouteError(f"route for {what}: {name} must be a list of sources, got {chain!r}")
    seen: set[str] = set()
    for source in chain:
        if not isinstance(source, KnowledgeSource):
            raise RouteError(f"route for {what}: {name} holds {source!r}, not a KnowledgeSource")
        if source.name in seen:
            raise RouteError(
                f"route for {what}: {name} names source {source.name!r} twice; a source "
                "keeps its attempts across the chain, so list it once"
            )
        seen.add(source.name)
    return tuple(chain)


class DispatchedView(Mapping[str, tuple[KnowledgeSource, ...]]):
    """Entry key to its dispatched chain's sources (the seed's ``Controller.dispatched``)."""

    def __init__(self, view: View, sources: Mapping[str, KnowledgeSource]) -> None:
        self._view = view
        self._sources = sources

    def _entry(self, key: str) -> EntryState | None:
        entry = self._view.entries.get(key)
        return entry if entry is not None and entry.chain_name is not None else None

    def __getitem__(self, key: str) -> tuple[KnowledgeSource, ...]:
        entry = self._entry(key)
        if entry is None:
            raise KeyError(key)
        missing = [name for name in entry.chain if name not in self._sources]
        if missing:
            raise UnknownSourceError(key, missing[0])
        return tuple(self._sources[name] for name in entry.chain)

    def __iter__(self) -> Iterator[str]:
        entries = self._view.entries
        return iter([key for key, entry in entries.items() if entry.chain_name is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

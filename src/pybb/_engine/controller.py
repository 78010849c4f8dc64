"""The controller: evaluates entries, dispatches them onto chains, runs the sources, hands off.

One cycle, in order: take in other processes' writes; escalate entries written straight
to the escalate segment; evaluate the entries that changed (``_evaluate_all``); dispatch
newly evaluated entries onto a chain (``_dispatch``); advance entries whose component
source fixed its component (``_advance_ready``); let each knowledge source work on the
entries of its partition that need it, re-evaluating after every attempt and handing an
entry on when its source is exhausted (``_advance``). Everything a cycle decides is one
batch on the journal: one durable transaction (``docs/adr/0012``), or one per
``commit_every`` records for a big cycle, which resumes exactly if cut short
(``docs/adr/0020``). Each step touches only the entries queued for it, so a cycle costs
what its work costs.

``run()`` loops over cycles; a worker drives the same steps one at a time on the entries
it holds (:meth:`Controller.start`, :meth:`Controller.cycle`, :meth:`Controller.next_retry`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from blackboard import IdempotencyKeyError
from pybb._engine.attempt import outside_attempt
from pybb._engine.blackboard import Blackboard
from pybb._engine.entries import check_key, reopen_content
from pybb._engine.observers import Observers
from pybb._engine.projection import ENTRIES, EntryState
from pybb._engine.routes import DispatchedView, Route, RouteTable
from pybb._engine.runner import AttemptRunner
from pybb._engine.seams import Clock, ControllerObserver, SystemClock
from pybb._engine.source import KnowledgeSource
from pybb._engine.steps import COMMIT_EVERY, CycleSteps
from pybb._engine.types import (
    HaltReason,
    Resolution,
    RunSummary,
    Segment,
)
from pybb._engine.verdicts import Predicate, Predicates
from pybb.errors import (
    DuplicateSourceError,
    EntryNotFoundError,
    RouteError,
    SourceError,
    UnknownSourceError,
)

__all__ = ["Controller", "Predicate", "Route"]


def _opened_under(entry: EntryState, once: str) -> int | None:
    """The generation of ``entry`` opened under the idempotency key ``once``, if any."""
    for ended in entry.generations:
        opening = ended["next"]
        if opening.get("once") == once:
            return int(opening["generation"])
    return None


class Controller(CycleSteps):
    """Runs knowledge sources over a blackboard's entries until they settle.

    Args:
        blackboard: The board to work on.
        knowledge_sources: Sources to add at once (``route`` adds the ones it names).
        max_cycles: The most cycles one ``run()`` call may perform (``cycle_count``
            keeps counting for the board's life; reaching the bound logs a warning).
        observers: Told of escalations, resolutions, cycles and halts.
        clock: Where retry back-off gets its time (default: the system clock).
        commit_every: A cycle that decides more records than this commits them in
            transactions of about this many, each ending after a whole entry's step
            (docs/adr/0020): a cycle's memory stays bounded whatever the board's size,
            and a cycle cut short resumes where it stopped. Smaller cycles are one
            transaction, as before (docs/adr/0012).

    Attributes:
        blackboard: The board the controller operates on.
        knowledge_sources: Its sources, in the order each cycle runs them.
        predicate_registry: Predicate name to function.
        routes: Entry key to its route.
        predicate_routes: Predicate name to the route of every entry using it that
            has no route of its own.
        max_cycles: The cycle limit of one ``run()``.
        commit_every: The most records a cycle holds before it commits them.
        clock: The controller's clock.
    """

    def __init__(
        self,
        blackboard: Blackboard,
        knowledge_sources: Iterable[KnowledgeSource] = (),
        *,
        max_cycles: int = 1000,
        observers: Iterable[ControllerObserver] = (),
        clock: Clock | None = None,
        commit_every: int = COMMIT_EVERY,
    ) -> None:
        if not isinstance(blackboard, Blackboard):
            raise RouteError(f"a Controller needs a Blackboard, got {blackboard!r}")
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
            raise RouteError(f"max_cycles must be a positive integer, got {max_cycles!r}")
        if isinstance(commit_every, bool) or not isinstance(commit_every, int) or commit_every < 1:
            raise RouteError(
                f"commit_every must be a positive integer (records per transaction), "
                f"got {commit_every!r}"
            )
        self.blackboard = blackboard
        self._journal = blackboard.journal
        self.knowledge_sources: list[KnowledgeSource] = []
        self._predicates = Predicates()
        self.predicate_registry = self._predicates.registry
        self._routes = RouteTable(lambda: self._journal.view, self.add_ks)
        self.routes = self._routes.by_key
        self.predicate_routes = self._routes.by_predicate
        self.max_cycles = max_cycles
        self.commit_every = commit_every
        self.clock: Clock = SystemClock() if clock is None else clock
        self._observers = Observers(observers)
        self._runner = AttemptRunner()
        self._sources: dict[str, KnowledgeSource] = {}
        self._escalated: list[str] = []
        self._resume: tuple[str, dict[str, str]] | None = None
        self._in_parts = False
        self._chains: dict[int, tuple[tuple[KnowledgeSource, ...], list[str], dict[str, str]]] = {}
        self._attempts = 0
        self._cycles = 0  # this controller's own cycles (a worker's count; the board has none)
        self._told_pending = False
        self._journal.entry_checks.append(self._routes.check_new_entry)
        for source in knowledge_sources:
            self.add_ks(source)

    # -- the seed's attributes -----------------------------------------------------------

    @property
    def cycle_count(self) -> int:
        """The cycles this board has run (one cycle: one pass through every source)."""
        return self._journal.view.cycle

    @property
    def dispatched(self) -> Mapping[str, tuple[KnowledgeSource, ...]]:
        """Entry key to the chain its first verdict chose (a live read-only view)."""
        return DispatchedView(self._journal.view, self._sources)

    @property
    def attempts_made(self) -> int:
        """How many attempts this controller has made (in this process)."""
        return self._attempts

    @property
    def observers(self) -> tuple[ControllerObserver, ...]:
        """Who is told of escalations, resolutions, cycles and halts."""
        return tuple(self._observers.all)

    # -- registration --------------------------------------------------------------------

    def register_predicate(self, name: str, predicate: Predicate) -> None:
        """Make ``name`` judge measurements with ``predicate`` (truthy: good standing).

        Raises:
            PredicateError: The name is not a non-empty string or ``predicate`` is not callable.
        """
        self._predicates.register(name, predicate)

    def add_ks(self, source: KnowledgeSource) -> None:
        """Add a knowledge source; adding the same one again does nothing.

        Raises:
            SourceError: ``source`` is not a KnowledgeSource.
            DuplicateSourceError: Another source already has its name.
        """
        if not isinstance(source, KnowledgeSource):
            raise SourceError(f"add_ks() takes a KnowledgeSource, got {source!r}")
        existing = self._sources.get(source.name)
        if existing is source:
            return
        if existing is not None:
            raise DuplicateSourceError(source.name)
        self._sources[source.name] = source
        self.knowledge_sources.append(source)
        source.bind(self.blackboard)
        self._journal.rule.register_source(source.name, source.component)

    def add_observer(self, observer: ControllerObserver) -> None:
        """Tell ``observer`` of escalations, resolutions, cycles and halts from now on."""
        self._observers.add(observer)

    def route(
        self,
        key: str,
        chain: Sequence[KnowledgeSource] | None = None,
        *,
        on_pass: Sequence[KnowledgeSource] | None = None,
        on_fail: Sequence[KnowledgeSource] | None = None,
    ) -> Route:
        """Route the entry ``key``: ``route(key, chain)`` is ``route(key, on_fail=chain)``.

        The chain is chosen once, by the entry's first verdict: failing takes
        ``on_fail``, passing takes ``on_pass`` (a provisional pass that its sources
        confirm; empty, the pass is final). Sources not yet added are added.

        Raises:
            RouteError: Both ``chain`` and ``on_fail``, a chain that is not a list of
                sources, a source twice in one chain, or a source scoped to a component
                the entry on the board does not have.
            DuplicateSourceError: A source shares its name with another one.
        """
        check_key(key)
        built = self._routes.build(key, chain, on_pass, on_fail)
        self._routes.route(key, built)
        return built

    def route_predicate(
        self,
        predicate: str,
        chain: Sequence[KnowledgeSource] | None = None,
        *,
        on_pass: Sequence[KnowledgeSource] | None = None,
        on_fail: Sequence[KnowledgeSource] | None = None,
    ) -> Route:
        """Route every entry whose predicate is ``predicate`` and has no route of its own.

        One call routes any number of entries (as ``route`` does one).
        """
        if not isinstance(predicate, str) or not predicate:
            raise RouteError(f"route_predicate() needs a predicate name, got {predicate!r}")
        built = self._routes.build(f"predicate {predicate!r}", chain, on_pass, on_fail)
        self._routes.route_predicate(predicate, built)
        return built

    def route_all(
        self,
        chain: Sequence[KnowledgeSource] | None = None,
        *,
        on_pass: Sequence[KnowledgeSource] | None = None,
        on_fail: Sequence[KnowledgeSource] | None = None,
    ) -> Route:
        """Route every entry that has no route of its own and none of its predicate.

        For an application whose entries all take one decision tree, written as they
        come (a fleet, chunk by chunk): no route per key to declare ahead of its entry.
        """
        built = self._routes.build("every entry", chain, on_pass, on_fail)
        self._routes.route_all(built)
        return built

    def route_of(self, key: str) -> Route | None:
        """The route entry ``key`` takes: its own, else its predicate's, else ``route_all``'s."""
        entry = self._journal.view.entries.get(key)
        return self._routes.of(key, None if entry is None else entry.predicate)

    # -- running -------------------------------------------------------------------------

    def run(self) -> RunSummary:
        """Cycle until every entry is settled, nothing can contribute, or ``max_cycles``.

        Returns:
            How the run ended and how the entries stand.

        Raises:
            UnregisteredPredicateError: An entry to evaluate names an unregistered
                predicate (raised before the cycle that would evaluate it writes anything).
            UnknownSourceError: The board holds an entry at a source not registered here.
            RouteError: A route's source cannot apply to its entry (before any write).
        """
        attempts = self._attempts
        unrouted = self.start()
        cycles = 0
        while True:
            halted = self._halt_reason(cycles)
            if halted is not None:
                break
            if self.cycle():
                cycles += 1
                continue
            if self._wait():
                continue
            halted = HaltReason.QUIESCENT
            break
        summary = self._summary(halted, self._attempts - attempts, unrouted)
        self._observers.tell("on_halted", summary)
        return summary

    def start(self, *, redeliver: bool = True) -> tuple[str, ...]:
        """Take in the board and check what would fail mid-cycle, before anything is written.

        Args:
            redeliver: Tell observers of escalations already on the board (once per
                controller); a worker does so itself, under a claim each.

        Returns:
            The keys routed with ``route()`` that have no entry on the board.
        """
        self.take_in()
        view = self._journal.view
        for name, keys in view.partitions.items():
            if keys and name not in self._sources:
                raise UnknownSourceError(next(iter(keys)), name)
        self._routes.check_board()
        unrouted = self._routes.without_entry(self.blackboard.board_id)
        if redeliver and not self._told_pending:
            self._told_pending = True
            for key in tuple(view.segments[Segment.ESCALATE]):
                self.redeliver(key)
        self._told_pending = True
        return unrouted

    def cycle(self, focus: dict[str, None] | None = None, *, take_in: bool = True) -> bool:
        """Run one cycle (on the entries of ``focus`` only, if given); False if it did nothing.

        A focused cycle (a worker's, on its claimed entries) writes no cycle count:
        many workers cycle at once, and the count is each one's own.

        Args:
            focus: The entries to work on (``None``: every entry).
            take_in: Fold what others wrote first (:meth:`take_in`). A caller that has
                just done so itself (a worker, after claiming) passes False: the board
                is not read twice.
        """
        with self._journal.focused(focus):
            return self._cycle(take_in=take_in)

    def next_retry(self, focus: dict[str, None] | None = None) -> float | None:
        """Seconds until the earliest retry is due (0 or less: now); None if none waits."""
        with self._journal.focused(focus):
            view = self._journal.view
            due = [view.entries[k].retry_at for k in self._queue(view.waiting)]
        waits = [when for when in due if when is not None]
        if not waits:
            return None
        return (min(waits) - self.clock.now()).total_seconds()

    def redeliver(self, key: str) -> None:
        """Tell observers again of the escalation of ``key`` (marked ``redelivered``)."""
        self._observers.escalation(self.blackboard, key, redelivered=True)

    def _wait(self) -> bool:
        """Sleep until the earliest retry is due; False if no entry is waiting for one."""
        delay = self.next_retry()
        if delay is None:
            return False
        if delay > 0:
            self.clock.sleep(delay)
        return True

    # -- out-of-band resolution --------------------------------------------------------------

    def refresh(self) -> int:
        """Take in writes made since the board was last read, and tell observers.

        Writes by other processes (or by observers, through the kernel) are taken in at
        the start of each cycle; between runs, call this before :meth:`resolve` so the
        resolution lands on the board as it stands. Observers hear of the resolutions
        among the writes (``on_resolved``), as they would at a cycle's start.

        Returns:
            How many writes were taken in.
        """
        return len(self.take_in())

    def resolve(
        self,
        key: str,
        decision: str,
        *,
        by: str,
        at: datetime | None = None,
        measurement: Any = None,
        idempotency_key: str | None = None,
    ) -> Resolution:
        """Resolve an escalated entry out of band and evaluate its new measurement at once.

        The same as ``Blackboard.resolve`` (see it for the arguments), in one transaction
        with the verdict on the new measurement, and observers are told.

        Raises:
            ResolutionError: The entry is not escalated or is already resolved otherwise.
            UnregisteredPredicateError: Its predicate is not registered.
        """
        view = self._journal.view
        entry = view.entries.get(key)
        first = entry is not None and entry.resolution is None
        with self._journal.batch():
            resolution = self.blackboard.resolve(
                key,
                decision,
                by=by,
                at=at,
                measurement=measurement,
                idempotency_key=idempotency_key,
            )
            if key in view.dirty:
                self._predicates.check(view.entries, [key])
                self._evaluate_entry(key)
        stored = self.blackboard.get_resolution(key) or resolution
        if first:
            self._observers.tell("on_resolved", stored)
        return stored

    def reopen(
        self,
        key: str,
        measurement: Any,
        *,
        by: str,
        at: datetime | None = None,
        note: str | None = None,
        idempotency_key: str | None = None,
        conditions: Mapping[str, str] | None = None,
    ) -> int:
        """Open the next generation of a settled entry: its route runs again on ``measurement``.

        For a fresh measurement of something already decided (a device measured again
        after a person sent it back): the entry's next generation is written as a record
        (``pybb.entries``, ``generation`` n+1, with who, when, the note and what it
        followed), and the controller judges, dispatches and works it as a new entry:
        its chain's sources get their attempts again, failures are restored, and an
        entry still failing is escalated again, as a new escalation (a new id). The
        generations before stay in the history, with their escalations and resolutions.

        Exactly once: the record is unique per generation, and written under
        ``idempotency_key`` (default ``reopen/<key>/<generation>``); a second call with
        the same key, from this process or another, or after a restart, opens nothing
        and returns the generation the first call opened.

        Args:
            key: The entry: good, escalated or resolved (not while it is worked on).
            measurement: The fresh measurement (a dict with the entry's components, for
                a component-wise entry).
            by: Who reopened it.
            at: When (timezone-aware; default now).
            note: Why, for the history (at most 2,000 characters).
            idempotency_key: Reopens at most once under this key.
            conditions: For a component-wise entry whose fresh measurement has other
                components (a device whose evidence now fails to load), its conditions;
                by default the entry's own.

        Returns:
            The generation the entry now stands at (2 after its first reopening).

        Raises:
            EntryNotFoundError: No entry ``key``.
            ReopenError: The entry is still being worked on, or a field is unusable.
                Nothing is written.
        """
        outside_attempt("reopen")
        self.take_in()  # another process may have reopened it already
        entry = self._journal.view.entries.get(key) if isinstance(key, str) else None
        if entry is None:
            raise EntryNotFoundError(key)
        once = idempotency_key or f"reopen/{key}/{entry.generation + 1}"
        opened = _opened_under(entry, once)
        if opened is not None:
            return opened
        content = reopen_content(entry, measurement, by, at, note, once, conditions)
        try:
            self._journal.emit(ENTRIES, self.blackboard.writer, content, once)
        except IdempotencyKeyError:
            # Another process used the key first (with another time, say); the journal has
            # re-read the board, which holds that reopening.
            opened = _opened_under(self._journal.view.entries[key], once)
            if opened is None:
                raise
            return opened
        return self._journal.view.entries[key].generation

    def status(self, *, limit: int | None = None, console: Any = None) -> None:
        """Print the cycle count and all the entries as a table (escalated ones first).

        Args:
            limit: The most entries to list; ``None`` (the default) lists all.
            console: A ``rich.console.Console`` to print to (default: standard output).
        """
        from pybb._engine.status import print_status  # rich loads only when a status is asked

        print_status(self._journal.view, self.blackboard.board_id, limit=limit, console=console)

    def __repr__(self) -> str:
        return (
            f"Controller(board={self.blackboard.board_id!r}, sources={list(self._sources)}, "
            f"cycle_count={self.cycle_count})"
        )

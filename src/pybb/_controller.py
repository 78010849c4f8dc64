"""The controller: evaluates entries, dispatches them onto chains, runs the sources, hands off.

One cycle, in order: take in other processes' writes; evaluate the entries that changed
(``_evaluate_all``); dispatch newly evaluated entries onto a chain (``_dispatch``);
advance entries whose component source fixed its component (``_advance_ready``); let
each knowledge source work on the entries of its partition that need it, re-evaluating
after every attempt and handing an entry on when its source is exhausted (``_advance``).
Everything the cycle decides is one batch on the blackboard: one durable transaction.
Each step touches only the entries queued for it, so a cycle costs what its work costs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from blackboard import ProposedContribution, Reject
from blackboard.faults import fault_point
from pybb._attempt import AttemptContext, Outcome, run_attempt
from pybb._blackboard import CONTROLLER, Blackboard
from pybb._entries import check_key
from pybb._seams import Clock, ControllerObserver, SystemClock
from pybb._source import KnowledgeSource
from pybb._state import (
    ATTEMPTS,
    CYCLE,
    DISPATCHES,
    ESCALATIONS,
    HANDOFFS,
    RESOLUTIONS,
    VERDICTS,
    EntryState,
    apply_writes,
)
from pybb._types import (
    AttemptStatus,
    Chain,
    CycleReport,
    EscalationReport,
    HaltReason,
    Resolution,
    RunSummary,
    Segment,
    Stage,
)
from pybb.errors import (
    DuplicateSourceError,
    PredicateError,
    RouteError,
    SourceError,
    UnknownSourceError,
    UnregisteredPredicateError,
)

__all__ = ["Controller", "Predicate", "Route"]

Predicate = Callable[[Any], Any]
"""A condition on a measurement (or one component): truthy means good standing."""

_log = logging.getLogger("pybb")


@dataclass(frozen=True, slots=True)
class Route:
    """The two chains an entry can be dispatched onto, chosen by its first verdict.

    Attributes:
        on_pass: Sources that confirm a passing first verdict (empty: the pass is final).
        on_fail: The repair ladder for a failing first verdict (empty: escalate at once).
    """

    on_pass: tuple[KnowledgeSource, ...] = ()
    on_fail: tuple[KnowledgeSource, ...] = ()


_NO_ROUTE = Route()
_UNDISPATCHED = frozenset({Stage.NEW, Stage.EVALUATED})


class Controller:
    """Runs knowledge sources over a blackboard's entries until they settle.

    Args:
        blackboard: The board to work on.
        knowledge_sources: Sources to add at once (``route`` adds the ones it names).
        max_cycles: The most cycles one ``run()`` call may perform (``cycle_count``
            keeps counting for the board's life; reaching the bound logs a warning).
        observers: Told of escalations, resolutions, cycles and halts.
        clock: Where retry back-off gets its time (default: the system clock).

    Attributes:
        blackboard: The board the controller operates on.
        knowledge_sources: Its sources, in the order each cycle runs them.
        predicate_registry: Predicate name to function.
        routes: Entry key to its route.
        predicate_routes: Predicate name to the route of every entry using it that
            has no route of its own.
        max_cycles: The cycle limit.
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
    ) -> None:
        if not isinstance(blackboard, Blackboard):
            raise RouteError(f"a Controller needs a Blackboard, got {blackboard!r}")
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
            raise RouteError(f"max_cycles must be a positive integer, got {max_cycles!r}")
        self.blackboard = blackboard
        self.knowledge_sources: list[KnowledgeSource] = []
        self.predicate_registry: dict[str, Predicate] = {}
        self.routes: dict[str, Route] = {}
        self.predicate_routes: dict[str, Route] = {}
        self.max_cycles = max_cycles
        self.clock: Clock = SystemClock() if clock is None else clock
        self._observers = list(observers)
        self._sources: dict[str, KnowledgeSource] = {}
        self._escalated: list[str] = []
        self._attempts = 0
        self._cycles = 0  # this controller's own cycles (a worker's count; the board has none)
        self._told_pending = False
        self._late_routes: dict[str, None] = {}
        blackboard._entry_checks.append(self._check_new_entry)
        for source in knowledge_sources:
            self.add_ks(source)

    # -- the seed's attributes -----------------------------------------------------------

    @property
    def cycle_count(self) -> int:
        """The cycles this board has run (one cycle: one pass through every source)."""
        return self.blackboard._state.cycle

    @property
    def dispatched(self) -> Mapping[str, tuple[KnowledgeSource, ...]]:
        """Entry key to the chain its first verdict chose (a live read-only view)."""
        return _DispatchedView(self)

    # -- registration --------------------------------------------------------------------

    def register_predicate(self, name: str, predicate: Predicate) -> None:
        """Make ``name`` judge measurements with ``predicate`` (truthy: good standing).

        Raises:
            PredicateError: The name is not a non-empty string or ``predicate`` is not callable.
        """
        if not isinstance(name, str) or not name:
            raise PredicateError(f"a predicate name must be a non-empty string, got {name!r}")
        if not callable(predicate):
            raise PredicateError(
                f"predicate {name!r} must be callable (measurement -> bool), got {predicate!r}"
            )
        self.predicate_registry[name] = predicate

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
        source._board = self.blackboard
        self.blackboard._register_source(source.name, source.component)

    def add_observer(self, observer: ControllerObserver) -> None:
        """Tell ``observer`` of escalations, resolutions, cycles and halts from now on."""
        self._observers.append(observer)

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
                sources, or a source twice in one chain.
            DuplicateSourceError: A source shares its name with another one.
        """
        check_key(key)
        built = self._route(key, chain, on_pass, on_fail)
        entry = self.blackboard._state.entries.get(key)
        if entry is not None:
            self._check_scopes(entry.key, entry.conditions, built)
            self._note_late_route(entry, built)
        self.routes[key] = built
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
        built = self._route(f"predicate {predicate!r}", chain, on_pass, on_fail)
        for entry in self.blackboard._state.entries.values():
            undispatched = entry.chain_name is None and entry.stage in _UNDISPATCHED
            if undispatched and entry.predicate == predicate and entry.key not in self.routes:
                self._check_scopes(entry.key, entry.conditions, built)
        self.predicate_routes[predicate] = built
        return built

    def _route(
        self,
        what: str,
        chain: Sequence[KnowledgeSource] | None,
        on_pass: Sequence[KnowledgeSource] | None,
        on_fail: Sequence[KnowledgeSource] | None,
    ) -> Route:
        if chain is not None and on_fail is not None:
            raise RouteError(
                f"route for {what}: give chain or on_fail, not both (chain means on_fail)"
            )
        built = Route(
            self._chain(what, "on_pass", on_pass),
            self._chain(what, "on_fail", on_fail if chain is None else chain),
        )
        for source in (*built.on_pass, *built.on_fail):
            self.add_ks(source)
        return built

    def _chain(
        self, what: str, name: str, chain: Sequence[KnowledgeSource] | None
    ) -> tuple[KnowledgeSource, ...]:
        if chain is None:
            return ()
        if isinstance(chain, KnowledgeSource | str) or not isinstance(chain, Sequence):
            raise RouteError(f"route for {what}: {name} must be a list of sources, got {chain!r}")
        seen: set[str] = set()
        for source in chain:
            if not isinstance(source, KnowledgeSource):
                raise RouteError(
                    f"route for {what}: {name} holds {source!r}, not a KnowledgeSource"
                )
            if source.name in seen:
                raise RouteError(
                    f"route for {what}: {name} names source {source.name!r} twice; a source "
                    "keeps its attempts across the chain, so list it once"
                )
            seen.add(source.name)
        return tuple(chain)

    # -- running -------------------------------------------------------------------------

    def run(self) -> RunSummary:
        """Cycle until every entry is settled, nothing can contribute, or ``max_cycles``.

        Returns:
            How the run ended and how the entries stand.

        Raises:
            UnregisteredPredicateError: An entry to evaluate names an unregistered
                predicate (raised before the cycle that would evaluate it writes anything).
            UnknownSourceError: The board holds an entry at a source not registered here.
        """
        attempts = self._attempts
        unrouted = self._start()
        cycles = 0
        while True:
            halted = self._halt_reason(cycles)
            if halted is not None:
                break
            if self._cycle():
                cycles += 1
                continue
            if self._wait():
                continue
            halted = HaltReason.QUIESCENT
            break
        summary = self._summary(halted, self._attempts - attempts, unrouted)
        self._tell("on_halted", summary)
        return summary

    def _start(self) -> tuple[str, ...]:
        """Take in the board, check what would fail mid-cycle; return the routes with no entry."""
        self._tell_resolutions(self.blackboard._catch_up())
        self._check_sources()
        self._check_route_scopes()
        unrouted = self._routes_without_entry()
        if not self._told_pending:
            self._told_pending = True
            for key in tuple(self.blackboard._state.segments[Segment.ESCALATE]):
                self._tell_escalation(key, redelivered=True)
        return unrouted

    def _routes_without_entry(self) -> tuple[str, ...]:
        entries = self.blackboard._state.entries
        missing = tuple(key for key in self.routes if key not in entries)
        if missing:
            _log.warning(
                "%d routed key(s) have no entry on board %r, so their routes are not used: %s",
                len(missing),
                self.blackboard.board_id,
                ", ".join(repr(key) for key in missing[:10]),
            )
        return missing

    def _halt_reason(self, cycles: int) -> HaltReason | None:
        state = self.blackboard._state
        stages = state.stages
        if (
            not state.dirty
            and not state.unescalated
            and not (stages[Stage.NEW] + stages[Stage.EVALUATED] + stages[Stage.WORKING])
        ):
            return HaltReason.SETTLED
        if cycles >= self.max_cycles:
            _log.warning(
                "the controller of board %r stopped after max_cycles=%d cycles with %d "
                "entries still unsettled; run() again to go on, or raise max_cycles",
                self.blackboard.board_id,
                self.max_cycles,
                len(state.unsettled),
            )
            return HaltReason.MAX_CYCLES
        return None

    def _cycle(self) -> bool:
        """Run one cycle; False if it found nothing to do (and wrote nothing).

        On a blackboard focused on a worker's claimed entries (``pybb worker``), the
        cycle works on those entries only and writes no cycle count: many workers
        cycle at once, and the count is each one's own.
        """
        board = self.blackboard
        self._tell_resolutions(board._catch_up())
        self._check_predicates(self._queue(board._state.dirty))
        self._escalated = []
        attempts = self._attempts
        with board.batch():
            self._escalate_written()
            self._evaluate_all()
            self._dispatch()
            self._advance_ready()
            self._run_sources()
            if board._pending_count() and board._focus is None:
                board._emit(CYCLE, CONTROLLER, self.cycle_count + 1, None)
            records = board._pending_count()
        if not records:
            return False
        self._cycles += 1
        report = CycleReport(
            self.cycle_count if board._focus is None else self._cycles,
            board.head,
            records,
            self._attempts - attempts,
            len(self._escalated),
        )
        for key in self._escalated:
            self._tell_escalation(key, redelivered=False)
        self._tell("on_cycle", report)
        return True

    def _wait(self) -> bool:
        """Sleep until the earliest retry is due; False if no entry is waiting for one."""
        delay = self._next_retry()
        if delay is None:
            return False
        if delay > 0:
            self.clock.sleep(delay)
        return True

    def _next_retry(self) -> float | None:
        """Seconds until the earliest retry is due (0 or less: now); None if none waits."""
        state = self.blackboard._state
        due = [state.entries[k].retry_at for k in self._queue(state.waiting)]
        waits = [when for when in due if when is not None]
        if not waits:
            return None
        return (min(waits) - self.clock.now()).total_seconds()

    def _queue(self, queue: Mapping[str, None]) -> list[str]:
        """The keys of a work queue this controller may work on: all, or its focus's."""
        focus = self.blackboard._focus
        if focus is None:
            return list(queue)
        return [key for key in focus if key in queue]

    # -- the seed's steps ------------------------------------------------------------------

    def _escalate_written(self) -> None:
        """Give each entry written straight to the escalate segment its escalation record."""
        state = self.blackboard._state
        for key in self._queue(state.unescalated):
            self._escalate(state.entries[key], None, "written_to_escalate")

    def _evaluate_all(self) -> None:
        """Evaluate every entry whose measurement changed since its last verdict."""
        for key in self._queue(self.blackboard._state.dirty):
            self._evaluate_entry(key)

    def _evaluate_entry(self, key: str) -> bool:
        """Judge the entry's measurement with its predicate(s) and record the verdict.

        Returns:
            The entry's good standing.
        """
        entry = self.blackboard._state.entries[key]
        result, good, error = self._verdict(entry, entry.measurement)
        content: dict[str, Any] = {"key": key, "result": result, "good_standing": good}
        if error is not None:
            content["error"] = error
        self.blackboard._emit(VERDICTS, CONTROLLER, content, None)
        if entry.stage is Stage.GOOD and not good:
            # It rested in good standing and changed since. Dispatch is once per key and
            # its chain is spent, so a person decides (docs/adr/0009).
            self._escalate(entry, None, "changed_after_settling")
        return good

    def _dispatch(self) -> None:
        """Place each newly evaluated entry on the chain its first verdict chose."""
        state = self.blackboard._state
        for key in self._queue(state.undispatched):
            entry = state.entries[key]
            route = self.routes.get(key) or self.predicate_routes.get(entry.predicate or "")
            route = route or _NO_ROUTE
            passing = entry.good_standing
            chain = route.on_pass if passing else route.on_fail
            content: dict[str, Any] = {
                "key": key,
                "chain": (Chain.ON_PASS if passing else Chain.ON_FAIL).value,
                "sources": [source.name for source in chain],
            }
            scopes = {s.name: s.component for s in chain if s.component is not None}
            if scopes:
                content["scopes"] = scopes
            self.blackboard._emit(DISPATCHES, CONTROLLER, content, f"dispatch/{key}")
            if not chain and not passing:
                self._escalate(entry, None, "empty_chain")

    def _advance_ready(self) -> None:
        """Success handoff: move on every entry whose component source fixed its component."""
        state = self.blackboard._state
        for key in self._queue(state.ready):
            if key in state.ready:
                self._advance(key, restore=False)

    def _advance(self, key: str, restore: bool = True) -> None:
        """Hand the entry to the next source of its chain, or escalate it at the end.

        Args:
            key: The entry.
            restore: Failure handoff: put back what the current source worked on (its
                component for a component-scoped source, else the whole measurement).
                ``False`` is success handoff: the fix is kept.
        """
        board = self.blackboard
        entry = board._state.entries[key]
        current = entry.source
        if restore and current is not None:
            board._restore(key, entry.scopes.get(current), CONTROLLER)
        position = entry.position + 1
        if position < len(entry.chain):
            following = entry.chain[position]
            if following not in self._sources:
                raise UnknownSourceError(key, following)
            content = {
                "key": key,
                "from": current,
                "to": following,
                "reason": "exhausted" if restore else "passed",
            }
            board._emit(HANDOFFS, CONTROLLER, content, f"handoff/{key}/{position}")
        elif restore and entry.chain_name is Chain.ON_PASS:
            # Every confirmation failed, however it said so (raised, or left the entry
            # failing): the pass was provisional, and the restored original that passed
            # the cheap check is not a confirmation.
            self._escalate(entry, current, "exhausted")
        elif entry.good_standing:
            self._evaluate_entry(key)
        else:
            self._escalate(entry, current, "exhausted" if restore else "end_of_route")

    def _run_sources(self) -> None:
        """Let each source work on the entries of its partition that need it."""
        state = self.blackboard._state
        focus = self.blackboard._focus
        now: datetime | None = None
        for source in self.knowledge_sources:
            for key in source.can_contribute(self.blackboard):
                entry = state.entries.get(key)
                if entry is None or entry.source != source.name:
                    continue
                if focus is not None and key not in focus:
                    continue  # a source that lists more than its partition: not ours
                if entry.retry_at is not None:
                    now = now or self.clock.now()
                    if entry.retry_at > now:
                        continue
                if entry.ks_history.get(source.name, 0) >= source.max_attempts:
                    self._advance(key)
                else:
                    self._attempt(source, entry)

    # -- one attempt -----------------------------------------------------------------------

    def _attempt(self, source: KnowledgeSource, entry: EntryState) -> None:
        key = entry.key
        number = entry.ks_history.get(source.name, 0) + 1
        context = AttemptContext(key, source.name, source.component, number)
        outcome = run_attempt(source, self.blackboard, context)
        fault_point("ks.after")
        self._attempts += 1
        writer, content = self._attempt_record(source, entry, number, outcome)
        self._schedule_retry(source, entry, number, content)
        self.blackboard._emit(ATTEMPTS, writer, content, f"attempt/{key}/{source.name}/{number}")
        if (
            entry.stage is Stage.WORKING
            and entry.source == source.name
            and key not in self.blackboard._state.ready
            and number >= source.max_attempts
        ):
            self._advance(key)

    def _attempt_record(
        self, source: KnowledgeSource, entry: EntryState, number: int, outcome: Outcome
    ) -> tuple[str, dict[str, Any]]:
        content: dict[str, Any] = {"key": entry.key, "source": source.name, "attempt": number}
        writer = f"ks:{source.name}"
        status, error = outcome.status, outcome.error
        if status is None:
            error = _shape_problem(entry, outcome.writes)
            status = AttemptStatus.ERROR if error else None
        if status is None:
            measurement = apply_writes(entry.measurement, outcome.writes)
            result, good, error = self._verdict(entry, measurement)
            content["status"] = (
                AttemptStatus.CHANGED if outcome.writes else AttemptStatus.UNCHANGED
            ).value
            if outcome.writes:
                content["writes"] = outcome.writes
            content["result"] = result
            content["good_standing"] = good
            verdict = self.blackboard._judge(ProposedContribution(writer, ATTEMPTS, content))
            if isinstance(verdict, Reject):
                writer, content = CONTROLLER, {**content, "status": AttemptStatus.REFUSED.value}
                content["refused"] = content.pop("writes", [])
                error = verdict.reason
                del content["result"], content["good_standing"]
        else:
            content["status"] = status.value
        if error is not None:
            content["error"] = error
        if outcome.report is not None:
            content["report"] = outcome.report
        return writer, content

    def _schedule_retry(
        self, source: KnowledgeSource, entry: EntryState, number: int, content: dict[str, Any]
    ) -> None:
        if source.retry is None:
            return
        now = self.clock.now()
        content["at"] = now.isoformat()
        if number >= source.max_attempts or content.get("good_standing"):
            return
        result = content.get("result")
        if source.component and isinstance(result, dict) and result.get(source.component):
            return
        delay = source.retry.delay(number)
        if delay.total_seconds() > 0:
            content["retry_at"] = (now + delay).isoformat()

    def _verdict(
        self, entry: EntryState, measurement: Any
    ) -> tuple[bool | dict[str, bool], bool, str | None]:
        if entry.conditions is None:
            passed, error = self._judge(entry, entry.predicate or "", measurement)
            return passed, passed, error
        result: dict[str, bool] = {}
        errors: list[str] = []
        for component, name in entry.conditions.items():
            result[component], error = self._judge(entry, name, measurement[component])
            if error is not None:
                errors.append(f"{component}: {error}")
        return result, all(result.values()), "; ".join(errors) or None

    def _judge(self, entry: EntryState, name: str, value: Any) -> tuple[bool, str | None]:
        predicate = self.predicate_registry.get(name)
        if predicate is None:
            raise UnregisteredPredicateError(entry.key, name, sorted(self.predicate_registry))
        try:
            return bool(predicate(value)), None
        except Exception as exc:
            return False, f"predicate {name!r} raised {type(exc).__name__}: {exc}"

    def _escalate(self, entry: EntryState, source: str | None, reason: str) -> None:
        fault_point("escalation.create")
        tier_report = None
        for attempt in entry.attempts:
            if attempt.source == source and attempt.report is not None:
                tier_report = attempt.report
        report = EscalationReport(
            entry.key,
            source,
            entry.chain_name or Chain.ON_FAIL,
            reason,
            entry.measurement,
            entry.original,
            entry.result,
            tuple(entry.attempts),
            tier_report,
            entry.judgement_error,
        )
        content = {"key": entry.key, "source": source, "reason": reason, "report": report.to_json()}
        self.blackboard._emit(ESCALATIONS, CONTROLLER, content, f"escalate/{entry.key}")
        self._escalated.append(entry.key)

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
        records = self.blackboard._catch_up()
        self._tell_resolutions(records)
        return len(records)

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
        board = self.blackboard
        first = board._state.entries.get(key) is not None and board._entry(key).resolution is None
        with board.batch():
            board.resolve(
                key,
                decision,
                by=by,
                at=at,
                measurement=measurement,
                idempotency_key=idempotency_key,
            )
            if key in board._state.dirty:
                self._check_predicates([key])
                self._evaluate_entry(key)
        resolution = board.get_resolution(key)
        assert resolution is not None
        if first:
            self._tell("on_resolved", resolution)
        return resolution

    # -- checks, summaries and telling observers -----------------------------------------------

    def _check_predicates(self, keys: Iterable[str]) -> None:
        registry = self.predicate_registry
        entries = self.blackboard._state.entries
        for key in keys:
            entry = entries[key]
            names = [entry.predicate] if entry.conditions is None else entry.conditions.values()
            for name in names:
                if name not in registry:
                    raise UnregisteredPredicateError(key, name or "", sorted(registry))

    def _check_route_scopes(self) -> None:
        """Refuse, before anything is written, a scoped source that cannot apply to its entry."""
        state = self.blackboard._state
        for key in state.unsettled:
            entry = state.entries[key]
            if entry.chain_name is None and entry.stage in _UNDISPATCHED:
                route = self._route_of(entry.key, entry.predicate)
                if route is not None:
                    self._check_scopes(key, entry.conditions, route)

    def _check_new_entry(self, key: str, predicate: str | None, conditions: Any) -> None:
        """Refuse an entry about to be written whose route has a source that cannot apply.

        The blackboard calls this, for each controller attached to it, before it writes
        an entry to the certify segment, so a bad route is refused where the entry is
        written.

        Raises:
            RouteError: A source of the entry's route is scoped to a component the
                entry does not have.
        """
        route = self._route_of(key, predicate)
        if route is not None:
            self._check_scopes(key, conditions, route)

    def _route_of(self, key: str, predicate: str | None) -> Route | None:
        return self.routes.get(key) or self.predicate_routes.get(predicate or "")

    def _check_scopes(self, key: str, conditions: Mapping[str, str] | None, route: Route) -> None:
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

    def _note_late_route(self, entry: EntryState, route: Route) -> None:
        if entry.chain_name is None:
            return
        chain = route.on_pass if entry.chain_name is Chain.ON_PASS else route.on_fail
        if tuple(source.name for source in chain) == entry.chain:
            return  # the same route again (a resumed script): nothing is lost
        self._late_routes[entry.key] = None
        _log.warning(
            "route for entry %r comes after it was dispatched onto %s %s; dispatch is once "
            "per key, so this route is not used",
            entry.key,
            entry.chain_name.value,
            list(entry.chain),
        )

    def _check_sources(self) -> None:
        state = self.blackboard._state
        for name, keys in state.partitions.items():
            if keys and name not in self._sources:
                raise UnknownSourceError(next(iter(keys)), name)

    def _summary(
        self, halted: HaltReason, attempts: int, unrouted: tuple[str, ...] = ()
    ) -> RunSummary:
        state = self.blackboard._state
        stages = state.stages
        return RunSummary(
            halted,
            self.cycle_count,
            len(state.entries),
            stages[Stage.GOOD],
            len(state.segments[Segment.ESCALATE]),
            stages[Stage.RESOLVED],
            stages[Stage.NEW] + stages[Stage.EVALUATED] + stages[Stage.WORKING],
            attempts,
            unrouted,
            tuple(self._late_routes),
        )

    def _tell_escalation(self, key: str, *, redelivered: bool) -> None:
        if not self._observers:
            return
        escalation = self.blackboard.get_escalation(key)
        if escalation is None or escalation.sequence == 0:
            return  # not escalated as decided (the board was re-read); nothing to tell
        if escalation.entry.stage is not Stage.ESCALATED:
            return
        if redelivered:
            escalation = replace(escalation, redelivered=True)
        self._tell("on_escalated", escalation)

    def _tell_resolutions(self, records: list[Any]) -> None:
        if not self._observers:
            return
        for record in records:
            if record.region == RESOLUTIONS:
                resolution = self.blackboard.get_resolution(record.content["key"])
                if resolution is not None:
                    self._tell("on_resolved", resolution)

    def _tell(self, hook: str, value: Any) -> None:
        for observer in self._observers:
            try:
                getattr(observer, hook)(value)
            except Exception:
                _log.exception("observer %r failed in %s", observer, hook)

    def status(self, *, limit: int | None = None, console: Any = None) -> None:
        """Print the cycle count and all the entries as a table (escalated ones first).

        Args:
            limit: The most entries to list; ``None`` (the default) lists all.
            console: A ``rich.console.Console`` to print to (default: standard output).
        """
        from pybb._status import print_status

        print_status(self, limit=limit, console=console)

    def __repr__(self) -> str:
        return (
            f"Controller(board={self.blackboard.board_id!r}, sources={list(self._sources)}, "
            f"cycle_count={self.cycle_count})"
        )


def _shape_problem(entry: EntryState, writes: list[list[Any]]) -> str | None:
    """Why a whole-measurement write does not fit a component-wise entry, if it does not."""
    if entry.conditions is None or not any(component is None for component, _ in writes):
        return None
    measurement = apply_writes(entry.measurement, writes)
    if isinstance(measurement, dict) and set(measurement) == set(entry.conditions):
        return None
    return (
        f"the source wrote a measurement for entry {entry.key!r} without exactly the "
        f"components {sorted(entry.conditions)} its conditions name"
    )


class _DispatchedView(Mapping[str, tuple[KnowledgeSource, ...]]):
    """Entry key to its dispatched chain's sources."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def _entry(self, key: str) -> EntryState | None:
        entry = self._controller.blackboard._state.entries.get(key)
        return entry if entry is not None and entry.chain_name is not None else None

    def __getitem__(self, key: str) -> tuple[KnowledgeSource, ...]:
        entry = self._entry(key)
        if entry is None:
            raise KeyError(key)
        sources = self._controller._sources
        missing = [name for name in entry.chain if name not in sources]
        if missing:
            raise UnknownSourceError(key, missing[0])
        return tuple(sources[name] for name in entry.chain)

    def __iter__(self) -> Iterator[str]:
        entries = self._controller.blackboard._state.entries
        return iter([key for key, entry in entries.items() if entry.chain_name is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

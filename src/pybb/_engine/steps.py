"""One cycle and the seed's steps in it, as the controller runs them (its base class).

``_evaluate_all``, ``_evaluate_entry``, ``_dispatch``, ``_advance_ready`` and
``_advance`` are the seed's names; a subclass of ``Controller`` may override any of
them (the replay tests' negative controls do). Every step reads the projection through
the journal's view and writes through the journal: nothing here commits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blackboard import Record
from blackboard.faults import fault_point
from pybb._engine.attempt import AttemptContext
from pybb._engine.blackboard import CONTROLLER, Blackboard
from pybb._engine.journal import Journal
from pybb._engine.observers import Observers
from pybb._engine.projection import (
    ATTEMPTS,
    CYCLE,
    DISPATCHES,
    ESCALATIONS,
    HANDOFFS,
    RESTORES,
    VERDICTS,
    EntryState,
)
from pybb._engine.records import attempt_record, escalation_content
from pybb._engine.routes import NO_ROUTE, RouteTable
from pybb._engine.runner import AttemptRunner, run_inline
from pybb._engine.seams import Clock
from pybb._engine.source import KnowledgeSource
from pybb._engine.types import Chain, CycleReport, HaltReason, RunSummary, Segment, Stage
from pybb._engine.verdicts import Predicates
from pybb.errors import UnknownSourceError

__all__ = ["COMMIT_EVERY", "CycleSteps"]

_log = logging.getLogger("pybb")

COMMIT_EVERY = 10_000
"""Records a cycle holds before it commits them (``Controller(commit_every=...)``).

About 20 MB in flight on SQLite (pybb's records and the kernel's copies of them); a
W1 cycle over 10^5 entries decides some 270,000 records (docs/adr/0020)."""


# An enum member read through its class costs about 0.1 µs, and its value as much again.
_NEW, _WORKING = Stage.NEW, Stage.WORKING
_ON_PASS, _ON_FAIL = Chain.ON_PASS.value, Chain.ON_FAIL.value


class _FlushRefusedError(Exception):
    """A part of a cycle did not land as decided; the projection was re-read."""


class CycleSteps:
    """The steps of a cycle and of a run's end; :class:`pybb.Controller` builds their state."""

    blackboard: Blackboard
    knowledge_sources: list[KnowledgeSource]
    clock: Clock
    _journal: Journal
    _predicates: Predicates
    _routes: RouteTable
    _runner: AttemptRunner
    _sources: dict[str, KnowledgeSource]
    _escalated: list[str]
    _resume: tuple[str, dict[str, str]] | None
    _in_parts: bool
    commit_every: int
    _chains: dict[int, tuple[tuple[KnowledgeSource, ...], list[str], dict[str, str]]]
    _attempts: int
    _cycles: int
    _observers: Observers
    max_cycles: int

    def take_in(self) -> list[Record]:
        """Fold what other processes wrote since the board was read, telling observers."""
        records = self._journal.catch_up()
        self._observers.resolutions(self.blackboard, records)
        return records

    # -- how a run ends ---------------------------------------------------------------------

    def _halt_reason(self, cycles: int) -> HaltReason | None:
        view = self._journal.view
        stages = view.stages
        open_stages = stages[Stage.NEW] + stages[Stage.EVALUATED] + stages[Stage.WORKING]
        if not view.dirty and not view.unescalated and not open_stages:
            return HaltReason.SETTLED
        if cycles >= self.max_cycles:
            _log.warning(
                "the controller of board %r stopped after max_cycles=%d cycles with %d "
                "entries still unsettled; run() again to go on, or raise max_cycles",
                self.blackboard.board_id,
                self.max_cycles,
                len(view.unsettled),
            )
            return HaltReason.MAX_CYCLES
        return None

    def _summary(
        self, halted: HaltReason, attempts: int, unrouted: tuple[str, ...] = ()
    ) -> RunSummary:
        view = self._journal.view
        stages = view.stages
        return RunSummary(
            halted,
            view.cycle,
            len(view.entries),
            stages[Stage.GOOD],
            len(view.segments[Segment.ESCALATE]),
            stages[Stage.RESOLVED],
            stages[Stage.NEW] + stages[Stage.EVALUATED] + stages[Stage.WORKING],
            attempts,
            unrouted,
            tuple(self._routes.late),
        )

    # -- one cycle ---------------------------------------------------------------------------

    def _cycle(self, *, take_in: bool = True) -> bool:
        """One cycle in one batch; False if it found nothing to do (and wrote nothing).

        A cycle that decides more than ``commit_every`` records commits them in parts;
        one cut short after a part (a crash, an error) is taken up where it stopped:
        its committed attempts since the board's last cycle record say which source it
        had reached and which entries that source had done (docs/adr/0020).
        """
        journal = self._journal
        if take_in:
            self.take_in()
        source, done = journal.take_interrupted()
        self._resume = None if source is None or journal.focus is not None else (source, done)
        resuming = self._resume is not None
        self._predicates.check(journal.view.entries, self._queue(journal.view.dirty))
        self._escalated = []
        attempts = self._attempts
        # Only a cycle's own batch is committed in parts: one the application opened
        # around it (``with board.batch(): controller.run()``) stays whole.
        self._in_parts = journal.focus is None and not journal.batching
        try:
            with journal.batch():
                if not resuming:  # the interrupted cycle had finished these steps
                    self._escalate_written()
                    self._evaluate_all()
                    self._dispatch()
                    self._advance_ready()
                self._run_sources()
                if journal.decided and journal.focus is None:
                    journal.emit(CYCLE, CONTROLLER, self._journal.view.cycle + 1, None)
                records = journal.decided
        except _FlushRefusedError:
            return True  # the board was re-read: the next cycle goes on from it
        finally:
            self._resume = None
        if not records:
            # An interrupted cycle with nothing left (or a false alarm: attempts that
            # workers wrote, who write no cycle record): a whole cycle, then.
            return self._cycle() if resuming else False
        self._cycles += 1
        report = CycleReport(
            journal.view.cycle if journal.focus is None else self._cycles,
            journal.view.head,
            records,
            self._attempts - attempts,
            len(self._escalated),
        )
        for key in self._escalated:
            self._observers.escalation(self.blackboard, key, redelivered=False)
        self._observers.tell("on_cycle", report)
        return True

    def _step_done(self) -> None:
        """Commit what the cycle holds if it holds ``commit_every`` records (between entries)."""
        if self._in_parts:
            journal = self._journal
            if journal.pending >= self.commit_every and not journal.flush():
                raise _FlushRefusedError

    def _queue(self, queue: Mapping[str, None]) -> list[str]:
        """The keys of a work queue this controller may work on: all, or its focus's."""
        focus = self._journal.focus
        if focus is None:
            return list(queue)
        return [key for key in focus if key in queue]

    # -- the seed's steps ------------------------------------------------------------------

    def _escalate_written(self) -> None:
        """Give each entry written straight to the escalate segment its escalation record."""
        view = self._journal.view
        for key in self._queue(view.unescalated):
            self._escalate(view.entries[key], None, "written_to_escalate")
            self._step_done()

    def _evaluate_all(self) -> None:
        """Evaluate every entry whose measurement changed since its last verdict.

        A new entry's first verdict chooses its chain, so the two are one record: its
        dispatch, which carries the verdict (docs/adr/0026). Every later verdict is a
        record of its own.
        """
        view = self._journal.view
        entries = view.entries
        for key in self._queue(view.dirty):
            if entries[key].stage is _NEW:
                self._evaluate_and_dispatch(key)
            else:
                self._evaluate_entry(key)
            self._step_done()

    def _evaluate_entry(self, key: str) -> bool:
        """Judge the entry's measurement with its predicate(s) and record the verdict.

        Returns:
            The entry's good standing.
        """
        entry = self._journal.view.entries[key]
        result, good, error = self._predicates.verdict(entry, entry.measurement)
        content: dict[str, Any] = {"key": entry.record_key, "result": result, "good_standing": good}
        if error is not None:
            content["error"] = error
        self._journal.emit(VERDICTS, CONTROLLER, content, None)
        if entry.stage is Stage.GOOD and not good:
            # It rested in good standing and changed since. Dispatch is once per key and
            # its chain is spent, so a person decides (docs/adr/0009).
            self._escalate(entry, None, "changed_after_settling")
        return good

    def _evaluate_and_dispatch(self, key: str) -> None:
        """Judge a new entry and place it on the chain the verdict chose, in one record."""
        entry = self._journal.view.entries[key]
        result, good, error = self._predicates.verdict(entry, entry.measurement)
        content: dict[str, Any] = {"key": entry.record_key, "result": result, "good_standing": good}
        if error is not None:
            content["error"] = error
        self._emit_dispatch(entry, content, good)

    def _dispatch(self) -> None:
        """Place each evaluated, undispatched entry on the chain its first verdict chose.

        A cycle judges and dispatches a new entry in one record; this step finds work only
        on a board whose first verdicts were written apart from their dispatches, before
        docs/adr/0026 (they read, and run on, as they always did).
        """
        view = self._journal.view
        for key in self._queue(view.undispatched):
            entry = view.entries[key]
            self._emit_dispatch(entry, {"key": entry.record_key}, entry.good_standing)
            self._step_done()

    def _emit_dispatch(self, entry: EntryState, content: dict[str, Any], passing: bool) -> None:
        """Add the chain ``passing`` chooses to ``content`` and write it as the dispatch."""
        route = self._routes.of(entry.key, entry.predicate) or NO_ROUTE
        chain = route.on_pass if passing else route.on_fail
        names, scopes = self._chain_content(chain)
        content["chain"] = _ON_PASS if passing else _ON_FAIL
        content["sources"] = names
        if scopes:
            content["scopes"] = scopes
        self._journal.emit(DISPATCHES, CONTROLLER, content, f"dispatch/{entry.record_key}")
        if not chain and not passing:
            self._escalate(entry, None, "empty_chain")

    def _chain_content(
        self, chain: tuple[KnowledgeSource, ...]
    ) -> tuple[list[str], dict[str, str]]:
        """The source names and scopes of a dispatch onto ``chain``.

        One list and one dict per chain, shared by every dispatch record onto it until
        the cycle commits (the records are encoded, never changed): a W1 cycle
        dispatches every entry onto one chain.
        """
        cached = self._chains.get(id(chain))
        if cached is None or cached[0] is not chain:
            names = [source.name for source in chain]
            scopes = {s.name: s.component for s in chain if s.component is not None}
            cached = self._chains[id(chain)] = (chain, names, scopes)
        return cached[1], cached[2]

    def _advance_ready(self) -> None:
        """Success handoff: move on every entry whose component source fixed its component."""
        view = self._journal.view
        for key in self._queue(view.ready):
            if key in view.ready:
                self._advance(key, restore=False)
                self._step_done()

    def _advance(self, key: str, restore: bool = True) -> None:
        """Hand the entry to the next source of its chain, or escalate it at the end.

        Args:
            key: The entry.
            restore: Failure handoff: put back what the current source worked on (its
                component for a component-scoped source, else the whole measurement).
                ``False`` is success handoff: the fix is kept.
        """
        entry = self._journal.view.entries[key]
        current = entry.source
        restored = None
        if restore and current is not None:
            restored = self._restore(entry, entry.scopes.get(current))
        position = entry.position + 1
        if position < len(entry.chain):
            following = entry.chain[position]
            if following not in self._sources:
                raise UnknownSourceError(key, following)
            reason = "exhausted" if restore else "passed"
            once = f"handoff/{entry.record_key}/{position}"
            content: dict[str, Any] = {
                "key": entry.record_key,
                "from": current,
                "to": following,
                "reason": reason,
            }
            if restored is not None:
                # What the failure handoff put back travels with it (docs/adr/0026).
                content["restore"] = restored
            self._journal.emit(HANDOFFS, CONTROLLER, content, once)
            return
        if restored is not None:  # the chain ends here: the restore is a record of its own
            self._journal.emit(RESTORES, CONTROLLER, {"key": entry.record_key, **restored}, None)
        if restore and entry.chain_name is Chain.ON_PASS:
            # Every confirmation failed, however it said so (raised, or left the entry
            # failing): the pass was provisional, and the restored original that passed
            # the cheap check is not a confirmation.
            self._escalate(entry, current, "exhausted")
        elif entry.good_standing:
            self._evaluate_entry(key)
        else:
            self._escalate(entry, current, "exhausted" if restore else "end_of_route")

    def _restore(self, entry: EntryState, component: str | None) -> dict[str, Any]:
        """What a failure handoff puts back: ``component`` of the original, or all of it."""
        original = entry.original if component is None else entry.original[component]
        restored: dict[str, Any] = {"value": original}
        if component is not None:
            restored["component"] = component
        return restored

    def _run_sources(self) -> None:
        """Let each source work on the entries of its partition that need it."""
        view = self._journal.view
        focus = self._journal.focus
        now: datetime | None = None
        sources = self.knowledge_sources
        done: dict[str, str] = {}
        if self._resume is not None:
            names = [source.name for source in sources]
            reached, attempted = self._resume
            if reached in names:  # the sources before it had finished their turn
                sources, done = sources[names.index(reached) :], attempted
        entries = view.entries
        for source in sources:
            name = source.name
            for key in source.can_contribute(self.blackboard):
                entry = entries.get(key)
                if entry is None or entry.source != name:
                    continue
                if focus is not None and key not in focus:
                    continue  # a source that lists more than its partition: not ours
                if done and done.get(key) == name:
                    continue  # its turn in the interrupted cycle is on the board
                if entry.retry_at is not None:
                    now = now or self.clock.now()
                    if entry.retry_at > now:
                        continue
                if entry.ks_history.get(name, 0) >= source.max_attempts:
                    self._advance(key)
                else:
                    self._attempt(source, entry)
                self._step_done()
            done = {}  # only the source the interrupted cycle had reached did some

    def _attempt(self, source: KnowledgeSource, entry: EntryState) -> None:
        key = entry.key
        number = entry.ks_history.get(source.name, 0) + 1
        context = AttemptContext(key, source.name, source.component, number)
        if source.timeout is None:  # ``AttemptRunner.run``'s own first test, without its frame
            outcome = run_inline(source, self.blackboard, context)
        else:
            outcome = self._runner.run(source, self.blackboard, context)
        fault_point("ks.after")
        self._attempts += 1
        now = None if source.retry is None else self.clock.now()
        writer, content, judged = attempt_record(
            self._journal, self._predicates, source, entry, number, outcome, now
        )
        once = f"attempt/{entry.record_key}/{source.name}/{number}"
        self._journal.emit(ATTEMPTS, writer, content, once, judged)
        if (
            entry.stage is _WORKING
            and entry.source == source.name
            and key not in self._journal.view.ready
            and number >= source.max_attempts
        ):
            self._advance(key)

    def _escalate(self, entry: EntryState, source: str | None, reason: str) -> None:
        fault_point("escalation.create")
        content = escalation_content(entry, source, reason)
        self._journal.emit(ESCALATIONS, CONTROLLER, content, f"escalate/{entry.record_key}")
        self._escalated.append(entry.key)

"""The blackboard: the seed's entries, segments and history, on a durable kernel board.

Every change is a record on one of the board's levels (see ``pybb._engine.projection``),
written through the board's :class:`~pybb._engine.journal.Journal`, which folds each one
into the projection that every read here comes from. Writes made inside
:meth:`Blackboard.batch` (the controller runs every cycle inside one) are visible at once
and committed together in one durable transaction when the batch ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from blackboard import AdmissionRule, Model, Region, create_model
from blackboard.faults import fault_point
from blackboard.stores import Store
from pybb._engine.admission import PybbRule
from pybb._engine.attempt import attempt_on, outside_attempt, running
from pybb._engine.entries import (
    MAX_KEY,
    check_board_options,
    check_component,
    copy_json,
    entry_content,
    is_written,
    resolution_content,
)
from pybb._engine.journal import Journal
from pybb._engine.projection import (
    ATTEMPTS,
    CHANGES,
    CYCLE,
    ENTRIES,
    ESCALATIONS,
    REGIONS,
    RESOLUTIONS,
    RESTORES,
    EntryState,
    View,
    apply_writes,
)
from pybb._engine.snapshots import SegmentView, history, resolution, snapshot
from pybb._engine.types import (
    BlackboardEntry,
    Escalation,
    EscalationReport,
    HistoryEvent,
    Resolution,
    Segment,
    Stage,
)
from pybb.errors import (
    EntryError,
    EntryNotFoundError,
    ResolutionError,
    SourceError,
)

__all__ = ["CONTROLLER", "DEFAULT_BOARD", "MAX_KEY", "Blackboard"]

DEFAULT_BOARD = "pybb"
CONTROLLER = "controller"
"""The writer name of the controller's own records."""


class Blackboard:
    """Entries, their segments and their history, on a durable kernel board.

    Every change is a sequenced write on the kernel board, and what ``get_entry`` reads
    is folded from those writes; reopening a stored board folds its log again, so a run
    resumes where it stopped. A blackboard (and its controller) is used from one thread;
    another process writes through a blackboard of its own, and the controller takes
    those writes in at the start of each cycle (or call :meth:`refresh`).

    Args:
        store: ``None`` (memory), ``"sqlite:///path.db"`` (durable), a PostgreSQL URL,
            or a ``blackboard.stores.Store``. Reopening a stored board resumes it.
        board_id: Which board in the store.
        writer: The writer name of this blackboard's own writes (entries, manual
            component writes, resolutions).
        admission_rule: The application's kernel admission rule. It judges knowledge-
            source attempts after pybb's own rule (which refuses a component-scoped
            source writing another component) and every write to ``regions``; pybb's
            own bookkeeping is not put to it. It should be deterministic.
        regions: More kernel regions to declare on the board beside pybb's (for
            example ``pybb.human.HUMAN_REGIONS``); names starting ``pybb.`` are pybb's.
        premises: The opening values of the premises among ``regions``.

    Attributes:
        board_id: The board in the store.
        journal: The board's journal: what the controller and workers write through
            and read the projection from (``journal.view``).
    """

    journal_class: ClassVar[type[Journal]] = Journal
    """The journal this class writes through (a test swaps in a faulty one)."""

    def __init__(
        self,
        store: str | Store | None = None,
        board_id: str = DEFAULT_BOARD,
        *,
        writer: str = "app",
        admission_rule: AdmissionRule | None = None,
        regions: Iterable[Region] = (),
        premises: Mapping[str, Any] | None = None,
    ) -> None:
        extra = check_board_options(regions, writer)
        self.board_id = board_id
        self._writer = writer
        rule = PybbRule(admission_rule)
        model = create_model(
            regions=[*REGIONS, *extra],
            premises={CYCLE: 0, **(premises or {})},
            admission_rule=rule,
            store=store,
            board_id=board_id,
        )
        self.journal = self.journal_class(model, board_id, rule)

    # -- the seed's attributes -------------------------------------------------------

    @property
    def entries(self) -> Mapping[str, BlackboardEntry]:
        """The entries in the certify segment, by key (a live read-only view of copies)."""
        return SegmentView(self.journal.view, Segment.CERTIFY, self.get_entry)

    @property
    def escalate(self) -> Mapping[str, BlackboardEntry]:
        """The entries in the escalate segment, by key (a live read-only view of copies)."""
        return SegmentView(self.journal.view, Segment.ESCALATE, self.get_entry)

    @property
    def history(self) -> list[HistoryEvent]:
        """Every change on the board, from its log (see :meth:`get_history`)."""
        return self.get_history()

    @property
    def model(self) -> Model:
        """The kernel run underneath: its ``reader`` reads the raw log, levels and digest."""
        return self.journal.model

    @property
    def writer(self) -> str:
        """The writer name of this blackboard's own writes (entries, changes, resolutions)."""
        return self._writer

    @property
    def head(self) -> int:
        """The sequence number of the last write this blackboard has seen."""
        return self.journal.view.head

    # -- writing entries --------------------------------------------------------------

    def write_entry(
        self, key: str, entry: BlackboardEntry, *, segment: Segment | str = Segment.CERTIFY
    ) -> None:
        """Write an entry under ``key``, to the certify segment unless told otherwise.

        Writing the same entry under the same key again does nothing, so a resumed
        script can write its entries again. Only ``predicate``/``conditions``,
        ``measurement`` and the segment are taken from ``entry``.

        Raises:
            EntryError: The key or entry cannot be written (neither predicate nor
                conditions, components that differ from the measurement's, a
                measurement that is not JSON...). Nothing is written.
            EntryExistsError: ``key`` already holds a different entry.
        """
        if running() is not None:  # ``outside_attempt``'s test first: it raises, when it runs
            outside_attempt("write_entry")
        content = entry_content(key, entry, segment)
        existing = self.journal.view.entries.get(key)
        if existing is not None and is_written(existing, content):
            return
        self.journal.check_new_entry(content)
        self.journal.emit(ENTRIES, self._writer, content, f"entry/{key}")

    def write_entries(self, entries: Mapping[str, BlackboardEntry]) -> None:
        """Write many entries in one transaction (see :meth:`write_entry`)."""
        with self.batch():
            for key, entry in entries.items():
                self.write_entry(key, entry)

    def write_component(self, key: str, component: str, value: Any) -> None:
        """Write one component of a dict measurement, leaving the others as they are.

        Inside a knowledge source's ``execute`` the write belongs to its attempt on
        ``key`` (and is judged with it); elsewhere it is a change of its own, and the
        entry is re-evaluated at the controller's next cycle.

        Raises:
            EntryNotFoundError: No entry ``key``.
            ComponentError: The entry has no component ``component``.
            EntryError: ``value`` is not JSON.
        """
        state = self._entry(key)
        check_component(state, component)
        copied = copy_json(key, value, f"value for component {component!r}")
        self._change(CHANGES, self._writer, key, component, copied)

    def restore_original(self, key: str) -> None:
        """Put the entry's original measurement back, as first written.

        Raises:
            EntryNotFoundError: No entry ``key``.
        """
        self._restore(key, None, self._writer)

    def restore_component(self, key: str, component: str) -> None:
        """Put one component back from the original, keeping the other components' fixes.

        Raises:
            EntryNotFoundError: No entry ``key``.
            ComponentError: The entry has no component ``component``.
        """
        self._restore(key, component, self._writer)

    def add_ks_history(self, key: str, source: str) -> int:
        """Count one attempt of ``source`` on ``key`` (a sequenced write); return the count."""
        outside_attempt("add_ks_history")
        state = self._entry(key)
        number = state.ks_history.get(source, 0) + 1
        named = state.record_key
        content = {"key": named, "source": source, "attempt": number, "status": "counted"}
        self.journal.emit(ATTEMPTS, self._writer, content, f"attempt/{named}/{source}/{number}")
        return number

    def report(self, key: str, report: Any) -> None:
        """Attach a report to the running attempt on ``key`` (inside ``execute`` only).

        The report (any JSON value) is kept with the attempt whatever its outcome, and
        an escalation carries the failing tier's last report.

        Raises:
            SourceError: Called outside a knowledge source's attempt on ``key``.
        """
        context = attempt_on(key)
        if context is None:
            raise SourceError(
                f"report() for entry {key!r} was called outside a knowledge source's attempt "
                "on it; a report belongs to an attempt"
            )
        context.attach(copy_json(key, report, "report"))

    # -- reading --------------------------------------------------------------------

    def get_entry(self, key: str) -> BlackboardEntry:
        """A copy of the entry as it stands (inside an attempt: with the attempt's writes)."""
        # ``_entry`` and ``attempt_on`` written out: every attempt reads its entry, and
        # their two frames were a tenth of the read.
        state = self.journal.view.entries.get(key) if isinstance(key, str) else None
        if state is None:
            raise EntryNotFoundError(key)
        context = running()
        measurement = state.measurement
        if context is not None:
            if context.key != key:
                attempt_on(key)  # raises: a source reads only its own entry
            if context.writes:
                measurement = apply_writes(measurement, context.writes)
        return snapshot(state, measurement)

    def get_all_entries(self) -> dict[str, BlackboardEntry]:
        """Copies of every entry in the certify segment."""
        return dict(self.entries)

    def get_escalate(self) -> dict[str, BlackboardEntry]:
        """Copies of every entry in the escalate segment."""
        return dict(self.escalate)

    def get_escalation(self, key: str) -> Escalation | None:
        """The escalation of ``key``, if it was escalated by the controller."""
        state = self._entry(key)
        content = state.escalation
        if state.escalation_seq:
            # The projection keeps no committed escalation's content (a report with every
            # attempt, the largest thing an escalated entry has): it is read back.
            record = self.journal.record(state.escalation_seq)
            if record is None or record.region != ESCALATIONS:
                raise EntryError(
                    key,
                    f"its escalation was committed at sequence {state.escalation_seq}, but the "
                    "board holds no escalation record there: the store lost a committed "
                    "record; check the board's file or database",
                )
            content = record.content
        if content is None:
            return None
        report = EscalationReport.from_json(content["report"])
        copy = snapshot(state, state.measurement)
        return Escalation(self.board_id, key, copy, report.source, report, state.escalation_seq)

    def get_resolution(self, key: str) -> Resolution | None:
        """The out-of-band resolution of ``key``, if a person resolved it."""
        stored = self._entry(key).resolution
        return None if stored is None else resolution(stored)

    def get_history(self, key: str | None = None) -> list[HistoryEvent]:
        """Every change on the board (or to one entry), from the board's log, in order."""
        return history(self.journal.model.reader.log(), key)

    def digest(self) -> str:
        """The board digest: SHA-256 of the canonical JSON of the whole board."""
        return self.journal.model.reader.digest()

    # -- out-of-band resolution --------------------------------------------------------

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
        """Resolve an escalated entry out of band: a person's decision, recorded once.

        The entry leaves the escalate segment for certify, its route over, with the
        resolution in its history. A new ``measurement`` replaces the entry's and is
        evaluated at the controller's next cycle. Resolving again with the same
        decision returns the first resolution; a different one raises.

        Args:
            key: The escalated entry.
            decision: What the person decided (e.g. the option they chose).
            by: Who decided.
            at: When (timezone-aware; default now).
            measurement: A new measurement, or ``None`` to keep the current one.
            idempotency_key: Applies the answer at most once; default ``resolve/<key>``.

        Raises:
            ResolutionError: The entry is not escalated, is already resolved otherwise,
                or a field is unusable. Nothing is written.
        """
        outside_attempt("resolve")
        state = self._entry(key)
        content = resolution_content(state, decision, by, at, measurement)
        if state.resolution is None and state.stage is not Stage.ESCALATED:
            raise ResolutionError(
                key,
                f"it is not escalated (its stage is {state.stage.value!r}); only "
                "entries in the escalate segment are resolved out of band",
            )
        if state.resolution is None:
            fault_point("answer.apply")
            once = idempotency_key or f"resolve/{state.record_key}"
            self.journal.emit(RESOLUTIONS, self._writer, content, once)
        return self._resolved(state, content)

    def _resolved(self, state: EntryState, content: dict[str, Any]) -> Resolution:
        stored = self.journal.view.entries[state.key].resolution
        if stored is None or any(stored.get(k) != v for k, v in content.items()):
            by = None if stored is None else stored.get("by")
            raise ResolutionError(
                state.key, f"it was already resolved differently (by {by!r}); a resolution is final"
            )
        return resolution(stored)

    # -- transactions ------------------------------------------------------------------

    def batch(self) -> AbstractContextManager[None]:
        """Commit every write made inside the block in one durable transaction.

        Writes are visible (``get_entry``) at once and durable when the block ends. If
        the block raises, none of them is written. Nested blocks join the outer one.
        """
        return self.journal.batch()

    def refresh(self) -> int:
        """Take in writes other processes made to the board; return how many there were."""
        return len(self.journal.catch_up())

    def close(self) -> None:
        """Release the store if this blackboard opened it."""
        self.journal.model.close()

    def __enter__(self) -> Blackboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Blackboard(board_id={self.board_id!r}, entries={len(self._state.entries)})"

    @property
    def _state(self) -> View:
        # The projection, for this module's reads (and tests); others use journal.view.
        return self.journal.view

    # -- helpers --------------------------------------------------------------------------

    def _entry(self, key: str) -> EntryState:
        state = self.journal.view.entries.get(key) if isinstance(key, str) else None
        if state is None:
            raise EntryNotFoundError(key)
        return state

    def _restore(self, key: str, component: str | None, writer: str) -> None:
        state = self._entry(key)
        if component is not None:
            check_component(state, component)
        value = state.original if component is None else state.original[component]
        self._change(RESTORES, writer, key, component, value)

    def _change(
        self, region: str, writer: str, key: str, component: str | None, value: Any
    ) -> None:
        """Buffer the write in the running attempt on ``key``, or record it as a change."""
        context = attempt_on(key)
        if context is not None:
            context.write(component, value)
            return
        content: dict[str, Any] = {"key": self._entry(key).record_key, "value": value}
        if component is not None:
            content["component"] = component
        self.journal.emit(region, writer, content, None)

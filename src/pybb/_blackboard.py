"""The blackboard: entries and their history, kept as sequenced writes on a kernel board.

Every change is a record on one of the board's levels (see ``pybb._state``); the
in-memory projection is folded from them. Writes made inside :meth:`Blackboard.batch`
(the controller runs every cycle inside one) are applied to the projection at once and
committed together in one durable transaction when the batch ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, KeysView, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NamedTuple

from blackboard import (
    Accept,
    AdmissionRule,
    AdmissionRuleError,
    BoardReader,
    Fence,
    Model,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    Region,
    Reject,
    Rejected,
    RejectionCause,
    WriteResult,
    Written,
    create_model,
)
from blackboard.faults import fault_point
from blackboard.stores import Store
from pybb._attempt import AttemptContext, current_attempt
from pybb._entries import (
    MAX_KEY,
    check_component,
    copy_json,
    entry_content,
    resolution_content,
    same_entry,
)
from pybb._state import (
    ATTEMPTS,
    CHANGES,
    CYCLE,
    ENTRIES,
    ESCALATIONS,
    KINDS,
    REGIONS,
    RESOLUTIONS,
    RESTORES,
    EntryState,
    Projection,
    apply_writes,
)
from pybb._types import (
    BlackboardEntry,
    Escalation,
    EscalationReport,
    HistoryEvent,
    Resolution,
    Segment,
    Stage,
)
from pybb._values import copy_value
from pybb.errors import (
    BoardClosedError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PybbError,
    ResolutionError,
    SourceError,
)

__all__ = ["CONTROLLER", "DEFAULT_BOARD", "MAX_KEY", "Blackboard"]

DEFAULT_BOARD = "pybb"
CONTROLLER = "controller"
"""The writer name of the controller's own records."""

_log = logging.getLogger("pybb")


class _Pending(NamedTuple):
    region: str
    writer: str
    content: Any
    key: str | None
    expected_version: int = 0


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
    """

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
        extra = list(regions)
        for region in extra:
            if getattr(region, "name", "").startswith("pybb."):
                raise PybbError(
                    f"region {region.name!r} uses the prefix 'pybb.', which is pybb's own; "
                    "rename it"
                )
        if not isinstance(writer, str) or not writer or writer.startswith(("@", "ks:")):
            raise PybbError(
                f"writer {writer!r} is not usable; give a non-empty name not starting with "
                "'@' (the board's) or 'ks:' (knowledge sources')"
            )
        self.board_id = board_id
        self._writer = writer
        self._user_rule = admission_rule
        self._scopes: dict[str, str | None] = {}
        self._pending: list[_Pending] | None = None
        # Set by a worker (pybb._worker): the entries it holds claims on, which are all
        # the controller may work on, and the holder its batches are fenced for.
        self._focus: dict[str, None] | None = None
        self._holder: str | None = None
        self._claim_lost = False
        # Each attached controller's check of a new entry against its routes.
        self._entry_checks: list[Callable[[str, str | None, Any], None]] = []
        self._state = Projection()
        self._model = create_model(
            regions=[*REGIONS, *extra],
            premises={CYCLE: 0, **(premises or {})},
            admission_rule=self._admit,
            store=store,
            board_id=board_id,
        )
        self._rebuild()

    # -- the seed's attributes -------------------------------------------------------

    @property
    def entries(self) -> Mapping[str, BlackboardEntry]:
        """The entries in the certify segment, by key (a live read-only view of copies)."""
        return _SegmentView(self, Segment.CERTIFY)

    @property
    def escalate(self) -> Mapping[str, BlackboardEntry]:
        """The entries in the escalate segment, by key (a live read-only view of copies)."""
        return _SegmentView(self, Segment.ESCALATE)

    @property
    def history(self) -> list[HistoryEvent]:
        """Every change on the board, from its log (see :meth:`get_history`)."""
        return self.get_history()

    @property
    def model(self) -> Model:
        """The kernel run underneath: its ``reader`` reads the raw log, levels and digest."""
        return self._model

    @property
    def head(self) -> int:
        """The sequence number of the last write this blackboard has seen."""
        return self._state.head

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
        self._outside_attempt("write_entry")
        content = entry_content(key, entry, segment)
        existing = self._state.entries.get(key)
        if existing is not None:
            if same_entry(existing, content):
                return
            raise EntryExistsError(
                key, "the key already holds a different entry; use a new key for a new entry"
            )
        if content["segment"] == Segment.CERTIFY.value:
            for check in self._entry_checks:
                check(key, content.get("predicate"), content.get("conditions"))
        self._emit(ENTRIES, self._writer, content, f"entry/{key}")

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
        self._write(state, component, copied)

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
        self._outside_attempt("add_ks_history")
        state = self._entry(key)
        number = state.ks_history.get(source, 0) + 1
        content = {"key": key, "source": source, "attempt": number, "status": "counted"}
        self._emit(ATTEMPTS, self._writer, content, f"attempt/{key}/{source}/{number}")
        return number

    def report(self, key: str, report: Any) -> None:
        """Attach a report to the running attempt on ``key`` (inside ``execute`` only).

        The report (any JSON value) is kept with the attempt whatever its outcome, and
        an escalation carries the failing tier's last report.

        Raises:
            SourceError: Called outside a knowledge source's attempt on ``key``.
        """
        context = self._attempt_on(key)
        if context is None:
            raise SourceError(
                f"report() for entry {key!r} was called outside a knowledge source's attempt "
                "on it; a report belongs to an attempt"
            )
        context.attach(copy_json(key, report, "report"))

    # -- reading --------------------------------------------------------------------

    def get_entry(self, key: str) -> BlackboardEntry:
        """A copy of the entry as it stands (inside an attempt: with the attempt's writes)."""
        state = self._entry(key)
        context = self._attempt_on(key)
        measurement = state.measurement
        if context is not None and context.writes:
            measurement = apply_writes(measurement, context.writes)
        return _snapshot(state, measurement)

    def get_all_entries(self) -> dict[str, BlackboardEntry]:
        """Copies of every entry in the certify segment."""
        return dict(self.entries)

    def get_escalate(self) -> dict[str, BlackboardEntry]:
        """Copies of every entry in the escalate segment."""
        return dict(self.escalate)

    def get_escalation(self, key: str) -> Escalation | None:
        """The escalation of ``key``, if it was escalated by the controller."""
        state = self._entry(key)
        if state.escalation is None:
            return None
        report = EscalationReport.from_json(state.escalation["report"])
        snapshot = _snapshot(state, state.measurement)
        return Escalation(self.board_id, key, snapshot, report.source, report, state.escalation_seq)

    def get_resolution(self, key: str) -> Resolution | None:
        """The out-of-band resolution of ``key``, if a person resolved it."""
        resolution = self._entry(key).resolution
        return None if resolution is None else _resolution(resolution)

    def get_history(self, key: str | None = None) -> list[HistoryEvent]:
        """Every change on the board (or to one entry), from the board's log, in order."""
        events: list[HistoryEvent] = []
        for record in self._model.reader.log():
            kind = KINDS.get(record.region or "")
            if kind is None:
                continue
            content = record.content
            entry_key = content.get("key") if isinstance(content, dict) else None
            if key is not None and entry_key != key:
                continue
            data = copy_value(content) if isinstance(content, dict) else {"value": content}
            events.append(
                HistoryEvent(record.sequence, kind, entry_key, record.writer, data, record.at)
            )
        return events

    def digest(self) -> str:
        """The board digest: SHA-256 of the canonical JSON of the whole board."""
        return self._model.reader.digest()

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
        self._outside_attempt("resolve")
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
            self._emit(RESOLUTIONS, self._writer, content, idempotency_key or f"resolve/{key}")
        return self._resolved(state, content)

    def _resolved(self, state: EntryState, content: dict[str, Any]) -> Resolution:
        stored = self._state.entries[state.key].resolution
        if stored is None or any(stored.get(k) != v for k, v in content.items()):
            by = None if stored is None else stored.get("by")
            raise ResolutionError(
                state.key, f"it was already resolved differently (by {by!r}); a resolution is final"
            )
        return _resolution(stored)

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Commit every write made inside the block in one durable transaction.

        Writes are visible (``get_entry``) at once and durable when the block ends. If
        the block raises, none of them is written. Nested blocks join the outer one.
        """
        if self._pending is not None:
            yield
            return
        self._pending = []
        try:
            yield
        except BaseException:
            self._pending = None
            self._rebuild()
            raise
        pending, self._pending = self._pending, None
        if pending:
            self._commit(pending)

    def refresh(self) -> int:
        """Take in writes other processes made to the board; return how many there were."""
        return len(self._catch_up())

    def close(self) -> None:
        """Release the store if this blackboard opened it."""
        self._model.close()

    def __enter__(self) -> Blackboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Blackboard(board_id={self.board_id!r}, entries={len(self._state.entries)})"

    # -- what the controller uses ---------------------------------------------------------

    def _partition(self, source: str) -> KeysView[str]:
        partition = self._state.partitions.setdefault(source, {})
        if self._focus is None:
            return partition.keys()
        return {key: None for key in self._focus if key in partition}.keys()

    def _register_source(self, name: str, component: str | None) -> None:
        self._scopes[name] = component

    def _emit(self, region: str, writer: str, content: Any, key: str | None) -> None:
        """Apply a record to the projection now; commit it now or with the batch."""
        expected = self._state.cycle_version if region == CYCLE else 0
        self._state.apply(region, content)
        item = _Pending(region, writer, content, key, expected)
        if self._pending is not None:
            self._pending.append(item)
        else:
            self._commit([item])

    def _pending_count(self) -> int:
        return 0 if self._pending is None else len(self._pending)

    def _commit(self, items: list[_Pending]) -> bool:
        """Write ``items`` in one transaction; False if the board did not take them as decided."""
        proposals = [_proposal(item) for item in items]
        try:
            results = self._model.control.write_all(
                proposals, idempotency_keys=[item.key for item in items], fence=self._fence(items)
            )
        except BaseException:
            self._rebuild()
            raise
        causes = {r.cause for r in results if isinstance(r, Rejected)}
        if RejectionCause.RUN_CLOSED in causes:
            self._rebuild()
            outcome = self._model.reader.outcome()
            raise BoardClosedError(
                self.board_id,
                f"its run was closed ({outcome.status.value}: {outcome.reason!r}) at "
                f"sequence {outcome.sequence}",
            )
        if RejectionCause.CLAIM_LOST in causes:  # nothing landed; a worker drops its claims
            self._claim_lost = True
            self._rebuild()
            return False
        first = _landed(results)
        if first is None or not self._fold_before(first, items):
            _log.warning(
                "board %r did not take a batch as decided (%r); re-reading the board",
                self.board_id,
                [r for r in results if not isinstance(r, Written) or r.repeat][:1] or results[:1],
            )
            self._rebuild()
            return False
        self._state.head = first + len(items) - 1
        self._number(items, first)
        return True

    def _fence(self, items: list[_Pending]) -> Fence | None:
        """A worker's batch lands only while it still holds every entry the batch is about."""
        if self._holder is None:
            return None
        keys = frozenset(k for item in items if (k := _entry_key(item.content)) is not None)
        return Fence(self._holder, keys) if keys else None

    def _fold_before(self, first: int, items: list[_Pending]) -> bool:
        """Take in what other writers committed just before our batch, which landed at ``first``.

        Our batch is already in the projection; records of other entries commute with
        it (an entry's state depends on its own records only), so they are folded after
        it, and only they are read: the cost is theirs, not the board's. A record about
        an entry of our batch (a change made meanwhile by someone else) does not commute:
        False, and the caller re-reads the board.
        """
        if first == self._state.head + 1:
            return True
        if first <= self._state.head:
            return False  # the board is behind what this blackboard saw: re-read it
        foreign = self._model.reader.log(self._state.head, first - 1)
        ours = {_entry_key(item.content) for item in items} - {None}
        if any(_entry_key(r.content) in ours for r in foreign if r.region in KINDS):
            return False
        for record in foreign:
            if record.region in KINDS:
                self._state.apply(
                    record.region, record.content, record.sequence, record.version or 0
                )
        return True

    def _number(self, items: list[_Pending], first: int) -> None:
        """Give escalations and resolutions their sequence numbers once committed."""
        for offset, item in enumerate(items):
            if item.region == ESCALATIONS:
                self._state.entries[item.content["key"]].escalation_seq = first + offset
            elif item.region == RESOLUTIONS:
                entry = self._state.entries[item.content["key"]]
                entry.resolution = {**item.content, "sequence": first + offset}

    def _rebuild(self) -> None:
        state = Projection()
        for record in self._model.reader.log():
            if record.region in KINDS:
                state.apply(record.region, record.content, record.sequence, record.version or 0)
            state.head = record.sequence
        self._state = state

    def _catch_up(self) -> list[Any]:
        records = self._model.reader.log(self._state.head)
        for record in records:
            if record.region in KINDS:
                self._state.apply(
                    record.region, record.content, record.sequence, record.version or 0
                )
            self._state.head = record.sequence
        return list(records)

    def _judge(self, proposed: ProposedWrite) -> Accept | Reject:
        """Ask the admission rule ahead of the commit, as the kernel will (and wrap as it does)."""
        try:
            verdict = self._admit(proposed, self._model.reader)
        except Exception as exc:
            raise AdmissionRuleError(
                f"the admission rule raised {type(exc).__name__}: {exc}; nothing was written. "
                "A rule should return Reject('why') for writes it refuses"
            ) from exc
        if isinstance(verdict, Accept | Reject):
            return verdict
        raise AdmissionRuleError(
            f"the admission rule returned {verdict!r}; it must return Accept() or Reject('why')"
        )

    def _admit(self, proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        """The admission rule the kernel asks for every write (pybb's, then the user's)."""
        if isinstance(proposed, ProposedContribution) and proposed.writer.startswith("ks:"):
            refusal = self._scope_refusal(proposed)
            if refusal is not None:
                return Reject(refusal)
        elif _region_of(proposed) in KINDS:
            return Accept()  # pybb's own bookkeeping
        if self._user_rule is not None:
            return self._user_rule(proposed, reader)
        return Accept()

    def _scope_refusal(self, proposed: ProposedContribution) -> str | None:
        name = proposed.writer[3:]
        content = proposed.content
        if proposed.level != ATTEMPTS or not isinstance(content, dict):
            return f"knowledge source {name!r} may only write attempt records"
        if content.get("source") != name:
            return f"knowledge source {name!r} may not record an attempt of another source"
        if name not in self._scopes:
            return f"{name!r} is not a knowledge source registered with a controller"
        scope = self._scopes[name]
        for component, _ in content.get("writes", ()):
            if scope is not None and component != scope:
                what = "the whole measurement" if component is None else f"component {component!r}"
                return (
                    f"knowledge source {name!r} is scoped to component {scope!r} and may not "
                    f"write {what} of entry {content.get('key')!r}; write only "
                    f"write_component(key, {scope!r}, value)"
                )
        return None

    # -- helpers --------------------------------------------------------------------------

    def _entry(self, key: str) -> EntryState:
        state = self._state.entries.get(key) if isinstance(key, str) else None
        if state is None:
            raise EntryNotFoundError(key)
        return state

    def _attempt_on(self, key: str) -> AttemptContext | None:
        context = current_attempt()
        if context is None:
            return None
        if context.key != key:
            raise EntryError(
                key,
                f"knowledge source {context.source!r} is working on entry {context.key!r} "
                "and may write only that entry",
            )
        return context

    def _outside_attempt(self, what: str) -> None:
        context = current_attempt()
        if context is not None:
            raise SourceError(
                f"knowledge source {context.source!r} called {what}() during its attempt on "
                f"entry {context.key!r}; a source writes only its entry's measurement"
            )

    def _restore(self, key: str, component: str | None, writer: str) -> None:
        state = self._entry(key)
        if component is not None:
            check_component(state, component)
        value = state.original if component is None else state.original[component]
        context = self._attempt_on(key)
        if context is not None:
            context.write(component, value)
            return
        content: dict[str, Any] = {"key": key, "value": value}
        if component is not None:
            content["component"] = component
        self._emit(RESTORES, writer, content, None)

    def _write(self, state: EntryState, component: str | None, value: Any) -> None:
        context = self._attempt_on(state.key)
        if context is not None:
            context.write(component, value)
            return
        content: dict[str, Any] = {"key": state.key, "value": value}
        if component is not None:
            content["component"] = component
        self._emit(CHANGES, self._writer, content, None)


class _SegmentView(Mapping[str, BlackboardEntry]):
    """The entries of one segment, read lazily (each value a fresh copy)."""

    def __init__(self, board: Blackboard, segment: Segment) -> None:
        self._board = board
        self._segment = segment

    def __getitem__(self, key: str) -> BlackboardEntry:
        if key not in self._board._state.segments[self._segment]:
            raise KeyError(key)
        return self._board.get_entry(key)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._board._state.segments[self._segment]))

    def __len__(self) -> int:
        return len(self._board._state.segments[self._segment])

    def __contains__(self, key: object) -> bool:
        return key in self._board._state.segments[self._segment]


def _entry_key(content: Any) -> str | None:
    key = content.get("key") if isinstance(content, dict) else None
    return key if isinstance(key, str) else None


def _landed(results: list[WriteResult]) -> int | None:
    """The first sequence of a batch the board took whole and in order, else ``None``."""
    written = [r for r in results if isinstance(r, Written) and not r.repeat]
    if not results or len(written) != len(results):
        return None
    first = written[0].sequence
    if any(r.sequence != first + n for n, r in enumerate(written)):
        return None
    return first


def _region_of(proposed: ProposedWrite) -> str:
    if isinstance(proposed, ProposedContribution):
        return proposed.level
    return proposed.premise


def _proposal(item: _Pending) -> ProposedWrite:
    if item.region == CYCLE:
        return ProposedPremiseWrite(item.writer, CYCLE, item.content, item.expected_version)
    return ProposedContribution(item.writer, item.region, item.content)


def _snapshot(state: EntryState, measurement: Any) -> BlackboardEntry:
    return BlackboardEntry(
        predicate=state.predicate,
        conditions=None if state.conditions is None else dict(state.conditions),
        measurement=copy_value(measurement),
        result=copy_value(state.result),
        good_standing=state.good_standing,
        original_measurement=copy_value(state.original),
        ks_history=dict(state.ks_history),
        segment=state.segment,
        stage=state.stage,
        source=state.source,
        chain=state.chain_name,
    )


def _resolution(stored: Mapping[str, Any]) -> Resolution:
    return Resolution(
        stored["key"],
        stored["decision"],
        stored["by"],
        datetime.fromisoformat(stored["at"]),
        copy_value(stored.get("measurement")),
        stored.get("sequence", 0),
    )

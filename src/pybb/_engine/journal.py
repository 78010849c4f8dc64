"""The journal: the only writer of a pybb board, and the keeper of its projection.

Every change to an entry is a record. The journal applies each record to the projection
at once (so what the controller decides next sees it) and commits it now, or with the
batch it belongs to in one durable transaction. It fences a worker's batches on the
entries the worker holds, takes in what other processes wrote, and re-reads the board
when a batch did not land as decided. Nothing else writes pybb's records.

The blackboard (the seed's user API) writes through it, and so does the controller;
both read the projection only through :attr:`Journal.view`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, KeysView, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from blackboard import (
    Fence,
    Judged,
    Model,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    Record,
    Rejected,
    RejectionCause,
    WriteResult,
    Written,
)
from blackboard.frozen import builder
from pybb._engine.admission import PybbRule
from pybb._engine.projection import (
    CYCLE,
    ESCALATIONS,
    KINDS,
    RESOLUTIONS,
    Projection,
    View,
    base_key,
)
from pybb.errors import BoardClosedError

__all__ = ["EntryCheck", "Journal", "Pending"]

_log = logging.getLogger("pybb")

# ``Pending(proposal, key)`` without the named tuple's ``__new__`` (a Python frame): one
# per record.
_pending = tuple.__new__

contribution = builder(ProposedContribution)
"""``ProposedContribution(writer, level, content)`` at a plain object's cost (``frozen``):
nearly every record pybb writes is one."""

EntryCheck = Callable[[str, str | None, Any], None]
"""A check of a new entry (key, predicate, conditions) before it is written; raises to refuse."""


class Pending(NamedTuple):
    """A record decided but not yet committed: what ``write_all`` takes, and its key.

    ``proposal`` is built when the record is decided (with the rule's verdict, if it
    was asked: a ``Judged``), so a batch holds one object per record, not two.
    """

    proposal: ProposedWrite | Judged
    key: str | None

    @property
    def region(self) -> str:
        """The record's region."""
        return _region(self.proposal)

    @property
    def content(self) -> Any:
        """The record's content (a premise's value)."""
        return _content(self.proposal)

    @property
    def writer(self) -> str:
        """Who writes the record."""
        proposal = self.proposal
        return (proposal.proposed if isinstance(proposal, Judged) else proposal).writer


class Journal:
    """Records, batches, commits, fences and takes in other processes' writes.

    Args:
        model: The kernel run of the board (its rule must be ``rule``).
        board_id: The board in the store.
        rule: pybb's admission rule, which also judges attempts ahead of their commit.

    Attributes:
        model: The kernel run.
        board_id: The board.
        rule: The board's admission rule.
        holder: The worker whose claims fence every batch (``None``: not a worker).
        entry_checks: Checks a new entry must pass before it is written (each attached
            controller adds its route check).
    """

    def __init__(self, model: Model, board_id: str, rule: PybbRule) -> None:
        self.model = model
        self.board_id = board_id
        self.rule = rule
        self.holder: str | None = None
        self.entry_checks: list[EntryCheck] = []
        self._state = Projection()
        self._pending: list[Pending] | None = None
        self._flushed = 0
        self._focus: dict[str, None] | None = None
        self._claim_lost = False
        # Escalations and resolutions emitted since the last commit: only a commit that
        # holds one has sequence numbers to hand out (``_number``), so the others (W1:
        # most of them) need not look at each of their records again.
        self._to_number = 0
        self._rebuild()

    # -- reading ----------------------------------------------------------------------

    _projection: Projection
    view: View
    """The projection, read-only: every entry's state and the work queues.

    An attribute, kept by :attr:`_state`'s setter, not a property: it is read several
    times per entry and a property's call cost as much as the rest of the read.
    """

    @property
    def _state(self) -> Projection:
        """The projection, as this journal (and a subclass re-reading the board) changes it."""
        return self._projection

    @_state.setter
    def _state(self, state: Projection) -> None:
        self._projection = state
        self.view = state

    @property
    def focus(self) -> dict[str, None] | None:
        """The entries a worker's controller may work on now (``None``: all of them)."""
        return self._focus

    @property
    def pending(self) -> int:
        """How many records the open batch holds (not yet committed)."""
        return 0 if self._pending is None else len(self._pending)

    @property
    def batching(self) -> bool:
        """Whether a batch is open (a new ``batch()`` block would join it)."""
        return self._pending is not None

    @property
    def decided(self) -> int:
        """How many records the open batch decided: those it holds and those it flushed."""
        return self._flushed + self.pending

    def partition(self, source: str) -> KeysView[str]:
        """The keys placed on ``source`` (within the focus, on a worker)."""
        partition = self._projection.partitions.get(source, {})
        if self._focus is None:
            return partition.keys()
        return {key: None for key in self._focus if key in partition}.keys()

    @contextmanager
    def focused(self, keys: dict[str, None] | None) -> Iterator[None]:
        """Narrow the controller's work to ``keys`` for the block (a worker's claims)."""
        before, self._focus = self._focus, keys
        try:
            yield
        finally:
            self._focus = before

    def take_interrupted(self) -> tuple[str | None, dict[str, str]]:
        """The committed attempts since the board's last cycle record, once; then forgotten.

        Returns the source of the last of them (``None``: there are none) and each
        attempted entry's source: where a cycle that committed part of its work and was
        cut short (a crash, an error) had got to (docs/adr/0020).
        """
        state = self._projection
        taken = state.interrupted_source, state.interrupted
        state.interrupted, state.interrupted_source = {}, None
        return taken

    def take_claim_lost(self) -> bool:
        """Whether a fenced batch was refused since last asked (a claim was taken over)."""
        lost, self._claim_lost = self._claim_lost, False
        return lost

    # -- writing ----------------------------------------------------------------------

    def emit(
        self, region: str, writer: str, content: Any, key: str | None, judged: Judged | None = None
    ) -> None:
        """Apply a record to the projection now; commit it now or with the batch.

        ``judged`` is the rule's verdict on this very record (:meth:`judge`), which the
        commit keeps instead of asking the rule again. A negative control may replace
        this method (tests subclass it): every record is written through it.
        """
        proposal: ProposedWrite | Judged
        if judged is not None:
            proposal = judged
        elif region == CYCLE:
            proposal = ProposedPremiseWrite(writer, CYCLE, content, self._projection.cycle_version)
        else:
            proposal = contribution(writer, region, content)
        self._projection.apply(region, content)
        if region in (ESCALATIONS, RESOLUTIONS):
            self._to_number += 1
        item = _pending(Pending, (proposal, key))
        if self._pending is not None:
            self._pending.append(item)
        else:
            self._commit([item])

    def check_new_entry(self, content: Mapping[str, Any]) -> None:
        """Put a new entry's record to every :attr:`entry_checks` (certify segment only)."""
        if content["segment"] == "certify":
            for check in self.entry_checks:
                check(content["key"], content.get("predicate"), content.get("conditions"))

    def judge(self, proposed: ProposedWrite) -> Judged:
        """The board rule's verdict on ``proposed``, reached once: the commit keeps it."""
        return self.model.control.judge(proposed)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Commit every record emitted inside the block in one durable transaction.

        If the block raises, none of them is written and the projection is re-read.
        Nested blocks join the outer one.
        """
        if self._pending is not None:
            yield
            return
        self._pending = []
        self._flushed = 0
        with _collector_paused():
            try:
                yield
            except BaseException:
                self._pending = None
                self._rebuild()
                raise
            pending, self._pending = self._pending, None
            if pending:
                self._commit(pending)

    def flush(self) -> bool:
        """Commit the open batch's records now, in one transaction; the batch goes on.

        For a controller cycle too big to hold until its end (``Controller``'s
        ``commit_every``, docs/adr/0020). If the block raises later, what was flushed
        stays written. False: the board did not take them as decided and the projection
        was re-read; the caller must end the batch (its decisions rest on the old one).
        """
        if not self._pending:
            return True
        pending, self._pending = self._pending, []
        landed = self._commit(pending)
        self._flushed += len(pending)
        return landed

    def record(self, sequence: int) -> Record | None:
        """The board's record at ``sequence``, read back from the store (None: not there)."""
        records = self.model.reader.log(sequence - 1, sequence)
        return records[0] if records else None

    def catch_up(self) -> list[Record]:
        """Fold the records other processes wrote since this journal last read."""
        return self._catch_up()

    # -- what a negative control may replace (tests subclass these) ----------------------

    def _commit(self, items: list[Pending]) -> bool:
        """Write ``items`` in one transaction; False if the board did not take them as decided."""
        proposals, keys = _columns(items)
        try:
            results = self.model.control.write_all(
                proposals, idempotency_keys=keys, fence=self._fence(items)
            )
        except BaseException:
            self._rebuild()
            raise
        first = _landed(results)
        if first is not None and first == self._projection.head + 1:
            # The common case, in one pass over the results: all of it landed, in order,
            # right after what this journal saw (nothing was refused, nothing to fold).
            self._projection.head = first + len(items) - 1
            self._number(items, first)
            return True
        causes = {r.cause for r in results if isinstance(r, Rejected)}
        if RejectionCause.RUN_CLOSED in causes:
            self._rebuild()
            outcome = self.model.reader.outcome()
            raise BoardClosedError(
                self.board_id,
                f"its run was closed ({outcome.status.value}: {outcome.reason!r}) at "
                f"sequence {outcome.sequence}",
            )
        if RejectionCause.CLAIM_LOST in causes:  # nothing landed; a worker drops its claims
            self._claim_lost = True
            self._rebuild()
            return False
        if first is None or not self._fold_before(first, items):
            _log.warning(
                "board %r did not take a batch as decided (%r); re-reading the board",
                self.board_id,
                [r for r in results if not isinstance(r, Written) or r.repeat][:1] or results[:1],
            )
            self._rebuild()
            return False
        self._projection.head = first + len(items) - 1
        self._number(items, first)
        return True

    def _rebuild(self) -> None:
        self._to_number = 0
        state = Projection()
        for record in self.model.reader.log():
            if record.region in KINDS:
                state.apply(record.region, record.content, record.sequence, record.version or 0)
            state.head = record.sequence
        self._state = state

    def _catch_up(self) -> list[Record]:
        records = self.model.reader.log(self._projection.head)
        for record in records:
            if record.region in KINDS:
                self._projection.apply(
                    record.region, record.content, record.sequence, record.version or 0
                )
            self._projection.head = record.sequence
        return list(records)

    # -- the commit's steps -------------------------------------------------------------

    def _fence(self, items: list[Pending]) -> Fence | None:
        """A worker's batch lands only while it still holds every entry the batch is about."""
        if self.holder is None:
            return None
        keys = frozenset(k for item in items if (k := entry_key(item.content)) is not None)
        return Fence(self.holder, keys) if keys else None

    def _fold_before(self, first: int, items: list[Pending]) -> bool:
        """Take in what other writers committed just before our batch, which landed at ``first``.

        Our batch is already in the projection; records of other entries commute with
        it (an entry's state depends on its own records only), so they are folded after
        it, and only they are read: the cost is theirs, not the board's. A record about
        an entry of our batch (a change made meanwhile by someone else) does not commute:
        False, and the caller re-reads the board.
        """
        if first == self._projection.head + 1:
            return True
        if first <= self._projection.head:
            return False  # the board is behind what this journal saw: re-read it
        foreign = self.model.reader.log(self._projection.head, first - 1)
        ours = {entry_key(item.content) for item in items} - {None}
        if any(entry_key(r.content) in ours for r in foreign if r.region in KINDS):
            return False
        for record in foreign:
            if record.region in KINDS:
                self._projection.apply(
                    record.region, record.content, record.sequence, record.version or 0
                )
        return True

    def _number(self, items: list[Pending], first: int) -> None:
        """Give escalations and resolutions their sequence numbers once committed."""
        # Every commit takes all that was emitted since the one before (or nothing lands
        # and the projection is re-read), so none held here means none among ``items``.
        if not self._to_number:
            return
        self._to_number = 0
        for offset, (proposal, _) in enumerate(items):
            if isinstance(proposal, Judged):
                proposal = proposal.proposed
            if not isinstance(proposal, ProposedContribution):
                continue
            if proposal.level == ESCALATIONS:
                escalated = self._projection.entries[base_key(proposal.content["key"])]
                escalated.escalation_seq = first + offset
                escalated.escalation = None  # the board holds it now (``record``)
            elif proposal.level == RESOLUTIONS:
                entry = self._projection.entries[base_key(proposal.content["key"])]
                entry.resolution = {**proposal.content, "sequence": first + offset}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector for one batch (if it runs at all).

    A batch (a controller cycle, ``write_entries``) allocates a few objects per record
    and frees them by reference counting; what it keeps is the projection, which grows
    with the board. Left on, the collector walks that whole projection again and again
    during a batch (its oldest generation is scanned in proportion to everything
    alive): 40-60 % of a cycle's time on W1. Paused, a batch's cyclic garbage (there is
    little) waits for the batch's end. The collector is process-wide, so other threads'
    cycles wait too, for one batch.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_log = logging.getLogger("pybb")


def entry_key(content: Any) -> str | None:
    """The entry a record is about, if it names one (whatever generation of it)."""
    key = content.get("key") if isinstance(content, dict) else None
    return base_key(key) if isinstance(key, str) else None


def _columns(items: list[Pending]) -> tuple[list[ProposedWrite | Judged], list[str | None]]:
    """The proposals and the idempotency keys of ``items``, as ``write_all`` takes them."""
    if not items:
        return [], []
    proposals, keys = zip(*items, strict=True)
    return list(proposals), list(keys)


def _landed(results: list[WriteResult]) -> int | None:
    """The first sequence of a batch the board took whole and in order, else ``None``."""
    if not results:
        return None
    first = None
    expected = 0
    for result in results:
        if not isinstance(result, Written):
            return None
        if result.repeat:
            return None
        if first is None:
            first = expected = result.sequence
        elif result.sequence != expected:
            return None
        expected += 1
    return first


def _region(proposal: ProposedWrite | Judged) -> str:
    if isinstance(proposal, Judged):
        proposal = proposal.proposed
    return proposal.level if isinstance(proposal, ProposedContribution) else proposal.premise


def _content(proposal: ProposedWrite | Judged) -> Any:
    if isinstance(proposal, Judged):
        proposal = proposal.proposed
    return proposal.content if isinstance(proposal, ProposedContribution) else proposal.value

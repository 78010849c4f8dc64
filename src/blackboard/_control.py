"""The control component: the board's single write path.

In order: region checks (raised), closed run, agent permission, the application's
admission rule (run without the lock), then, inside the store's admitting transaction,
the premise version, uniqueness, the next sequence number and the append; last, outside
any lock, the agents concerned are notified in sequence order. A write carrying an
idempotency key already on the board is settled first of all: it returns the first
``Written`` (``repeat=True``) before the closed-run, permission and rule checks.
``judge()`` runs the rule ahead of the write; a :class:`Judged` proposal handed to
``write_all()`` keeps that verdict, so the rule runs once per write
(docs/adr/0010-a-write-is-judged-once.md).

Who is notified (docs/adr/0008-who-is-notified.md): a contribution or premise value
goes to the agents subscribed to its region; a grant or revoke goes to the agent it
names, delivered when it commits; the close goes to nobody.
"""

from __future__ import annotations

import hashlib
import logging
import operator
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from blackboard._claims import Claim, Fence, check_holder, check_lease, key_list
from blackboard._json import encode, encode_decoded, is_utf8
from blackboard._reader import BoardReader
from blackboard._records import Notification, Outcome, Record, RecordKind, RunStatus
from blackboard._regions import Agent, Level, Premise, Region
from blackboard._writes import (
    Accept,
    AdmissionRule,
    Conflict,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    Reject,
    Rejected,
    RejectionCause,
    WriteResult,
    Written,
    new_written,
)
from blackboard.errors import (
    AdmissionRuleError,
    ContentError,
    IdempotencyKeyError,
    RegionKindError,
    StoreError,
    UndeclaredRegionError,
    WriterError,
)
from blackboard.faults import fault_point
from blackboard.frozen import builder
from blackboard.stores import (
    Appended,
    AppendOutcome,
    ClaimLost,
    Closed,
    Duplicate,
    Forbidden,
    PendingWrite,
    Repeated,
    Store,
    VersionConflict,
)
from blackboard.stores._base import fingerprint, new_pending

__all__ = [
    "BOARD_WRITER",
    "DEFAULT_MAX_CONTENT_BYTES",
    "Control",
    "Judged",
    "TerminationPredicate",
]

BOARD_WRITER = "@board"
"""The writer name of the board's own writes (opening values, grants, closing)."""

TerminationPredicate = Callable[[BoardReader], bool]

_MAX_VERSION = 2**62
DEFAULT_MAX_CONTENT_BYTES = 1 << 20
"""The default cap on one contribution's or premise value's canonical JSON (1 MiB)."""
_COMPLETE = "the termination predicate says the run is complete"
_ACCEPT = Accept()  # frozen and field-less: one instance serves every rule-less write
_LEVEL, _PREMISE = RecordKind.LEVEL, RecordKind.PREMISE
_GRANT, _REVOKE = RecordKind.GRANT, RecordKind.REVOKE
_OPEN = RunStatus.OPEN
_OPEN_OUTCOME = Outcome(_OPEN)  # what a write assumes when its store checks the run itself
_NO_KEYS: Mapping[str, tuple[Record, str]] = {}  # never written to: "no key was found"
_log = logging.getLogger("blackboard")


@dataclass(frozen=True, slots=True)
class Judged:
    """A proposed write with the admission rule's verdict on it, from :meth:`Control.judge`.

    Hand it to ``write_all()`` in place of the proposal: the write is admitted or
    refused on ``verdict`` without running the rule again; every other check (a repeated
    idempotency key, the closed run, permissions, uniqueness, the premise version, the
    fence) still runs, the last of them inside the store's transaction.

    Attributes:
        proposed: The proposal judged; ``write_all()`` writes it as it is then, so do not
            change its content in between (the rule would not have seen the change).
        verdict: ``Accept()`` or ``Reject(reason)``, as the rule answered.
        judged_by: The control that judged it; only that control takes it.
    """

    proposed: ProposedWrite
    verdict: Accept | Reject
    judged_by: Control = field(repr=False, compare=False)


_new_judged: Callable[[ProposedWrite, Accept | Reject, Control], Judged] = builder(Judged)
"""``Judged(...)`` at a plain object's cost (``blackboard.frozen``): one per attempt judged."""


class Control:
    """Admits, sequences and announces every write to one board."""

    def __init__(
        self,
        store: Store,
        board_id: str,
        regions: Mapping[str, Region],
        agents: Mapping[str, Agent],
        reader: BoardReader,
        *,
        admission_rule: AdmissionRule | None = None,
        termination_predicate: TerminationPredicate | None = None,
        agents_only: bool = False,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    ) -> None:
        self._store = store
        self.board_id = board_id
        self._regions = regions
        self._agents = agents
        self._reader = reader
        self._rule = admission_rule
        self._done = termination_predicate
        self._agents_only = agents_only
        self._max_bytes = max_content_bytes
        # A plain Level's name -> the level and how a ContentError names its content:
        # built once per level, one look-up per write.
        self._plain_levels: dict[str, tuple[Level, str]] = {}
        # Writer names already found valid (exact str only, so no subclass can answer
        # the look-up its own way); bounded, so that endless distinct names cost no memory.
        self._valid_writers: set[str] = set()
        # Only agents that can be told anything: one without notify is never queued.
        self._subscribers: dict[str, list[Agent]] = {}
        for agent in agents.values():
            if agent.notify is not None:
                for region in agent.subscribes_to:
                    self._subscribers.setdefault(region, []).append(agent)
        # Any agent with notify may be granted or revoked, subscribed or not. With none,
        # the queue stays empty, so writes skip it (a hot-path saving).
        self._notifying = any(a.notify is not None for a in agents.values())
        self._lock = threading.Lock()
        self._queue: deque[tuple[Agent, Record]] = deque()
        self._queue_lock = threading.Lock()
        self._delivering = False

    # -- public writes -------------------------------------------------------------

    def write(
        self, writer: str, level: str, content: Any, *, idempotency_key: str | None = None
    ) -> Written | Rejected:
        """Propose a contribution to a level.

        Returns:
            ``Written(sequence)`` when admitted, else ``Rejected(cause, reason)``.

        Raises:
            UndeclaredRegionError, RegionKindError, ContentError, WriterError,
            IdempotencyKeyError, AdmissionRuleError, StoreError: nothing was written.
        """
        result = self._write_one(_LEVEL, writer, level, content, None, idempotency_key)
        assert not isinstance(result, Conflict)  # a level write cannot conflict
        return result

    def set_premise(
        self,
        writer: str,
        premise: str,
        value: Any,
        *,
        expected_version: int,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        """Compare-and-set a premise: it lands only if the premise is at ``expected_version``.

        Returns:
            ``Written(sequence, version)``, ``Conflict(current_version)`` or ``Rejected``.
        """
        return self._write_one(_PREMISE, writer, premise, value, expected_version, idempotency_key)

    def judge(self, proposed: ProposedWrite) -> Judged:
        """Put ``proposed`` to the admission rule now, as the write path would.

        The writer's name and the region are checked first (raised as a write would
        raise them); the content is checked when the write is made. Without a rule the
        verdict is ``Accept()``. Pass the result to :meth:`write_all` to write it on that
        verdict, without the rule running again (docs/adr/0010-a-write-is-judged-once.md).

        Returns:
            The proposal with its verdict.

        Raises:
            ContentError: ``proposed`` is not a ProposedContribution or ProposedPremiseWrite.
            UndeclaredRegionError, RegionKindError, WriterError: it cannot be written.
            AdmissionRuleError: The rule raised, or answered neither Accept nor Reject.
        """
        if isinstance(proposed, ProposedContribution):
            level = proposed.level
            if type(level) is str and level in self._plain_levels:  # checked before
                region = None
            else:
                region = level, "level"
        elif isinstance(proposed, ProposedPremiseWrite):
            region = proposed.premise, "premise"
        else:
            raise _not_a_proposal(proposed)
        writer = proposed.writer
        if type(writer) is not str or writer not in self._valid_writers:  # as a write checks
            self._check_writer(writer)
        if region is not None:
            self._region(*region)
        return _new_judged(proposed, self._judge(proposed), self)

    def write_all(
        self,
        proposals: Sequence[ProposedWrite | Judged],
        *,
        idempotency_keys: Sequence[str | None] | None = None,
        fence: Fence | None = None,
    ) -> list[WriteResult]:
        """Propose several writes and commit the admitted ones in one transaction.

        Each proposal is judged as if written alone, in order (group commit: one durable
        transaction for the batch); a :class:`Judged` one keeps the verdict
        :meth:`judge` gave it. If any raises, nothing of the batch is written.
        With a ``fence``, the batch lands only if its holder still holds every fenced
        claim when it commits; else every write is ``Rejected`` with ``CLAIM_LOST``.

        Raises:
            ContentError: A proposal is neither a proposed write nor a Judged of this
                control's, or ``idempotency_keys`` or ``fence`` is unusable.
        """
        keys = list(idempotency_keys) if idempotency_keys is not None else [None] * len(proposals)
        if len(keys) != len(proposals):
            raise ContentError("idempotency_keys", "must have one key (or None) per proposal")
        if fence is not None and not isinstance(fence, Fence):
            raise ContentError("fence", f"must be a blackboard.Fence, not {fence!r:.80}")
        writes, results = self._prepare_all(proposals, keys)
        if results is None:  # nothing settled early: every write goes to the store
            appended = self._append(writes, fence) if writes else []
            done: list[WriteResult] = [
                new_written(o.record.sequence, o.record.version, False)
                if type(o) is Appended  # the common case, without _result's call
                else _result(w, o)
                for w, o in zip(writes, appended, strict=True)
            ]
            if appended:
                self._after_append(appended)
            return done
        # Indexes, not (index, write) pairs: a big batch's tuples would all live until it
        # commits, and every one is an object for the cyclic GC to walk.
        admitted = [i for i, early in enumerate(results) if early is None]
        if admitted:
            appended = self._append([writes[i] for i in admitted], fence)
            for index, outcome in zip(admitted, appended, strict=True):
                if type(outcome) is Appended:  # the common case, without _result's call
                    record = outcome.record
                    results[index] = new_written(record.sequence, record.version, False)
                else:
                    results[index] = _result(writes[index], outcome)
            self._after_append(appended)
        return [r for r in results if r is not None]

    def _write_one(
        self,
        kind: RecordKind,
        writer: str,
        region: str,
        value: Any,
        expected_version: Any,
        key: str | None,
    ) -> WriteResult:
        """``write_all([proposal])[0]`` without the batch bookkeeping: the hot path."""
        if kind is _LEVEL:
            write = self._contribution(writer, region, value, key)
        else:
            write = self._premise_write(writer, region, value, expected_version, key)
        store = self._store
        # Unless a rule, a key, a grant or the store's wish for a read ahead could settle
        # the write before the transaction, _early would answer None: it is not asked.
        if (
            self._rule is not None
            or key is not None
            or write.check_permission
            or store.reads_run_state_ahead
        ):
            early = self._early(kind, write, writer, region, value, expected_version)
            if early is not None:
                return early
        appended = self._append([write])
        outcome = appended[0]
        if type(outcome) is Appended:  # the common case, without _result's call
            record = outcome.record
            result: WriteResult = new_written(record.sequence, record.version, False)
        else:
            result = _result(write, outcome)
        if self._notifying or self._done is not None:
            self._after_append(appended)
        return result

    def _early(
        self,
        kind: RecordKind,
        write: PendingWrite,
        writer: str,
        region: str,
        value: Any,
        expected_version: Any,
    ) -> WriteResult | None:
        """A single write's result if a check before the transaction settles it, else None.

        The proposal the admission rule sees is built only when there is a rule.
        """
        proposed: ProposedWrite | None = None
        if self._rule is not None:
            proposed = (
                ProposedContribution(writer, region, value)
                if kind is _LEVEL
                else ProposedPremiseWrite(writer, region, value, expected_version)
            )
        # The run state is read even when only a closed run could settle the write early
        # (no rule, no key, no grant), although the transaction checks it again. Skipping
        # it saved 3 % on the memory board, but on SQLite this read outside the write lock
        # gives other processes their turn at the lock between one writer's transactions:
        # without it, test_multiproc_sequence's close race saw one of 8 writers finish all
        # its writes before the close in 1 run of 4 (with it: 5 of 5 clean). A store
        # where it only costs (PostgreSQL: a round trip per write) says so, and is spared.
        store, key = self._store, write.idempotency_key
        found = store.find_keys(self.board_id, [key]) if key is not None else _NO_KEYS
        outcome = (
            store.outcome(self.board_id)
            if proposed is not None or write.check_permission or store.reads_run_state_ahead
            else _OPEN_OUTCOME
        )
        return self._prepare(proposed, write, found, outcome, {})

    def grant(self, agent: str, region: str) -> Written | Rejected:
        """Allow a registered agent to write ``region`` from the next sequence on."""
        return self._permission(RecordKind.GRANT, agent, region)

    def revoke(self, agent: str, region: str) -> Written | Rejected:
        """Withdraw a registered agent's permission; no later write of its to ``region`` lands."""
        return self._permission(RecordKind.REVOKE, agent, region)

    def abort(self, reason: str) -> Outcome:
        """Close the run as aborted (a no-op returning the outcome if it is already closed)."""
        return self._close(RunStatus.ABORTED, reason)

    def complete(self, reason: str = "complete") -> Outcome:
        """Close the run as completed, as a termination predicate would."""
        return self._close(RunStatus.COMPLETED, reason)

    def quiesce(self, reason: str = "nothing is left to do") -> Outcome:
        """Close the run as quiescent (no agent has anything left to do), as ``Model.run()`` does.

        A no-op returning the outcome if the run is already closed.
        """
        return self._close(RunStatus.QUIESCENT, reason)

    def outcome(self) -> Outcome:
        """Whether the run is open, or how it closed."""
        return self._store.outcome(self.board_id)

    # -- leased claims -----------------------------------------------------------------

    def claim(
        self, holder: str, keys: Sequence[str], *, lease: timedelta, limit: int | None = None
    ) -> list[Claim]:
        """Claim up to ``limit`` of ``keys``, in their order, for ``lease``.

        A key is taken if no one holds it, its holder's lease lapsed, or ``holder`` holds
        it already (renewed). Keys another holder has, or is taking right now, are
        skipped, never waited for: many workers claim from one list of candidates and
        each gets different keys. Claims are not records: they take no sequence number.

        Returns:
            The claims taken, in the order of ``keys``.

        Raises:
            ContentError: A holder, key, lease or limit that cannot be used.
            StoreError: The store failed; nothing was claimed.
        """
        wanted, lease, limit = _claim_arguments(holder, keys, lease, limit)
        if not wanted or limit == 0:
            return []
        return self._store.claim(self.board_id, holder, wanted, limit, lease)

    def renew(self, holder: str, keys: Sequence[str], *, lease: timedelta) -> list[Claim]:
        """Extend ``holder``'s claims on ``keys`` to ``lease`` from now (a heartbeat).

        Returns:
            The claims renewed; a key missing from them was taken over or released.
        """
        check_holder(holder)
        wanted = key_list(keys)
        lease = check_lease(lease)
        return self._store.renew(self.board_id, holder, wanted, lease) if wanted else []

    def release(self, holder: str, keys: Sequence[str]) -> int:
        """Give up ``holder``'s claims on ``keys`` at once; return how many it held."""
        check_holder(holder)
        wanted = key_list(keys)
        return self._store.release(self.board_id, holder, wanted) if wanted else 0

    def release_and_claim(
        self,
        holder: str,
        released: Sequence[str],
        keys: Sequence[str],
        *,
        lease: timedelta,
        limit: int | None = None,
    ) -> tuple[int, list[Claim]]:
        """:meth:`release` ``released``, then :meth:`claim` ``keys``: one trip where the store can.

        A worker gives back the entries that settled and takes new ones in one
        transaction on PostgreSQL; elsewhere it is the two calls in turn.

        Returns:
            How many of ``released`` ``holder`` held, and the claims taken (in the
            order of ``keys``).

        Raises:
            ContentError: A holder, key, lease or limit that cannot be used.
            StoreError: The store failed.
        """
        wanted, lease, limit = _claim_arguments(holder, keys, lease, limit)
        freed = key_list(released)
        if not wanted or limit == 0:
            return self.release(holder, freed), []
        return self._store.release_and_claim(self.board_id, holder, freed, wanted, limit, lease)

    # -- the write path ------------------------------------------------------------

    def _prepare_all(
        self, proposals: Sequence[ProposedWrite | Judged], keys: Sequence[str | None]
    ) -> tuple[list[PendingWrite], list[WriteResult | None] | None]:
        """Run every check that needs no lock: the writes, and per write an early result or None.

        The store is asked once per batch (keys, run state, grants), not once per write.
        The early results are ``None`` as a whole when no check could settle any write (no
        rule, no verdict, no key found, an open run, no grant to check).
        """
        verdict_of = self._verdict_of
        verdicts = [verdict_of(p) if isinstance(p, Judged) else None for p in proposals]
        plain = [p.proposed if isinstance(p, Judged) else p for p in proposals]
        contribution, pending = self._contribution, self._pending
        writes = [
            contribution(p.writer, p.level, p.content, k)
            if type(p) is ProposedContribution  # the common case, without _pending's call
            else pending(p, k)
            for p, k in zip(plain, keys, strict=True)
        ]
        store = self._store
        # Counted in C: a generator here resumed a Python frame per write.
        judged = verdicts.count(None) != len(verdicts)
        guarded = any(map(_CHECKS_PERMISSION, writes))
        # As for a single write: read ahead only where it settles something (see there).
        ahead = store.reads_run_state_ahead or self._rule is not None or judged or guarded
        # Keys and run state in one call (on PostgreSQL also the append's plan). A keyed
        # batch reads its keys either way; the run state it then reads too is one more
        # early answer (a closed run), the same one the transaction would give.
        found: Mapping[str, tuple[Record, str]] = _NO_KEYS
        outcome = _OPEN_OUTCOME
        if ahead or any(k is not None for k in keys):
            found, outcome = store.read_ahead(self.board_id, writes)
        if (
            not found
            and outcome.status is _OPEN
            and self._rule is None
            and not judged
            and not guarded
        ):
            return writes, None  # what _prepare would answer for each: None
        grants: dict[tuple[str, str], bool] = {}
        prepare = self._prepare
        early = [
            prepare(proposed, write, found, outcome, grants, verdict)
            for proposed, write, verdict in zip(plain, writes, verdicts, strict=True)
        ]
        # Nothing settled early (the common case): write_all then skips its bookkeeping of
        # which writes go on.
        return writes, early if any(early) else None

    def _verdict_of(self, proposal: ProposedWrite | Judged) -> Accept | Reject | None:
        """The verdict a Judged proposal carries (``None``: judge it when written)."""
        if not isinstance(proposal, Judged):
            return None
        if proposal.judged_by is not self:
            raise ContentError(
                "proposal",
                f"{proposal.proposed!r:.80} was judged by another board's control; judge it "
                "with this board's control.judge(), or pass the proposal itself",
            )
        return proposal.verdict

    def _prepare(
        self,
        proposed: ProposedWrite | None,
        write: PendingWrite,
        found: Mapping[str, tuple[Record, str]],
        outcome: Outcome,
        grants: dict[tuple[str, str], bool],
        verdict: Accept | Reject | None = None,
    ) -> WriteResult | None:
        """The write's result if a check before the transaction settles it, else ``None``.

        ``verdict`` is the rule's answer already reached by :meth:`judge`; ``None``: ask now.
        """
        key = write.idempotency_key
        if key is not None and key in found:
            return _repeat(write, key, found[key])
        if outcome.status is not _OPEN:  # outcome.closed, without the property's call
            return _closed(outcome.sequence or 0)
        if write.check_permission and not self._permitted(write, grants):
            return self._not_permitted(write.writer, write.region or "")
        if verdict is None:
            verdict = self._judge(proposed)
        if isinstance(verdict, Reject):
            return Rejected(RejectionCause.ADMISSION, verdict.reason)
        return None

    def _permitted(self, write: PendingWrite, grants: dict[tuple[str, str], bool]) -> bool:
        pair = (write.writer, write.region or "")
        if pair not in grants:
            grants[pair] = self._store.permitted(self.board_id, *pair)
        return grants[pair]

    def _pending(self, proposed: ProposedWrite, key: str | None) -> PendingWrite:
        if isinstance(proposed, ProposedContribution):
            return self._contribution(proposed.writer, proposed.level, proposed.content, key)
        if isinstance(proposed, ProposedPremiseWrite):
            return self._premise_write(
                proposed.writer, proposed.premise, proposed.value, proposed.expected_version, key
            )
        raise _not_a_proposal(proposed)

    def _contribution(self, writer: str, name: str, content: Any, key: str | None) -> PendingWrite:
        if type(writer) is not str or writer not in self._valid_writers:
            self._check_writer(writer)
        # An ASCII key within the bounds is valid (``_check_key`` says so at twice the cost).
        if key is not None and not (type(key) is str and key.isascii() and 0 < len(key) <= 256):
            _check_key(key)
        found = self._plain_levels.get(name) if type(name) is str else None
        if found is None:
            found = self._plain_level(name)
        level, what = found
        payload, decoded = self._encode(content, what)
        unique = None if level.unique is False else _unique_key(level, content, payload)
        return new_pending(
            _LEVEL, level.name, writer, payload, None, unique, key, self._guarded(writer), decoded
        )

    def _check_writer(self, writer: object) -> None:
        _check_writer(writer)
        if type(writer) is str and len(self._valid_writers) < 4096:
            self._valid_writers.add(writer)

    def _plain_level(self, name: object) -> tuple[Level, str]:
        region = self._region(name, "level")  # raises unless it is a level
        assert isinstance(region, Level)
        found = (region, f"content for level {region.name!r}")
        if type(region) is Level and type(name) is str:
            # A plain Level is the common case: its kind needs no asking next time.
            self._plain_levels[name] = found
        return found

    def _premise_write(
        self, writer: str, name: str, value: Any, expected_version: Any, key: str | None
    ) -> PendingWrite:
        if type(writer) is not str or writer not in self._valid_writers:
            self._check_writer(writer)
        _check_key(key)
        premise = self._region(name, "premise")
        assert isinstance(premise, Premise)
        _check_version(expected_version)
        payload, decoded = self._encode(value, f"value for premise {premise.name!r}")
        return new_pending(
            _PREMISE,
            premise.name,
            writer,
            payload,
            expected_version,
            None,
            key,
            premise.guarded and self._guarded(writer),
            decoded,
        )

    def _encode(self, value: Any, what: str) -> tuple[str, Any]:
        """The canonical text, checked against the cap, and its decoded copy if at hand.

        The copy (``UNDECODED`` if none) spares the store decoding the text again; it is
        the value's own, so a writer changing ``value`` afterwards changes nothing stored.
        """
        text, decoded = encode_decoded(value, what)
        # len() counts characters, a lower bound of the UTF-8 size: encode only when close.
        if len(text) * 4 > self._max_bytes and len(text.encode()) > self._max_bytes:
            raise ContentError(
                what,
                f"is {len(text.encode()):,} bytes of JSON, over this board's cap of "
                f"{self._max_bytes:,}; keep large blobs elsewhere and write a reference, "
                "or raise create_model(max_content_bytes=...)",
            )
        return text, decoded

    def _guarded(self, writer: str) -> bool:
        return writer in self._agents or self._agents_only

    def _region(self, name: object, kind: str) -> Region:
        region = self._regions.get(name) if isinstance(name, str) else None
        if region is None:
            raise UndeclaredRegionError(name, tuple(self._regions))
        if region.kind != kind:
            raise RegionKindError(region.name, region.kind, kind)
        return region

    def _judge(self, proposed: ProposedWrite | None) -> Accept | Reject:
        if self._rule is None:
            return _ACCEPT
        assert proposed is not None  # built whenever there is a rule
        try:
            verdict = self._rule(proposed, self._reader)
        except Exception as exc:
            raise AdmissionRuleError(
                f"the admission rule raised {type(exc).__name__}: {exc}; nothing was written. "
                "A rule should return Reject('why') for writes it refuses"
            ) from exc
        if isinstance(verdict, Reject) and isinstance(verdict.reason, str):
            return verdict
        if not isinstance(verdict, Accept):
            raise AdmissionRuleError(
                f"the admission rule returned {verdict!r}; it must return Accept() or "
                "Reject('a reason string')"
            )
        return verdict

    def _not_permitted(self, writer: str, region: str) -> Rejected:
        if writer not in self._agents:
            reason = (
                f"{writer!r} is not a registered agent and this model admits only registered "
                "agents (agents_only=True); declare it with Agent(...)"
            )
        else:
            reason = (
                f"agent {writer!r} may not write {region!r}; add it to the agent's writes_to "
                "or grant it with control.grant()"
            )
        return Rejected(RejectionCause.NOT_PERMITTED, reason)

    def _append(
        self, writes: list[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        with self._lock:
            if fence is None:  # a store without claims still takes every unfenced write
                outcomes = self._store.append(self.board_id, writes)
            else:
                outcomes = self._store.append(self.board_id, writes, fence)
            fault_point("store.after_commit")
            if self._notifying:
                self._enqueue(o.record for o in outcomes if isinstance(o, Appended))
        return outcomes

    def _after_append(self, outcomes: list[AppendOutcome]) -> None:
        if self._notifying:
            self._deliver()
        if self._done is not None and any(isinstance(o, Appended) for o in outcomes):
            self._check_done()

    # -- permissions and closing -----------------------------------------------------

    def _permission(self, kind: RecordKind, agent: str, region: str) -> Written | Rejected:
        if agent not in self._agents:
            raise WriterError(
                f"{agent!r} is not a registered agent; only agents declared in "
                f"create_model(agents=...) have permissions (declared: {sorted(self._agents)})"
            )
        self._region_any(region)
        payload = encode({"agent": agent}, "permission")
        outcome = self._append([PendingWrite(kind, region, BOARD_WRITER, payload)])[0]
        if isinstance(outcome, Closed):
            return _closed(outcome.sequence)
        assert isinstance(outcome, Appended)
        # The agent concerned hears of it now, not at whichever write happens next.
        if self._notifying:
            self._deliver()
        return Written(outcome.record.sequence)

    def _region_any(self, name: object) -> Region:
        region = self._regions.get(name) if isinstance(name, str) else None
        if region is None:
            raise UndeclaredRegionError(name, tuple(self._regions))
        return region

    def _close(self, status: RunStatus, reason: str) -> Outcome:
        if not isinstance(reason, str):
            raise ContentError("reason", f"must be a string, not {type(reason).__name__}")
        payload = encode({"status": status.value, "reason": reason}, "close reason")
        fault_point("run.close")
        closed = self._append([PendingWrite(RecordKind.CLOSE, None, BOARD_WRITER, payload)])[0]
        if isinstance(closed, Appended):
            # From the record just committed: a failing read here would raise after the close.
            return Outcome(status, reason, closed.record.sequence)
        return self.outcome()

    def _check_done(self) -> None:
        """Ask the termination predicate; runs after a write committed, so it never raises."""
        assert self._done is not None
        try:
            done = self._done(self._reader)
        except Exception:
            _log.exception("the termination predicate raised; the run stays open")
            return
        try:
            if done and not self.outcome().closed:
                self._close(RunStatus.COMPLETED, _COMPLETE)
        except StoreError:
            _log.exception("the store failed to close the completed run; the run stays open")

    # -- notification ----------------------------------------------------------------

    def _enqueue(self, records: Any, *, permissions: bool = True) -> None:
        """Queue each record to whoever it concerns; called under ``self._lock``.

        A LEVEL or PREMISE record goes to its region's subscribers; a GRANT or REVOKE
        only to the agent it names (it is not a contribution to the region), and only
        when ``permissions``; a CLOSE to nobody.
        """
        subscribers, agents, queue = self._subscribers, self._agents, self._queue
        with self._queue_lock:
            for record in records:
                kind = record.kind
                if kind is _LEVEL or kind is _PREMISE:
                    for agent in subscribers.get(record.region, ()):
                        queue.append((agent, record))
                elif permissions and (kind is _GRANT or kind is _REVOKE):
                    # Only the board writes these kinds, so content is its {"agent": name}.
                    concerned = agents.get(record.content.get("agent"))
                    if concerned is not None and concerned.notify is not None:
                        queue.append((concerned, record))

    def _deliver(self) -> None:
        """Deliver queued notifications in order; a nested call leaves them to the outer one."""
        with self._queue_lock:
            if self._delivering:
                return
            self._delivering = True
        try:
            while True:
                with self._queue_lock:
                    if not self._queue:
                        self._delivering = False
                        return
                    agent, record = self._queue.popleft()
                self._notify(agent, record)
        except BaseException:
            with self._queue_lock:
                self._delivering = False
            raise

    def _notify(self, agent: Agent, record: Record) -> None:
        assert agent.notify is not None
        try:
            agent.notify(Notification(agent.name, record))
        except Exception:
            _log.exception("agent %r failed handling sequence %d", agent.name, record.sequence)

    def catch_up(self) -> None:
        """Queue every stored write to its region's subscribers, then deliver them.

        The control loop's start. Grants and revokes are not replayed: they were told
        when they committed, and the opening grants are the model's own declaration;
        an agent reads its permissions from ``reader.state().permissions``.
        """
        with self._lock:
            self._enqueue(self._store.read_log(self.board_id), permissions=False)
        self._deliver()


def _claim_arguments(
    holder: str, keys: Sequence[str], lease: timedelta, limit: int | None
) -> tuple[list[str], timedelta, int]:
    """A claim's keys, lease and limit, checked (``limit`` None: every key)."""
    check_holder(holder)
    wanted = key_list(keys)
    lease = check_lease(lease)
    if limit is None:
        limit = len(wanted)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ContentError("limit", f"{limit!r} must be a whole number of keys, 0 or more")
    return wanted, lease, limit


def _result(write: PendingWrite, outcome: AppendOutcome) -> WriteResult:
    if type(outcome) is Appended:  # the common case, without isinstance over a union
        record = outcome.record
        return new_written(record.sequence, record.version, False)
    if isinstance(outcome, Appended | Repeated):
        record = outcome.record
        return Written(record.sequence, record.version, repeat=isinstance(outcome, Repeated))
    if isinstance(outcome, Closed):
        return _closed(outcome.sequence)
    if isinstance(outcome, VersionConflict):
        return Conflict(outcome.current_version)
    if isinstance(outcome, ClaimLost):
        return Rejected(
            RejectionCause.CLAIM_LOST,
            f"{outcome.holder!r} no longer holds every claim this batch was fenced on (another "
            "holder took one over after its lease lapsed); nothing of the batch was written. "
            "Read the board and claim again",
        )
    if isinstance(outcome, Duplicate):
        return Rejected(
            RejectionCause.DUPLICATE,
            f"level {write.region!r} is unique and already holds this at sequence "
            f"{outcome.sequence}; read it instead of writing it again",
        )
    assert isinstance(outcome, Forbidden)
    return Rejected(
        RejectionCause.NOT_PERMITTED,
        f"agent {write.writer!r} may not write {write.region!r} (its permission was revoked "
        "or never granted)",
    )


def _not_a_proposal(proposed: object) -> ContentError:
    return ContentError(
        "proposal",
        f"{proposed!r:.80} is not a ProposedContribution or ProposedPremiseWrite; "
        "build each proposal from one of those (or pass a Judged from control.judge())",
    )


def _repeat(write: PendingWrite, key: str, found: tuple[Record, str]) -> Written:
    record, stored_print = found
    if stored_print != fingerprint(write):
        raise IdempotencyKeyError(key, record.sequence)
    return Written(record.sequence, record.version, repeat=True)


_CHECKS_PERMISSION = operator.attrgetter("check_permission")


def _closed(sequence: int) -> Rejected:
    return Rejected(
        RejectionCause.RUN_CLOSED,
        f"the run closed at sequence {sequence}; nothing more is admitted to it",
    )


def _unique_key(level: Level, content: Any, payload: str) -> str:
    """The key a unique level (``level.unique`` not False) must not hold yet."""
    if level.unique is True:
        return hashlib.sha256(payload.encode()).hexdigest()
    if not isinstance(content, dict) or level.unique not in content:
        raise ContentError(
            f"content for unique level {level.name!r}",
            f"must be a dict with the key {level.unique!r}, which the level is unique on",
        )
    return encode(content[level.unique], "unique key")


def _check_writer(writer: object) -> None:
    if not isinstance(writer, str) or not writer or writer.startswith("@") or not is_utf8(writer):
        raise WriterError(
            f"writer {writer!r} is not a valid writer name; use a non-empty string that does "
            "not start with '@' (reserved for the board's own writes) and is valid Unicode"
        )


def _check_key(key: object) -> None:
    if key is not None and (
        not isinstance(key, str) or not key or len(key) > 256 or not is_utf8(key)
    ):
        raise ContentError(
            "idempotency_key",
            f"{key!r} must be a non-empty string of valid Unicode of at most 256 characters",
        )


def _check_version(version: object) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < _MAX_VERSION:
        raise ContentError(
            "expected_version",
            f"{version!r} must be the positive integer version you read from read_premise()",
        )

"""The store seam: what a backend implements, and the admitting transaction's rules.

A backend implements primitives (open a transaction, look up a premise version, insert
a record, read a range). The rules of the admitting transaction (idempotency first, then
closed run, permission, premise version, uniqueness, then the next sequence number) are
written once here, in :func:`apply_writes`, and run inside each backend's transaction.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeAlias

from blackboard._claims import Claim, Fence
from blackboard._json import UNDECODED, decode
from blackboard._records import Outcome, Record, RecordKind, new_record
from blackboard.errors import IdempotencyKeyError, StoreError
from blackboard.frozen import builder

__all__ = [
    "AppendOutcome",
    "Appended",
    "ClaimLost",
    "Closed",
    "Duplicate",
    "Forbidden",
    "PendingWrite",
    "Repeated",
    "Store",
    "Transaction",
    "VersionConflict",
    "apply_writes",
    "fingerprint",
    "fingerprint_is_derivable",
    "stored_fingerprint",
]


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A write the kernel has judged admissible, for the store to sequence and keep.

    Attributes:
        kind: What the write does.
        region: The region written (``None`` for CLOSE).
        writer: Who writes it.
        payload: The canonical JSON text of the content or value.
        expected_version: For a premise compare-and-set, the version it replaces;
            ``None`` for a premise's opening value (which must not exist yet).
        unique_key: For a unique level, the key that must not be on the level yet.
        idempotency_key: A key under which a repeat returns the first outcome.
        check_permission: Whether the writer must hold a grant for the region, checked
            inside the transaction so a committed revoke is never outrun.
        content: ``decode(payload)`` made ahead, a value of its own (nothing the writer
            holds), when the kernel had it for less than a decode; ``UNDECODED`` (from
            ``blackboard._json``) otherwise. The record keeps it as its content. It is
            ``payload`` in another form, so equality and repr leave it out.
    """

    kind: RecordKind
    region: str | None
    writer: str
    payload: str
    expected_version: int | None = None
    unique_key: str | None = None
    idempotency_key: str | None = None
    check_permission: bool = False
    content: Any = field(default=UNDECODED, compare=False, repr=False)


new_pending: Callable[
    [RecordKind, str | None, str, str, int | None, str | None, str | None, bool, Any],
    PendingWrite,
] = builder(PendingWrite)
"""``PendingWrite(...)`` with every field given, at a plain object's cost."""


@dataclass(frozen=True, slots=True)
class Appended:
    """The write was sequenced and kept."""

    record: Record


new_appended: Callable[[Record], Appended] = builder(Appended)
"""``Appended(record)`` at a plain object's cost (``blackboard.frozen``)."""


@dataclass(frozen=True, slots=True)
class Repeated:
    """The idempotency key matched an identical earlier write; nothing was added."""

    record: Record


@dataclass(frozen=True, slots=True)
class Closed:
    """The run was closed at ``sequence``; nothing is admitted after it."""

    sequence: int


@dataclass(frozen=True, slots=True)
class Forbidden:
    """The writer holds no grant for the region."""


@dataclass(frozen=True, slots=True)
class VersionConflict:
    """The premise is at another version than the write expected."""

    current_version: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A unique level already holds this key, at ``sequence``."""

    sequence: int


@dataclass(frozen=True, slots=True)
class ClaimLost:
    """The batch was fenced and its holder no longer holds every fenced key: nothing landed."""

    holder: str


AppendOutcome: TypeAlias = (
    Appended | Repeated | Closed | Forbidden | VersionConflict | Duplicate | ClaimLost
)


_PREMISE = RecordKind.PREMISE
_LEVEL, _CLOSE = RecordKind.LEVEL, RecordKind.CLOSE


def fingerprint(write: PendingWrite) -> str:
    """Identify a write's meaning, to tell a true repeat from a reused idempotency key."""
    expected = write.expected_version
    return _digest(
        write.kind._value_,  # what .value returns, without the enum property's call
        write.region,
        write.writer,
        write.payload,
        "" if expected is None else str(expected),
    )


def stored_fingerprint(
    kind: RecordKind | str, region: str | None, writer: str, payload: str, version: int | None
) -> str:
    """:func:`fingerprint` of the write that stored a record with these fields.

    ``payload`` is the canonical text the record was stored with and ``kind`` its kind
    (or the kind's value). Exact for every write the kernel makes: a premise's expected
    version is one below the version it set (none for its opening value, version 1) and
    other kinds have none. A write outside that (see :func:`fingerprint_is_derivable`)
    leaves no trace of its expected version in its record, so its fingerprint must be
    kept instead.
    """
    value = kind._value_ if isinstance(kind, RecordKind) else kind
    expected = ""  # the inverse of _next_version: version 1 is an opening value
    if value == "premise" and version is not None and version > 1:
        expected = str(version - 1)
    return _digest(value, region, writer, payload, expected)


def _digest(kind: str, region: str | None, writer: str, payload: str, expected: str) -> str:
    """The one definition of a fingerprint, whether from the write or from its record."""
    parts = (kind, region or "", writer, payload, expected)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def fingerprint_is_derivable(write: PendingWrite) -> bool:
    """Whether :func:`stored_fingerprint` of the record ``write`` stores is its fingerprint.

    True for every write the kernel makes (``Control`` admits only whole expected versions
    of at least 1, and only for premises). A store used directly may be handed others: a
    level with an expected version, or ``True`` as one (``str(True)`` is not ``"1"``).
    """
    expected = write.expected_version
    return expected is None or (write.kind is _PREMISE and type(expected) is int and expected >= 1)


class Transaction(Protocol):
    """The primitives a backend offers inside one admitting transaction.

    Two optional extras, for speed only:

    - A transaction that keeps a write's fingerprint only when the write has an
      idempotency key may say so with a class attribute ``keyless_fingerprints = False``:
      :func:`apply_writes` then passes ``""`` to :meth:`insert` for keyless writes instead
      of computing a SHA-256 no one will compare. Without it, every write's is computed.
    - A transaction that can tell a keyed write's fingerprint from the record it stored
      (:func:`stored_fingerprint` of its kind, region, writer, payload text and version)
      may say so with a class attribute ``derives_fingerprints = True``: :meth:`find_key`
      then answers that derived fingerprint, and :func:`apply_writes` computes a write's
      only when its key is found, passing ``""`` to :meth:`insert` for every write whose
      fingerprint is derivable (:func:`fingerprint_is_derivable`). The others, keyed,
      come with their fingerprint, which the transaction must keep and answer instead of
      the derived one. The SHA-256 of a keyed write was 8 % of a W1 entry's instructions
      on the memory store, and is only ever compared when the key comes again.
    - A method ``prefetch_keys(keys)``, if present, is called once per batch with the
      batch's idempotency keys before any :meth:`find_key`, so that a backend can look
      them all up in one query; :meth:`find_key` must still answer exactly as without it
      (the transaction holds the board, so what it read stays true until it ends).
    - Likewise ``prefetch_uniques(pairs)``, with the batch's ``(region, unique_key)``
      pairs, before any :meth:`unique_holder`.
    """

    def head(self) -> int:
        """The highest sequence number on the board (0 when empty).

        :func:`apply_writes` asks once per batch, before its first write, and counts
        its own inserts from there.
        """
        ...

    def closed_at(self) -> int | None:
        """The sequence of the CLOSE record, or ``None`` while the run is open.

        Asked once per batch, as :meth:`head` is; a CLOSE the batch inserts closes the
        run for the writes after it.
        """
        ...

    def permitted(self, agent: str, region: str) -> bool:
        """Whether ``agent`` currently holds a grant for ``region``."""
        ...

    def premise_version(self, name: str) -> int | None:
        """The premise's current version, or ``None`` before its opening value."""
        ...

    def unique_holder(self, region: str, key: str) -> int | None:
        """The sequence of the contribution holding ``key`` on a unique level, if any."""
        ...

    def find_key(self, key: str) -> tuple[Record, str] | None:
        """The record written under an idempotency key, and its write's fingerprint.

        The fingerprint is the one :meth:`insert` was given, or, where that was ``""``
        and the transaction ``derives_fingerprints``, the one derived from the record.
        """
        ...

    def holds(self, holder: str, keys: frozenset[str]) -> bool:
        """Whether ``holder`` holds every one of ``keys`` (none taken over since it took them).

        Must keep the claims as they are until the transaction ends, so that no one
        takes a key over between this answer and the commit.
        """
        ...

    def insert(self, record: Record, write: PendingWrite, fingerprint: str) -> None:
        """Keep ``record`` and update the derived state its kind implies.

        LEVEL also records ``write.unique_key``; PREMISE sets the premise's version;
        GRANT/REVOKE add/remove ``(record.content["agent"], record.region)``; CLOSE
        marks the run closed with ``record.content["status"]`` and ``["reason"]``.
        ``fingerprint`` is ``""`` where no one will compare it or it is derived (see the
        optional extras above).
        """
        ...


def apply_writes(
    txn: Transaction, writes: Sequence[PendingWrite], fence: Fence | None = None
) -> list[AppendOutcome]:
    """Judge and keep ``writes`` in order, inside one backend transaction.

    Refusals consume no sequence number, so the sequence stays gap-free. A reused
    idempotency key raises, which makes the backend roll the whole batch back. A
    ``fence`` whose holder no longer holds every key refuses the whole batch first.
    """
    if fence is not None and fence.keys and not txn.holds(fence.holder, fence.keys):
        return [ClaimLost(fence.holder)] * len(writes)
    at = datetime.now(UTC)  # the system clock, as fromtimestamp(time.time()) but in one call
    every_print = getattr(txn, "keyless_fingerprints", True)
    derive = getattr(txn, "derives_fingerprints", False)
    prefetch = getattr(txn, "prefetch_keys", None)
    if prefetch is not None:
        keys = [w.idempotency_key for w in writes if w.idempotency_key is not None]
        if keys:
            prefetch(keys)
    prefetch = getattr(txn, "prefetch_uniques", None)
    if prefetch is not None:
        pairs = [(w.region, w.unique_key) for w in writes if w.unique_key and w.region]
        if pairs:
            prefetch(pairs)
    # The head and the close are read once: within the transaction only its own inserts
    # move them (a record takes head + 1; a CLOSE closes the run), so they are followed
    # here instead of asked of the backend per write.
    board = _BoardState(txn.head(), txn.closed_at())
    return [_apply_one(txn, write, at, every_print, derive, board) for write in writes]


class _BoardState:
    """The head and the close of the board inside one transaction, as its writes move them."""

    __slots__ = ("closed", "head")

    def __init__(self, head: int, closed: int | None) -> None:
        self.head = head
        self.closed = closed


def _apply_one(
    txn: Transaction,
    write: PendingWrite,
    at: datetime,
    every_print: bool,
    derive: bool,
    board: _BoardState,
) -> AppendOutcome:
    # A fingerprint is only ever compared under an idempotency key; a transaction that
    # keeps none for keyless writes (keyless_fingerprints = False) is spared the SHA-256,
    # and one that derives it from the stored record (derives_fingerprints = True) is
    # spared it for every write whose key is not found, nearly all of them.
    key = write.idempotency_key
    if not derive:
        print_ = fingerprint(write) if every_print or key is not None else ""
    elif key is None or write.expected_version is None or fingerprint_is_derivable(write):
        print_ = ""  # (no expected version: derivable, without the call)
    else:
        print_ = fingerprint(write)  # not in its record: the transaction keeps it
    if key is not None:
        found = txn.find_key(key)
        if found is not None:
            record, stored_print = found
            # print_ is "" only where a found key's print is derived: compute it now.
            if stored_print != (print_ or fingerprint(write)):
                raise IdempotencyKeyError(key, record.sequence)
            return Repeated(record)
    kind = write.kind
    if board.closed is not None:
        return Closed(board.closed)
    # A plain contribution (no grant to hold, not unique) has nothing else to refuse.
    if kind is not _LEVEL or write.check_permission or write.unique_key is not None:
        refusal = _refusal(txn, write)
        if refusal is not None:
            return refusal
    content = write.content
    board.head += 1
    record = new_record(
        board.head,
        kind,
        write.region,
        write.writer,
        decode(write.payload) if content is UNDECODED else content,
        None if kind is not _PREMISE else _next_version(write.expected_version),
        at,
        key,
    )
    txn.insert(record, write, print_)
    if kind is _CLOSE:
        board.closed = board.head
    return new_appended(record)


def _refusal(txn: Transaction, write: PendingWrite) -> AppendOutcome | None:
    """Why a write the open run would otherwise take is refused (grant, version, unique)."""
    region = write.region
    if region is None:
        return None
    if write.check_permission and not txn.permitted(write.writer, region):
        return Forbidden()
    if write.kind is _PREMISE:
        current = txn.premise_version(region)
        if current != write.expected_version:
            return VersionConflict(0 if current is None else current)
    if write.unique_key is not None:
        holder = txn.unique_holder(region, write.unique_key)
        if holder is not None:
            return Duplicate(holder)
    return None


def _next_version(expected: int | None) -> int:
    """The version a premise write sets: 1 for its opening value, else the next one."""
    return 1 if expected is None else expected + 1


class Store(ABC):
    """A place where boards live: one small interface, several backends.

    Every method takes the ``board_id``; one store holds any number of boards.
    Implementations translate their driver's exceptions into :class:`StoreError`.
    """

    #: Whether the kernel reads the run's state before a write that nothing else settles
    #: early (no idempotency key, no rule, no grant to check). The transaction checks it
    #: again either way, so the answer is the same; the question is only what it costs.
    #: On SQLite that read outside the write lock gives other processes their turn at the
    #: lock; on PostgreSQL it is one more round trip per write and gives nothing back.
    reads_run_state_ahead: bool = True

    @abstractmethod
    def open_board(self, board_id: str, declaration: str, opening: Sequence[PendingWrite]) -> str:
        """Create the board with ``opening`` writes if it does not exist; return its declaration.

        Creation and the opening writes are one transaction, so two processes opening the
        same new board agree on one declaration and one set of opening values.
        """

    @abstractmethod
    def append(
        self, board_id: str, writes: Sequence[PendingWrite], fence: Fence | None = None
    ) -> list[AppendOutcome]:
        """Run :func:`apply_writes` over ``writes`` (and the ``fence``) in one durable transaction.

        The kernel passes ``fence`` only when the writer gave one, so a store without
        claims still serves every unfenced write.
        """

    @abstractmethod
    def find_key(self, board_id: str, key: str) -> tuple[Record, str] | None:
        """The record written under an idempotency key, with its fingerprint."""

    def find_keys(self, board_id: str, keys: Sequence[str]) -> dict[str, tuple[Record, str]]:
        """Every key of ``keys`` already written, with its record and fingerprint.

        The default asks :meth:`find_key` per key; a backend should answer in one query.
        """
        found = {key: self.find_key(board_id, key) for key in keys}
        return {key: hit for key, hit in found.items() if hit is not None}

    def read_ahead(
        self, board_id: str, writes: Sequence[PendingWrite]
    ) -> tuple[dict[str, tuple[Record, str]], Outcome]:
        """What the kernel reads before appending ``writes``: their keys found, and the run.

        :meth:`find_keys` of the writes' idempotency keys (none asked if they have none)
        and :meth:`outcome`. The default makes the two reads one after the other; a
        backend where each is a round trip should make them at once (and may keep what
        it read for judging the :meth:`append` of the same writes that follows).
        """
        keys = [w.idempotency_key for w in writes if w.idempotency_key is not None]
        return (self.find_keys(board_id, keys) if keys else {}), self.outcome(board_id)

    @abstractmethod
    def head(self, board_id: str) -> int:
        """The board's highest sequence number (0 for an empty board)."""

    @abstractmethod
    def read_log(self, board_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """Records with ``after < sequence <= until`` (to the head when ``until`` is None)."""

    @abstractmethod
    def read_region(self, board_id: str, region: str) -> list[Record]:
        """Every record written to a level, in sequence order."""

    @abstractmethod
    def read_premise(self, board_id: str, name: str) -> Record | None:
        """The record that set the premise's current value."""

    @abstractmethod
    def outcome(self, board_id: str) -> Outcome:
        """How the run stands."""

    @abstractmethod
    def permissions(self, board_id: str) -> frozenset[tuple[str, str]]:
        """The current grants as ``(agent, region)`` pairs."""

    # -- leased claims (see blackboard._claims) ------------------------------------------

    @abstractmethod
    def claim(
        self, board_id: str, holder: str, keys: Sequence[str], limit: int, lease: timedelta
    ) -> list[Claim]:
        """Take up to ``limit`` of ``keys``, in their order, for ``lease``; return those taken.

        A key is taken if no one holds it, its lease lapsed, or ``holder`` holds it
        already (which renews it, keeping its token). A key another claimer is taking
        at this moment is skipped, not waited for (``SKIP LOCKED``). Taking a key from
        anyone else (or from no one) raises its token by one.
        """

    @abstractmethod
    def renew(
        self, board_id: str, holder: str, keys: Sequence[str], lease: timedelta
    ) -> list[Claim]:
        """Extend ``holder``'s claims on ``keys`` to ``lease`` from now; return those renewed.

        A key someone else took over (or that was released) is not renewed: it is lost.
        """

    @abstractmethod
    def release(self, board_id: str, holder: str, keys: Sequence[str]) -> int:
        """Give up ``holder``'s claims on ``keys``; return how many it held."""

    def release_and_claim(
        self,
        board_id: str,
        holder: str,
        released: Sequence[str],
        keys: Sequence[str],
        limit: int,
        lease: timedelta,
    ) -> tuple[int, list[Claim]]:
        """:meth:`release` ``released``, then :meth:`claim` up to ``limit`` of ``keys``.

        Returns how many of ``released`` ``holder`` held, and the claims taken. The
        default makes the two calls one after the other; a backend where each is a
        round trip should make them one transaction. Either way a key released here
        is free to claimers before the claim is made.
        """
        count = self.release(board_id, holder, released) if released else 0
        taken = self.claim(board_id, holder, keys, limit, lease) if keys and limit > 0 else []
        return count, taken

    @abstractmethod
    def claims(self, board_id: str) -> list[Claim]:
        """Every key held now (lapsed leases included, until someone takes them), by key."""

    def declaration(self, board_id: str) -> str | None:
        """The declaration a board was created with, or ``None`` if there is no such board."""
        try:
            self.head(board_id)
        except StoreError:
            return None
        # The board exists, so open_board returns its declaration and writes nothing.
        return self.open_board(board_id, "", ())

    def permitted(self, board_id: str, agent: str, region: str) -> bool:
        """Whether ``agent`` holds a grant for ``region`` now (a backend may answer faster)."""
        return (agent, region) in self.permissions(board_id)

    def wait(self, board_id: str, after: int, timeout: float) -> bool:
        """Block until the head passes ``after`` or ``timeout`` seconds elapse.

        The default polls; a backend with a wake-up channel should override it.
        """
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            if self.head(board_id) > after:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)

    @abstractmethod
    def close(self) -> None:
        """Release the store's connections. The boards stay where they are."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

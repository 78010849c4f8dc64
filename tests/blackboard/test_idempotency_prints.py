"""A keyed write's fingerprint is derived from its stored record when its key comes again.

The memory and SQLite stores keep no fingerprint for a write their record can tell
(``derives_fingerprints``): a repeat's is compared with ``stored_fingerprint`` of the
record's kind, region, writer, canonical text and version, which must be exactly the
first write's ``fingerprint``. SQLite rows written by earlier versions carry the
fingerprint in their column, and that stored value is what a repeat of them is judged by.
"""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blackboard.stores._sqlite as sqlite_store
from blackboard import (
    IdempotencyKeyError,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    RecordKind,
    StoreError,
    Written,
    create_model,
)
from blackboard._json import encode
from blackboard.stores import (
    Appended,
    MemoryStore,
    PendingWrite,
    Repeated,
    SQLiteStore,
    Store,
    apply_writes,
)
from blackboard.stores._base import fingerprint, fingerprint_is_derivable, stored_fingerprint
from storekit import StoreSpec

_BOARDS = itertools.count()


def _new_board(store: Store, opening: list[PendingWrite] | None = None) -> str:
    board = f"b{next(_BOARDS)}"
    store.open_board(board, "{}", opening or [])
    return board


def _level(content: Any, writer: str = "w", region: str = "l", **extra: Any) -> PendingWrite:
    return PendingWrite(RecordKind.LEVEL, region, writer, encode(content, "c"), **extra)


def _premise(value: Any, expected: int | None, key: str, writer: str = "w") -> PendingWrite:
    return PendingWrite(
        RecordKind.PREMISE, "p", writer, encode(value, "v"), expected, idempotency_key=key
    )


def _appended(outcome: object) -> Any:
    assert isinstance(outcome, Appended), outcome
    return outcome.record


def _rows(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, args).fetchall()


def _set_print(path: Path, key: str, value: str | None) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE bb_records SET fingerprint = ? WHERE ikey = ?", (value, key))


# -- the derivation: every kind of write, through both stores ------------------------------

_TEXT = st.text(max_size=12)  # any Unicode but lone surrogates, NUL and separators included
_NAME = st.text(min_size=1, max_size=12)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _writes(draw: st.DrawFn) -> tuple[list[PendingWrite], PendingWrite]:
    """A keyed write of any kind, and the writes that make the board ready for it."""
    kind = draw(st.sampled_from(RecordKind))
    writer, key = draw(_NAME), draw(_NAME)
    region: str | None = draw(_NAME)
    before: list[PendingWrite] = []
    expected: int | None = None
    if kind is RecordKind.PREMISE:
        expected = draw(st.none() | st.integers(1, 120))  # past a digit or two more
        if expected is not None:  # the premise at version `expected` first
            before = [PendingWrite(kind, region, "o", "0")]
            before += [PendingWrite(kind, region, "o", str(v), v) for v in range(1, expected)]
    if kind in (RecordKind.GRANT, RecordKind.REVOKE):
        payload = encode({"agent": draw(_NAME)}, "grant")
    elif kind is RecordKind.CLOSE:
        region = None
        payload = encode({"status": "aborted", "reason": draw(_TEXT)}, "close")
    else:
        payload = encode(draw(_VALUE), "content")
    return before, PendingWrite(kind, region, writer, payload, expected, idempotency_key=key)


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path]]:
    path = tmp_path_factory.mktemp("prints") / "board.db"
    with SQLiteStore(path, synchronous="OFF") as sqlite:
        yield sqlite, path


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(case=_writes())
def test_the_stored_record_tells_its_writes_fingerprint(
    case: tuple[list[PendingWrite], PendingWrite], sqlite_file: tuple[Store, Path]
) -> None:
    before, write = case
    assert fingerprint_is_derivable(write)
    sqlite, path = sqlite_file
    boards = {}
    for store in (MemoryStore(), sqlite):
        board = boards[store] = _new_board(store)
        if before:
            assert all(isinstance(o, Appended) for o in store.append(board, before))
        record = _appended(store.append(board, [write])[0])
        if write.kind is RecordKind.PREMISE:
            assert record.version == (1 if write.expected_version is None else len(before) + 1)
        else:
            assert record.version is None
        assert store.find_key(board, write.idempotency_key or "") == (record, fingerprint(write))
        assert store.append(board, [write]) == [Repeated(record)]
    # The SQLite row as kept in the file, column by column.
    (row,) = _rows(
        path,
        "SELECT kind, region, writer, payload, version, fingerprint FROM bb_records"
        " WHERE board_id = ? AND ikey = ?",
        boards[sqlite],
        write.idempotency_key,
    )
    assert row[-1] is None  # nothing kept: derived
    assert stored_fingerprint(*row[:-1]) == fingerprint(write)
    assert stored_fingerprint(write.kind, *row[1:-1]) == fingerprint(write)


@pytest.mark.parametrize(
    ("expected", "version"), [(None, 1), (1, 2), (9, 10), (99, 100), (12345, 12346)]
)
def test_a_premise_version_tells_the_expected_version_one_below_it(
    expected: int | None, version: int
) -> None:
    write = _premise({"v": 1}, expected, "k")
    assert stored_fingerprint("premise", "p", "w", write.payload, version) == fingerprint(write)
    # Any other version is another write's.
    for other in (v for v in (version - 1, version + 1) if v >= 1):
        assert stored_fingerprint("premise", "p", "w", write.payload, other) != fingerprint(write)


# -- repeats and reused keys at the store ---------------------------------------------------


def test_a_premise_keyed_at_version_1_and_later_repeats(local_store_spec: StoreSpec) -> None:
    store = local_store_spec.open()
    board = _new_board(store)
    opening, later = _premise("a", None, "p1"), _premise("b", 1, "p2")
    first = store.append(board, [opening, later, opening, later])
    one, two = _appended(first[0]), _appended(first[1])
    assert (one.version, two.version) == (1, 2)
    assert first[2:] == [Repeated(one), Repeated(two)]
    assert store.append(board, [later, opening]) == [Repeated(two), Repeated(one)]
    # The version each repeat must match is the one its record tells, not the premise's now.
    three = _appended(store.append(board, [_premise("c", 2, "p3")])[0])
    assert three.version == 3
    assert store.append(board, [opening, later]) == [Repeated(one), Repeated(two)]
    reopened = local_store_spec.open()
    assert reopened.append(board, [later, opening]) == [Repeated(two), Repeated(one)]
    assert reopened.find_keys(board, ["p1", "p2", "p3"]) == {
        "p1": (one, fingerprint(opening)),
        "p2": (two, fingerprint(later)),
        "p3": (three, fingerprint(_premise("c", 2, "p3"))),
    }


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        pytest.param("p1", _premise("a", 1, "p1"), id="opening-now-expects-1"),
        pytest.param("p2", _premise("b", None, "p2"), id="cas-now-an-opening"),
        pytest.param("p2", _premise("b", 2, "p2"), id="cas-expects-another"),
        pytest.param("p2", _premise("b", 1, "p2", writer="v"), id="cas-writer"),
        pytest.param("p2", _premise("B", 1, "p2"), id="cas-value"),
        pytest.param("l1", _level(1, idempotency_key="l1"), id="content"),
        pytest.param("l1", _level({"x": 1}, writer="v", idempotency_key="l1"), id="writer"),
        pytest.param("l1", _level({"x": 1}, region="m", idempotency_key="l1"), id="region"),
        pytest.param(
            "l1",
            PendingWrite(RecordKind.GRANT, "l", "w", encode({"x": 1}, "c"), idempotency_key="l1"),
            id="kind",
        ),
    ],
)
def test_a_key_reused_for_another_write_raises_and_writes_nothing(
    local_store_spec: StoreSpec, key: str, changed: PendingWrite
) -> None:
    store = local_store_spec.open()
    board = _new_board(store)
    firsts = [_premise("a", None, "p1"), _premise("b", 1, "p2")]
    firsts.append(_level({"x": 1}, idempotency_key="l1"))
    assert all(isinstance(o, Appended) for o in store.append(board, firsts))
    before = store.read_log(board)
    for batch in ([changed], [_level("fresh"), changed]):
        with pytest.raises(IdempotencyKeyError, match=f"'{key}' was already used"):
            store.append(board, batch)
        assert store.read_log(board) == before


def _same(write: PendingWrite, **change: Any) -> PendingWrite:
    return dataclasses.replace(write, idempotency_key="same", **change)


_OPENING = _premise("a", None, "same")
_LEVEL = _level({"x": 1}, idempotency_key="same")


@pytest.mark.parametrize(
    ("first", "changed"),
    [
        pytest.param(_OPENING, _same(_OPENING, expected_version=1), id="opening-then-cas"),
        pytest.param(_OPENING, _same(_OPENING, payload='"b"'), id="premise-value"),
        pytest.param(_OPENING, _same(_OPENING, writer="v"), id="premise-writer"),
        pytest.param(_OPENING, _same(_OPENING, region="q"), id="premise-name"),
        pytest.param(_LEVEL, _same(_LEVEL, payload='{"x":2}'), id="content"),
        pytest.param(_LEVEL, _same(_LEVEL, writer="v"), id="writer"),
        pytest.param(_LEVEL, _same(_LEVEL, region="m"), id="region"),
        pytest.param(_LEVEL, _same(_LEVEL, kind=RecordKind.PREMISE), id="kind"),
    ],
)
def test_a_key_reused_inside_one_batch_raises_and_writes_nothing_of_it(
    local_store_spec: StoreSpec, first: PendingWrite, changed: PendingWrite
) -> None:
    store = local_store_spec.open()
    board = _new_board(store)
    batch = store.append(board, [first, first])
    assert batch[1] == Repeated(_appended(batch[0]))
    fresh = _new_board(store)
    with pytest.raises(IdempotencyKeyError, match="'same' was already used"):
        store.append(fresh, [_level("before"), first, changed])
    assert store.read_log(fresh) == [] and store.head(fresh) == 0


# -- writes a record cannot tell: their fingerprint is kept -------------------------------


@pytest.mark.parametrize(
    ("write", "other"),
    [
        # A level has no version to tell an expected one by.
        pytest.param(
            _level(1, idempotency_key="odd", expected_version=3),
            _level(1, idempotency_key="odd"),
            id="level-expecting-3",
        ),
        # True is 1 to the version check, but "True" to the fingerprint.
        pytest.param(
            PendingWrite(RecordKind.PREMISE, "p", "w", "2", True, idempotency_key="odd"),
            _premise(2, 1, "odd"),
            id="premise-expecting-True",
        ),
    ],
)
def test_a_write_its_record_cannot_tell_keeps_its_fingerprint(
    local_store_spec: StoreSpec, write: PendingWrite, other: PendingWrite
) -> None:
    assert not fingerprint_is_derivable(write) and fingerprint_is_derivable(other)
    store = local_store_spec.open()
    board = _new_board(store, [_premise(1, None, "opening")])
    batch = store.append(board, [write, write])
    record = _appended(batch[0])
    assert batch[1] == Repeated(record)
    reopened = local_store_spec.open()
    assert reopened.append(board, [write]) == [Repeated(record)]
    assert reopened.find_key(board, "odd") == (record, fingerprint(write))
    assert reopened.find_keys(board, ["odd"]) == {"odd": (record, fingerprint(write))}
    # The write the record alone would suggest is another one.
    with pytest.raises(IdempotencyKeyError, match="'odd' was already used"):
        reopened.append(board, [other])
    if local_store_spec.kind == "sqlite":
        path = Path(str(local_store_spec.url).removeprefix("sqlite:///"))
        query = "SELECT ikey, fingerprint FROM bb_records WHERE fingerprint IS NOT NULL"
        assert _rows(path, query) == [("odd", fingerprint(write))]


# -- SQLite: new rows keep no fingerprint, rows of earlier versions keep theirs -------------


def _sqlite_model(path: Path) -> Model:
    return create_model(
        [Level("findings", unique="id"), Premise("window")],
        premises={"window": 5},
        store=SQLiteStore(path),
        board_id="b",
    )


def _first_writes(model: Model) -> list[Written]:
    control = model.control
    results = [
        control.write("w", "findings", {"id": 1}, idempotency_key="k1"),
        control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2"),
        *control.write_all(
            [
                ProposedContribution("w", "findings", {"id": 2}),
                ProposedContribution("w", "findings", {"id": 3}),
            ],
            idempotency_keys=["k3", None],
        ),
    ]
    written = [r for r in results if type(r) is Written and not r.repeat]
    assert len(written) == len(results), results
    return written


def test_new_sqlite_rows_keep_no_fingerprint_and_repeat_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    with _sqlite_model(path) as model:
        first = _first_writes(model)
    assert _rows(path, "SELECT count(*) FROM bb_records WHERE fingerprint IS NOT NULL") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM bb_records") == [(5,)]  # the opening value too
    with _sqlite_model(path) as model:
        before = model.reader.log()
        control = model.control
        again = [Written(w.sequence, w.version, repeat=True) for w in first]
        repeats = [
            control.write("w", "findings", {"id": 1}, idempotency_key="k1"),
            control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2"),
            *control.write_all(
                [
                    ProposedContribution("w", "findings", {"id": 2}),
                    ProposedPremiseWrite("w", "window", 6, 1),
                ],
                idempotency_keys=["k3", "k2"],
            ),
        ]
        assert repeats == [again[0], again[1], again[2], again[1]]
        with pytest.raises(IdempotencyKeyError, match="'k2' was already used"):
            control.set_premise("w", "window", 6, expected_version=2, idempotency_key="k2")
        assert model.reader.log() == before


def _old_row_board(path: Path) -> tuple[SQLiteStore, str, list[PendingWrite], list[Any]]:
    """A board whose keyed rows carry the fingerprint the code before derivation stored."""
    store = SQLiteStore(path)
    board = _new_board(store)
    grant = encode({"agent": "a"}, "grant")
    writes = [
        _premise("a", None, "p1"),
        _premise("b", 1, "p2"),
        _level({"x": 1}, idempotency_key="l1"),
        PendingWrite(RecordKind.GRANT, "l", "@board", grant, idempotency_key="g1"),
    ]
    records = [_appended(o) for o in store.append(board, writes)]
    for write in writes:
        _set_print(path, write.idempotency_key or "", fingerprint(write))
    return store, board, writes, records


def test_an_old_sqlite_row_repeats_by_its_stored_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    store, board, writes, records = _old_row_board(path)
    found = {w.idempotency_key: (r, fingerprint(w)) for r, w in zip(records, writes, strict=True)}
    with store, SQLiteStore(path) as other:
        assert store.append(board, writes) == [Repeated(r) for r in records]
        assert {k: other.find_key(board, k or "") for k in found} == found
        assert other.read_ahead(board, writes)[0] == found
        with pytest.raises(IdempotencyKeyError, match="'p2' was already used"):
            other.append(board, [_premise("b", 2, "p2")])


def test_an_old_sqlite_rows_stored_fingerprint_wins_over_the_derived_one(tmp_path: Path) -> None:
    """A stored value that is not the derived one decides: the same write no longer matches."""
    path = tmp_path / "board.db"
    store, board, writes, records = _old_row_board(path)
    before = store.read_log(board)
    _set_print(path, "l1", "0" * 64)
    with store, SQLiteStore(path) as other:
        for append in (store.append, other.append):
            with pytest.raises(IdempotencyKeyError, match="'l1' was already used"):
                append(board, [writes[2]])
        assert other.find_key(board, "l1") == (records[2], "0" * 64)
        assert other.find_keys(board, ["l1"]) == {"l1": (records[2], "0" * 64)}
        # An empty column is no fingerprint: derived, as for NULL.
        _set_print(path, "l1", "")
        assert other.append(board, [writes[2]]) == [Repeated(records[2])]
        assert store.read_log(board) == before


def test_an_old_sqlite_row_is_judged_by_its_stored_fingerprint_through_control(
    tmp_path: Path,
) -> None:
    path = tmp_path / "board.db"
    with _sqlite_model(path) as model:
        first = _first_writes(model)
    finding = PendingWrite(RecordKind.LEVEL, "findings", "w", encode({"id": 1}, "content"))
    cas = PendingWrite(RecordKind.PREMISE, "window", "w", "6", 1)
    _set_print(path, "k1", fingerprint(finding))
    _set_print(path, "k2", fingerprint(cas))
    _set_print(path, "k3", "f" * 64)
    with _sqlite_model(path) as model:
        before = model.reader.log()
        control = model.control
        assert control.write("w", "findings", {"id": 1}, idempotency_key="k1") == Written(
            first[0].sequence, repeat=True
        )
        repeat = control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2")
        assert repeat == Written(first[1].sequence, 2, repeat=True)
        with pytest.raises(IdempotencyKeyError, match="'k3' was already used"):
            control.write("w", "findings", {"id": 2}, idempotency_key="k3")
        with pytest.raises(IdempotencyKeyError, match="'k3' was already used"):
            control.write_all(
                [ProposedContribution("w", "findings", {"id": 2})], idempotency_keys=["k3"]
            )
        assert model.reader.log() == before


# -- a transaction that keeps the fingerprints it is given (as PostgreSQL's does) ---------------


class _KeepingTxn:
    """A transaction over plain dicts that keeps every fingerprint ``apply_writes`` gives it.

    PostgreSQL's transaction works this way, and it is the only store that does; the
    mutation half of RA-17 runs without a server, so this is what pins ``apply_writes``'
    own fingerprints there. ``keyless`` mirrors the optional ``keyless_fingerprints``.
    """

    def __init__(self, keyless: bool | None) -> None:
        if keyless is not None:
            self.keyless_fingerprints = keyless
        self.records: list[Any] = []
        self.given: list[tuple[str | None, str]] = []  # (idempotency key, fingerprint)
        self.keys: dict[str, tuple[Any, str]] = {}

    def head(self) -> int:
        return len(self.records)

    def closed_at(self) -> int | None:
        return None

    def permitted(self, agent: str, region: str) -> bool:
        return True

    def premise_version(self, name: str) -> int | None:
        versions = [r.version for r in self.records if r.region == name]
        return versions[-1] if versions else None

    def unique_holder(self, region: str, key: str) -> int | None:
        return None

    def find_key(self, key: str) -> tuple[Any, str] | None:
        return self.keys.get(key)

    def holds(self, holder: str, keys: frozenset[str]) -> bool:
        return True

    def insert(self, record: Any, write: PendingWrite, fingerprint: str) -> None:
        self.records.append(record)
        self.given.append((write.idempotency_key, fingerprint))
        if write.idempotency_key is not None:
            self.keys[write.idempotency_key] = (record, fingerprint)


@pytest.mark.parametrize("keyless", [None, True, False])
def test_a_transaction_that_keeps_fingerprints_is_given_each_write_s(keyless: bool | None) -> None:
    """Keyed writes come with their fingerprint; keyless ones too, unless the transaction
    says it keeps none for them; a repeat is ``Repeated`` and a reused key raises."""
    txn = _KeepingTxn(keyless)
    keyed, keyless_write = _level({"n": 1}, idempotency_key="k"), _level({"n": 2})
    premise = _premise({"v": 1}, None, "p1")
    outcomes = apply_writes(txn, [keyed, keyless_write, premise])
    assert [type(o) for o in outcomes] == [Appended, Appended, Appended]
    expected_keyless = "" if keyless is False else fingerprint(keyless_write)
    assert txn.given == [
        ("k", fingerprint(keyed)),
        (None, expected_keyless),
        ("p1", fingerprint(premise)),
    ]
    again = apply_writes(txn, [_level({"n": 1}, idempotency_key="k")])
    assert isinstance(again[0], Repeated) and again[0].record.sequence == 1
    with pytest.raises(IdempotencyKeyError):
        apply_writes(txn, [_level({"n": 3}, idempotency_key="k")])
    assert len(txn.records) == 3


def test_a_file_of_schema_2_opens_as_3_and_its_rows_keep_their_prints(tmp_path: Path) -> None:
    store, board, writes, _ = _old_row_board(tmp_path / "old.db")
    store.close()
    with closing(sqlite3.connect(tmp_path / "old.db")) as conn, conn:
        conn.execute("PRAGMA user_version=2")  # as the version before ADR 0027 left it
    reopened = SQLiteStore(tmp_path / "old.db")
    try:
        assert _rows(tmp_path / "old.db", "PRAGMA user_version") == [(3,)]
        again = reopened.append(board, writes)
        assert [type(o) for o in again] == [Repeated] * len(writes)
    finally:
        reopened.close()


def test_a_store_of_schema_2_refuses_a_file_this_version_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 2 would take a NULL fingerprint for a mismatch: it must not open the file."""
    model = _sqlite_model(tmp_path / "new.db")
    _first_writes(model)
    model.close()
    monkeypatch.setattr(sqlite_store, "SCHEMA_VERSION", 2)
    with pytest.raises(StoreError, match="schema version 3, newer than this mrpybb"):
        SQLiteStore(tmp_path / "new.db")

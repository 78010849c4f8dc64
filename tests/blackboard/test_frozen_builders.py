"""The kernel's quick builders make exactly what the frozen classes' constructors make.

``new_record``, ``new_pending``, ``new_written`` and ``new_appended`` build their frozen
dataclass through a plain twin of the same layout (``blackboard.frozen``). Whatever
they build must be indistinguishable from the constructor's object: same type, equal,
same hash and repr, still frozen, and copied, replaced and pickled like it.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, fields
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blackboard import (
    Accept,
    Judged,
    Level,
    ProposedContribution,
    Record,
    RecordKind,
    Written,
    create_model,
)
from blackboard._json import UNDECODED
from blackboard._records import new_record
from blackboard._writes import new_written
from blackboard.frozen import builder
from blackboard.stores import Appended, MemoryStore, PendingWrite, SQLiteStore
from blackboard.stores._base import new_appended, new_pending

texts = st.text(max_size=8)
maybe_texts = st.none() | texts
maybe_ints = st.none() | st.integers(min_value=-(2**63), max_value=2**63)
contents = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
kinds = st.sampled_from(RecordKind)
moments = st.datetimes(timezones=st.just(UTC))


def same_object(built: Any, made: Any) -> None:
    assert type(built) is type(made)
    assert built == made
    assert not (built != made)  # noqa: SIM202 - __ne__ is what this checks
    assert repr(built) == repr(made)
    for f in fields(made):
        assert getattr(built, f.name) is getattr(made, f.name), f.name
    try:
        expected_hash = hash(made)
    except TypeError:  # a field holds a dict or list: neither is hashable
        with pytest.raises(TypeError):
            hash(built)
    else:
        assert hash(built) == expected_hash
    first = fields(made)[0].name
    with pytest.raises(FrozenInstanceError):
        setattr(built, first, None)
    with pytest.raises(FrozenInstanceError):
        delattr(built, first)
    assert copy.copy(built) == made and copy.deepcopy(built) == made
    assert dataclasses.replace(built) == made
    assert dataclasses.asdict(built) == dataclasses.asdict(made)
    assert pickle.loads(pickle.dumps(built)) == made


@given(
    st.integers(min_value=1), kinds, maybe_texts, texts, contents, maybe_ints, moments, maybe_texts
)
def test_new_record_is_the_constructors_record(
    sequence: int,
    kind: RecordKind,
    region: str | None,
    writer: str,
    content: Any,
    version: int | None,
    at: datetime,
    key: str | None,
) -> None:
    built = new_record(sequence, kind, region, writer, content, version, at, key)
    same_object(built, Record(sequence, kind, region, writer, content, version, at, key))
    same_object(new_appended(built), Appended(built))


@given(
    kinds,
    maybe_texts,
    texts,
    texts,
    maybe_ints,
    maybe_texts,
    maybe_texts,
    st.booleans(),
    st.just(UNDECODED) | contents,
)
def test_new_pending_is_the_constructors_pending_write(
    kind: RecordKind,
    region: str | None,
    writer: str,
    payload: str,
    expected: int | None,
    unique: str | None,
    key: str | None,
    check: bool,
    content: Any,
) -> None:
    built = new_pending(kind, region, writer, payload, expected, unique, key, check, content)
    made = PendingWrite(kind, region, writer, payload, expected, unique, key, check, content)
    same_object(built, made)
    assert built.content is content  # not compared (it is the payload in another form)


@given(st.integers(min_value=1), maybe_ints, st.booleans())
def test_new_written_is_the_constructors_written(
    sequence: int, version: int | None, repeat: bool
) -> None:
    same_object(new_written(sequence, version, repeat), Written(sequence, version, repeat))


def test_judge_gives_the_constructors_judged() -> None:
    model = create_model([Level("notes")], board_id="b")
    proposed = ProposedContribution("scout", "notes", {"n": 1})
    judged = model.control.judge(proposed)
    made = Judged(proposed, Accept(), model.control)
    assert type(judged) is Judged and judged == made and repr(judged) == repr(made)
    assert judged.judged_by is model.control
    with pytest.raises(FrozenInstanceError):
        judged.verdict = Accept()  # type: ignore[misc]
    assert model.control.write_all([judged]) == [Written(1)]


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_records_on_the_board_are_frozen_records(store_kind: str, tmp_path: Any) -> None:
    store = MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "b.db")
    model = create_model([Level("notes")], store=store, board_id="b")
    result = model.control.write("scout", "notes", {"n": [1, "two"]})
    assert type(result) is Written and result == Written(result.sequence)
    record = model.reader.log()[-1]
    assert record.content == {"n": [1, "two"]}
    assert type(record) is Record
    with pytest.raises(FrozenInstanceError):
        record.content = {}  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(record)) == record
    model.close()


def test_only_a_frozen_slotted_dataclass_of_plain_fields_is_taken() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            assert self.a > 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Checked):
        b: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class NotInit:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Given:
        a: int
        scale: dataclasses.InitVar[int] = 1

    for cls in (Mutable, NoSlots, Checked, Derived, NotInit, Given, dict):
        with pytest.raises(TypeError):
            builder(cls)


@dataclasses.dataclass(frozen=True, slots=True)
class Limited:  # at module level: pickling finds it by name
    a: int
    limit: ClassVar[int] = 3


def test_a_class_variable_is_no_field_and_does_not_stand_in_the_way() -> None:
    same_object(builder(Limited)(7), Limited(7))


def test_a_copied_pending_write_still_says_undecoded() -> None:
    write = PendingWrite(RecordKind.LEVEL, "notes", "scout", '{"a": 1}')
    assert write.content is UNDECODED
    for twin in (copy.copy(write), copy.deepcopy(write), pickle.loads(pickle.dumps(write))):
        assert twin.content is UNDECODED  # else the store would keep the marker as content

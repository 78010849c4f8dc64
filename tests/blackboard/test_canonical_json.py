"""Canonical JSON: the text the board keeps is json's own, whichever encoder wrote it.

``blackboard._json.encode`` hands exact dicts, lists, str, int, bool and None to orjson
and everything else (floats, subclasses, ints past 64 bits, lone surrogates) to json's
encoder. Either way the text must be the one ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` writes: stored payloads, unique keys,
fingerprints and board digests are all computed from it, so one character of
difference would split equal values on a board written before and after the change.

``encode_decoded`` (the write path's) first tries orjson's round trip: a value whose text
reads back equal is taken without ``_check``'s walk. Its guards (floats json writes
otherwise, nesting depth) are what the edge cases below probe.
"""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blackboard._json
from blackboard import ContentError, Level, Premise, ProposedContribution, Rejected, create_model
from blackboard._json import UNDECODED, decode, encode, encode_decoded


def reference(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


# Every code point but the surrogates (lone ones are refused; see below): control
# characters, DEL, U+2028, the BOM and astral characters are where encoders differ.
text = st.text(st.characters(codec="utf-8"), max_size=12)
ints = st.integers(min_value=-(2**70), max_value=2**70)  # past orjson's 64 bits both ways
floats = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | ints | text
json_values = st.recursive(
    scalars | floats,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)
exact_values = st.recursive(  # no float anywhere: the values orjson encodes
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(exact_values)
def test_values_without_floats_encode_as_json_does(value: Any) -> None:
    assert encode(value, "content") == reference(value)
    assert decode(encode(value, "content")) == value


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_json_value_encodes_as_json_does(value: Any) -> None:
    assert encode(value, "content") == reference(value)


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


class Plain(enum.Enum):
    ONE = 1


class Letter(enum.StrEnum):
    A = "a"


_DEPTH = 200  # blackboard._json's limit of nesting


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        1e-07,  # orjson writes 1e-7
        {"small": [1e-07, 2.5e-10], "n": 1},
        2**64,  # past orjson's range: json writes it
        -(2**63) - 1,
        [2**63, -(2**63), 2**64 - 1],  # the edges orjson does write
        {"\u2028": "\x00\x1f\x7f\ufeff\U0001f600", "": ""},
        {"b": 1, "a": {"d": [], "c": {}}, "\u00e9": 2, "z": 3, "Z": 4},
        Colour.RED,
        [Colour.RED, True, 0],
        Name("x"),
        {Name("k"): Name("v")},
        OrderedDict([("b", 1), ("a", 2)]),
        [[[[[]]]]],
    ],
)
def test_edge_values_encode_as_json_does(value: Any) -> None:
    assert encode(value, "content") == reference(value)
    text, decoded = encode_decoded(value, "content")
    assert text == reference(value)
    if decoded is not UNDECODED:
        assert _shape(decoded) == _shape(decode(text))


# Where orjson writes a float unlike json (json takes an exponent from 1e16 and below
# 1e-4, orjson below 1e-7 only, always with a sign), around those edges, and strings
# that look like the guards' marks.
FLOAT_EDGES = [
    1e-05,  # orjson: 0.00001
    -9.999e-05,
    0.0001,  # both: 0.0001
    0.00012345,
    1e-07,
    5e-324,
    -0.0,
    1.0,
    123456789012345.6,
    9999999999999998.0,
    1e16,  # both: 1e+16
    1.5e22,
    1.7976931348623157e308,
    {"f": [0.5, 1e-05, {"g": 2.5e-10}], "s": "0.00001"},
    {"s": "e+1 e-1 0.0000", "n": 1},
    [1e-05] * 3,
]


@pytest.mark.parametrize("value", FLOAT_EDGES)
def test_floats_at_the_encoders_edges_keep_json_s_text(value: Any) -> None:
    text, decoded = encode_decoded(value, "content")
    assert text == reference(value) == encode(value, "content")
    assert decoded is UNDECODED or _shape(decoded) == _shape(decode(text))


@pytest.mark.parametrize(
    "value",
    [
        _nested(_DEPTH),  # 200 levels, the most that is kept: a short text
        [_nested(_DEPTH - 1), "x" * 500],  # the same in a long one, where brackets are counted
        ["[" * 300, {"k": "{" * 300}],  # brackets in strings: counted, not nesting
        Colour.RED,  # an int enum is its value, as json writes it
        {"c": [Colour.RED], "l": Letter.A},
    ],
)
def test_values_the_round_trip_checks_are_kept_as_json_writes_them(value: Any) -> None:
    text, decoded = encode_decoded(value, "content")
    assert text == reference(value)
    assert decoded is not UNDECODED
    assert _shape(decoded) == _shape(decode(text))


def test_plain_content_is_taken_without_the_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lever itself: what the write path writes most (exact values) skips ``_check``."""
    walked: list[object] = []
    real = blackboard._json._check

    def counting(value: Any, what: str, depth: int) -> bool:
        walked.append(value)
        return real(value, what, depth)

    monkeypatch.setattr(blackboard._json, "_check", counting)
    record = {"key": "e1", "attempt": 2, "writes": [[None, 3]], "ok": False, "r": None, "x": 0.5}
    assert encode_decoded(record, "content") == (reference(record), record)
    assert walked == []
    encode_decoded({"s": "e-mail"}, "content")  # a guard's mark: _check decides
    assert walked == [{"s": "e-mail"}]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("\ud800", "lone surrogate"),
        ({"\udfff": 1}, "lone surrogate"),
        ({"k": ["ok", "a\ud83dz"]}, "lone surrogate"),
        (float("nan"), "non-finite number nan"),
        ({"x": [float("inf")]}, "non-finite number inf"),
        ((1, 2), "of type tuple"),
        ({1: "a"}, "non-string key 1"),
        ({"k": [1, (2,)]}, "of type tuple"),  # orjson writes a tuple as a list
        ({"k": Plain.ONE}, "of type Plain"),  # and a plain enum as its value
        ({"k": float("-inf")}, "non-finite number -inf"),  # and these as null
        (_nested(_DEPTH + 1), "nests deeper than 200"),  # 201 levels: a short text
        ([_nested(_DEPTH), "x" * 500], "nests deeper than 200"),  # and a long one
    ],
)
def test_refusals_are_the_same_on_every_path(value: Any, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        encode(value, "content")
    with pytest.raises(ContentError, match=message):
        encode_decoded(value, "content")


def test_a_board_keeps_the_canonical_text_through_the_write_path() -> None:
    model = create_model([Level("notes"), Level("once", unique=True)])
    values = [{"b": [1, 2**64], "a": "\u2028"}, {"f": 1e-07}, {"plain": [True, None, "x"]}]
    for value in values:
        model.control.write("clerk", "notes", value)
        model.control.write("clerk", "once", value)
    stored = [c.content for c in model.reader.read_level("notes")]
    assert stored == values
    for value in values:  # the unique key is the canonical text's: the same value is a duplicate
        result = model.control.write("clerk", "once", json.loads(reference(value)))
        assert isinstance(result, Rejected)


def _shape(value: Any) -> Any:
    """``value`` with every type and every dict's key order made visible, for ``==``."""
    if isinstance(value, dict):
        return (type(value), [(type(k), k, _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return (type(value), [_shape(v) for v in value])
    return (type(value), value)


def _containers(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


# JSON values with, here and there, what JSON cannot keep or keeps as something else.
unkeepable = st.sampled_from(
    [(1,), float("nan"), float("inf"), Plain.ONE, Name("n"), OrderedDict(a=1), b"x", {1: 2}]
)
mixed_values = st.recursive(
    scalars | floats | unkeepable,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(mixed_values)
def test_the_write_path_refuses_or_keeps_exactly_as_json_would(value: Any) -> None:
    """``encode_decoded`` and ``encode`` agree on every value: the same text or the same error."""
    try:
        expected = encode(value, "content")
    except ContentError as refused:
        reason = str(refused)
    else:
        reason = ""
    if reason:
        with pytest.raises(ContentError) as caught:
            encode_decoded(value, "content")
        assert str(caught.value) == reason
        return
    text, decoded = encode_decoded(value, "content")
    assert text == expected
    if decoded is not UNDECODED:
        assert _shape(decoded) == _shape(decode(text))


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_the_decoded_copy_is_what_decoding_the_text_gives(value: Any) -> None:
    text, decoded = encode_decoded(value, "content")
    assert text == encode(value, "content")
    if decoded is UNDECODED:  # floats, ints past 64 bits: the store decodes the text
        return
    assert _shape(decoded) == _shape(decode(text))  # types and key order included
    assert not set(_containers(decoded)) & set(_containers(value))  # nothing shared


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_writer_changing_its_value_afterwards_changes_nothing_stored(
    store: str, tmp_path: Path
) -> None:
    url = None if store == "memory" else f"sqlite:///{tmp_path / 'board.db'}"
    model = create_model(
        [Level("notes"), Premise("window")], premises={"window": {"n": [1]}}, store=url
    )
    value: dict[str, Any] = {"z": [1, {"deep": ["x"]}], "a": {"b": 2}}
    model.control.write("clerk", "notes", value)
    model.control.write_all([ProposedContribution("clerk", "notes", value)])
    premise: dict[str, Any] = {"n": [2], "m": "x"}
    model.control.set_premise("clerk", "window", premise, expected_version=1)
    value["z"][1]["deep"].append("y")
    value["a"]["c"] = 3
    value["new"] = True
    premise["n"].append(3)
    expected = {"a": {"b": 2}, "z": [1, {"deep": ["x"]}]}
    for record in model.reader.read_level("notes"):
        assert record.content == expected
        assert list(record.content) == ["a", "z"]  # sorted, as decoding the stored text gives
    assert model.reader.read_premise("window").value == {"m": "x", "n": [2]}
    model.close()

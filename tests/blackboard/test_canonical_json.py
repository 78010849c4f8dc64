"""Canonical JSON: the text the board keeps is json's own, whichever encoder wrote it.

``blackboard._json.encode`` hands exact dicts, lists, str, int, bool and None to orjson
and everything else (floats, subclasses, ints past 64 bits, lone surrogates) to json's
encoder. Either way the text must be the one ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` writes: stored payloads, unique keys,
fingerprints and board digests are all computed from it, so one character of
difference would split equal values on a board written before and after the change.
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
    ],
)
def test_refusals_are_the_same_on_every_path(value: Any, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        encode(value, "content")


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

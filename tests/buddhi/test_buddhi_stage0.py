"""Stage 0: raw input to typed items, 1:1, with a recorded trigger flag."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from buddhi_support import policy

from buddhi import Attempt, Item, condition
from buddhi.errors import ConditioningError, ItemError
from buddhi.reference import ReferencePack
from buddhi.stage0 import condition as stage0_condition
from buddhi.stage0.conditioning import condition as seed_path_condition


def test_the_seed_path_and_the_facade_are_the_same_function() -> None:
    assert condition is stage0_condition is seed_path_condition


def test_conditioning_is_a_one_to_one_identity_pass_through() -> None:
    payload = {"reading": [1, 2, 3]}
    raw: list[Item | Mapping[str, object]] = [
        {"id": "a", "source": "s", "payload": payload, "confidence": 0.5},
        {"id": "b", "source": "t", "history": [{"score": 1.0}, {"transient": True}, {}]},
        Item("c", "u", "kept"),
    ]
    items = condition(raw)
    assert [item.id for item in items] == ["a", "b", "c"]
    assert items[0].payload is payload
    assert items[0] == Item("a", "s", payload, 0.5)
    assert items[1].history == (Attempt(1.0), Attempt(transient=True), Attempt())
    assert items[2] is raw[2]
    assert not any(item.flagged for item in items)


def test_the_trigger_hook_records_a_flag_and_leaves_the_payload_untouched() -> None:
    payload = "disk FULL on host 7"
    pack = ReferencePack(policy(trigger_words=("full", "panic")))
    items = condition(
        [{"id": "a", "source": "s", "payload": payload}, {"id": "b", "source": "s"}],
        pack.detect_trigger,
    )
    assert items[0].trigger == "keyword:full" and items[0].flagged
    assert items[0].payload is payload
    assert items[1].trigger is None


def test_the_reference_hook_is_a_no_op_without_words() -> None:
    items = condition(
        [{"id": "a", "source": "s", "payload": "panic"}], ReferencePack().detect_trigger
    )
    assert items[0].trigger is None


def test_any_plain_function_is_a_hook() -> None:
    items = condition([{"id": "a", "source": "s"}], lambda item: f"seen:{item.id}")
    assert items[0].trigger == "seen:a"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (42, r"raw input #1 is a int"),
        ({"source": "s"}, r"raw input #1 lacks \['id'\]"),
        ({"id": "x"}, r"raw input #1 lacks \['source'\]"),
        ({"id": "x", "source": "s", "extra": 1}, r"unknown keys \['extra'\].*'payload'"),
        ({"id": "", "source": "s"}, "id must be a non-empty str"),
        ({"id": 7, "source": "s"}, "id must be a non-empty str"),
        ({"id": "x", "source": None}, "source must be a str"),
        ({"id": "x", "source": "s", "confidence": 1.5}, r"confidence must be a finite number"),
        ({"id": "x", "source": "s", "confidence": math.nan}, r"confidence must be a finite number"),
        ({"id": "x", "source": "s", "history": "abc"}, "history must be a sequence"),
        ({"id": "x", "source": "s", "history": [3]}, "an attempt is an Attempt or a mapping"),
        ({"id": "x", "source": "s", "history": [{"score": "hi"}]}, "score must be a finite"),
        ({"id": "x", "source": "s", "history": [{"score": 1, "transient": True}]}, "no score"),
        ({"id": "x", "source": "s", "history": [{"transient": "yes"}]}, "must be a bool"),
        ({"id": "first", "source": "s"}, r"raw input #1 repeats id 'first' of raw input #0"),
    ],
)
def test_raw_input_stage0_cannot_type_is_named(raw: object, message: str) -> None:
    with pytest.raises(ConditioningError, match=message) as info:
        condition([{"id": "first", "source": "s"}, raw])  # type: ignore[list-item]
    assert info.value.index == 1


def test_a_hook_returning_a_non_flag_is_refused() -> None:
    with pytest.raises(ConditioningError, match="returned 1 for raw input #0"):
        condition([{"id": "a", "source": "s"}], lambda item: 1)  # type: ignore[arg-type]


def test_items_refuse_bad_fields_directly() -> None:
    with pytest.raises(ItemError, match="history holds"):
        Item("a", "s", history=(1.0,))  # type: ignore[arg-type]
    with pytest.raises(ItemError, match="trigger must be a str"):
        Item("a", "s", trigger=True)  # type: ignore[arg-type]
    assert Item("a", "s", history=(Attempt(transient=True),) * 2).transient_failures == 2

"""The values of the human-loop protocol: what they accept, refuse, and how they round-trip."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from datetime import UTC, datetime

import pytest
from human_support import HOSTILE, make_ask
from hypothesis import given
from hypothesis import strategies as st

import pybb.human as human
from blackboard import Level
from pybb.errors import PybbError
from pybb.human import (
    HUMAN_REGIONS,
    Answer,
    Ask,
    Closure,
    MalformedContentError,
    Option,
    human_name,
    human_writer,
)

NOW = datetime(2025, 5, 9, 14, 3, tzinfo=UTC)


def test_the_regions_are_three_levels_unique_on_ask_id() -> None:
    assert (
        Level("asks", unique="ask_id"),
        Level("answers", unique="ask_id"),
        Level("ask_closures", unique="ask_id"),
    ) == HUMAN_REGIONS


def test_all_is_sorted_and_names_what_exists() -> None:
    exported = list(human.__all__)
    key = lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)  # noqa: E731
    assert exported == sorted(exported, key=key)
    assert all(hasattr(human, n) for n in exported)


def test_errors_are_rooted_at_pybb_error() -> None:
    assert issubclass(MalformedContentError, PybbError)
    with pytest.raises(MalformedContentError) as caught:
        human_writer("no spaces allowed")
    assert caught.value.kind == "human"
    assert "'no spaces allowed'" in str(caught.value)


def test_human_names() -> None:
    assert human_writer("alice") == "human:alice"
    assert human_name("human:alice") == "alice"
    for bad in ("alice", "human:", "human:a b", "human:<b>", "human:" + "x" * 65, None, 3):
        assert human_name(bad) is None


def test_an_ask_round_trips_through_json_hostile_text_and_all() -> None:
    ask = make_ask("a-1", to=("human:alice",))
    again = Ask.from_json(ask.to_json())
    assert again == ask
    assert again.report_data == {"pcr": 7, "html": HOSTILE[0]}
    assert ask.recommended.id == "accept"
    assert ask.option("quarantine") is not None
    assert ask.option("nope") is None
    assert ask.addressed_to("human:alice")
    assert not ask.addressed_to("human:bob")
    assert make_ask("a-2").addressed_to("human:anyone")


def test_answers_and_closures_round_trip() -> None:
    answer = Answer("a-1", "accept", "human:alice", "<b>note</b>", NOW)
    closure = Closure("a-1", "resolved on the board <script>", NOW)
    assert Answer.from_json(answer.to_json()) == answer
    assert Closure.from_json(closure.to_json()) == closure


def _ask(**changes: object) -> Ask:
    return dataclasses.replace(make_ask("a-1"), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"ask_id": ""}, "ask_id"),
        ({"ask_id": "has space"}, "ask_id"),
        ({"ask_id": "a/b"}, "ask_id"),
        ({"ask_id": "x" * 129}, "ask_id"),
        ({"title": "  "}, "title"),
        ({"title": 3}, "title"),
        ({"report": "x" * 70_000}, "report"),
        ({"options": (Option("a", "A", True),)}, "options"),
        ({"options": tuple(Option(f"o{i}", "O", i == 0) for i in range(5))}, "options"),
        ({"options": (Option("a", "A"), Option("b", "B"))}, "options"),
        ({"options": (Option("a", "A", True), Option("b", "B", True))}, "options"),
        ({"options": (Option("a", "A", True), Option("a", "B"))}, "options"),
        ({"options": "ab"}, "options"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": -0.1}, "confidence"),
        ({"confidence": math.nan}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"created_at": datetime(2025, 5, 9)}, "created_at"),
        ({"report_data": {"x": math.inf}}, "report_data"),
        ({"report_data": {"x": object()}}, "report_data"),
        ({"report_data": ["not", "a", "mapping"]}, "report_data"),
        ({"to": ("alice",)}, "to"),
        ({"to": "human:alice"}, "to"),
    ],
)
def test_a_malformed_ask_is_refused_naming_the_field(
    changes: dict[str, object], field: str
) -> None:
    with pytest.raises(MalformedContentError) as caught:
        _ask(**changes)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "build",
    [
        lambda: Option("", "label"),
        lambda: Option("id", ""),
        lambda: Option("id", "label", recommended="yes"),  # type: ignore[arg-type]
        lambda: Answer("a-1", "accept", "alice"),
        lambda: Answer("a-1", "bad option", "human:alice"),
        lambda: Answer("a-1", "accept", "human:alice", "x" * 2001),
        lambda: Closure("a-1", ""),
        lambda: Closure("a 1", "why"),
    ],
)
def test_malformed_options_answers_and_closures_are_refused(build: object) -> None:
    with pytest.raises(MalformedContentError):
        build()  # type: ignore[operator]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)


def _mutations(base: dict[str, object]) -> st.SearchStrategy[object]:
    keys = sorted(base)
    return st.one_of(
        json_values,
        st.builds(lambda k, v: {**base, k: v}, st.sampled_from(keys), json_values),
        st.builds(lambda k: {n: v for n, v in base.items() if n != k}, st.sampled_from(keys)),
    )


@given(_mutations(make_ask("a-1").to_json()))
def test_reading_any_json_as_an_ask_gives_an_ask_or_a_typed_error(data: object) -> None:
    with contextlib.suppress(MalformedContentError):
        Ask.from_json(data)


@given(_mutations(Answer("a-1", "accept", "human:alice", "", NOW).to_json()))
def test_reading_any_json_as_an_answer_gives_an_answer_or_a_typed_error(data: object) -> None:
    with contextlib.suppress(MalformedContentError):
        Answer.from_json(data)


@given(st.text(max_size=300), st.text(max_size=300), st.text(min_size=1, max_size=300))
def test_any_text_survives_a_round_trip_unchanged(report: str, subject: str, title: str) -> None:
    if not title.strip():
        title = "t" + title
    ask = dataclasses.replace(make_ask("a-1"), report=report, subject=subject, title=title)
    assert Ask.from_json(ask.to_json()) == ask

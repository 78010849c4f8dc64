"""Every bad input of issue 3: a clear error naming the entry and the fix, nothing written."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

import pytest
from pybb_sources import Dec

from pybb import (
    Blackboard,
    BlackboardEntry,
    ComponentError,
    Controller,
    DuplicateSourceError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PredicateError,
    PybbError,
    ResolutionError,
    RetryPolicy,
    RouteError,
    SourceError,
    UnknownSourceError,
    UnregisteredPredicateError,
)

OpenBoard = Callable[..., Blackboard]


@contextmanager
def unchanged(board: Blackboard) -> Iterator[None]:
    """The board's digest and head are the same after the block as before it."""
    digest, head = board.digest(), board.model.reader.head()
    yield
    assert (board.digest(), board.model.reader.head()) == (digest, head)


def pair(**measurement: object) -> BlackboardEntry:
    return BlackboardEntry(
        conditions={"x": "less_than_3", "y": "is_positive"}, measurement=measurement
    )


def test_an_unregistered_predicate_is_refused_before_the_run_writes(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = Controller(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    board.write_entry("ok", BlackboardEntry(predicate="less_than_3", measurement=1))
    board.write_entry("e1", BlackboardEntry(predicate="is_tiny", measurement=5))
    with unchanged(board), pytest.raises(UnregisteredPredicateError) as caught:
        ctl.run()
    message = str(caught.value)
    assert (
        "'e1'" in message and "'is_tiny'" in message and "register_predicate('is_tiny'" in message
    )
    assert (caught.value.key, caught.value.predicate) == ("e1", "is_tiny")
    ctl.register_predicate("is_tiny", lambda m: m < 1)
    assert ctl.run().entries == 2


def test_an_unregistered_condition_predicate_is_refused(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = Controller(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    board.write_entry("p1", pair(x=1, y=1))
    with unchanged(board), pytest.raises(UnregisteredPredicateError, match=r"'p1'.*'is_positive'"):
        ctl.run()


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (BlackboardEntry(measurement=5), "neither a predicate nor conditions"),
        (
            BlackboardEntry(predicate="p", conditions={"x": "p"}, measurement={"x": 1}),
            "both a predicate and conditions",
        ),
        (pair(x=1), r"components \['x', 'y'\] but its measurement has \['x'\]"),
        (pair(x=1, y=2, z=3), r"but its measurement has \['x', 'y', 'z'\]"),
        (
            BlackboardEntry(conditions={"x": "p"}, measurement=5),
            r"components \['x'\] but its measurement has 5",
        ),
        (BlackboardEntry(conditions={}, measurement={}), "non-empty mapping"),
        (BlackboardEntry(predicate="", measurement=1), "non-empty name"),
        (BlackboardEntry(predicate="p", measurement=math.nan), "non-finite number nan"),
        (BlackboardEntry(predicate="p", measurement={1: 2}), "non-string key 1"),
        (BlackboardEntry(predicate="p", measurement=(1, 2)), "of type tuple"),
        (BlackboardEntry(predicate="p", measurement={"a": {1, 2}}), "of type set"),
    ],
)
def test_an_entry_that_cannot_be_written_names_the_entry_and_the_fix(
    open_board: OpenBoard, entry: BlackboardEntry, fragment: str
) -> None:
    board = open_board()
    with unchanged(board), pytest.raises(EntryError, match=fragment) as caught:
        board.write_entry("e1", entry)
    assert str(caught.value).startswith("entry 'e1': ") and caught.value.key == "e1"
    assert board.get_all_entries() == {}


@pytest.mark.parametrize("key", ["", 7, None, "k" * 129])
def test_a_bad_key_is_refused(open_board: OpenBoard, key: object) -> None:
    board = open_board()
    with unchanged(board), pytest.raises(EntryError, match=r"key .* is not usable"):
        board.write_entry(key, BlackboardEntry(predicate="p", measurement=1))  # type: ignore[arg-type]


def test_a_bad_segment_and_a_non_entry_are_refused(open_board: OpenBoard) -> None:
    board = open_board()
    with unchanged(board):
        with pytest.raises(EntryError, match="segment 'limbo'"):
            board.write_entry("e1", BlackboardEntry(predicate="p", measurement=1), segment="limbo")
        with pytest.raises(EntryError, match="expected a BlackboardEntry"):
            board.write_entry("e1", {"predicate": "p"})  # type: ignore[arg-type]


def test_a_key_holding_a_different_entry_is_refused(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("e1", BlackboardEntry(predicate="p", measurement=1))
    board.write_entry("e1", BlackboardEntry(predicate="p", measurement=1))  # the same: no-op
    with unchanged(board), pytest.raises(EntryExistsError, match=r"'e1'.*already holds"):
        board.write_entry("e1", BlackboardEntry(predicate="p", measurement=2))


def test_write_component_on_a_missing_component(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("p1", pair(x=5, y=-2))
    board.write_entry("e1", BlackboardEntry(predicate="p", measurement=5))
    with unchanged(board):
        with pytest.raises(ComponentError, match=r"'p1': it has no component 'z'.*\['x', 'y'\]"):
            board.write_component("p1", "z", 1)
        with pytest.raises(ComponentError, match="'e1': it has a single measurement"):
            board.write_component("e1", "x", 1)
        with pytest.raises(ComponentError, match="no component 'z'"):
            board.restore_component("p1", "z")
        with pytest.raises(EntryError, match="non-finite"):
            board.write_component("p1", "x", math.inf)
        with pytest.raises(EntryNotFoundError, match="no entry 'nope'"):
            board.write_component("nope", "x", 1)


def test_write_component_on_a_missing_component_inside_a_source_fails_its_attempt(
    open_board: OpenBoard,
) -> None:
    from pybb_sources import SetComponent

    board = open_board()
    ctl = Controller(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.register_predicate("is_positive", lambda m: m > 0)
    ctl.route("p1", [SetComponent("typo", 1, target="z", value=0)])
    board.write_entry("p1", pair(x=5, y=-2))
    ctl.run()
    attempt = next(e.data for e in board.get_history("p1") if e.kind == "attempt")
    assert attempt["status"] == "error" and "it has no component 'z'" in attempt["error"]


def test_two_different_sources_with_one_name(open_board: OpenBoard) -> None:
    ctl = Controller(open_board())
    ctl.add_ks(Dec("dec", 3))
    ctl.add_ks(ctl.knowledge_sources[0])  # the same source again: fine
    with pytest.raises(DuplicateSourceError, match=r"'dec'.*own name"):
        ctl.add_ks(Dec("dec", 2))
    with pytest.raises(DuplicateSourceError):
        ctl.route("e1", [Dec("dec", 3)])
    assert len(ctl.knowledge_sources) == 1 and ctl.routes == {}


@pytest.mark.parametrize("max_attempts", [0, -1, 1.5, True, "3"])
def test_max_attempts_must_be_positive(max_attempts: object) -> None:
    with pytest.raises(SourceError, match="'dec': max_attempts must be a positive integer"):
        Dec("dec", max_attempts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": ""}, "name '' is invalid"),
        ({"name": "a/b"}, "without '/'"),
        ({"name": "n" * 65}, "at most 64"),
        ({"component": ""}, "component must be a non-empty string"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"timeout": -1.0}, "timeout must be positive"),
        ({"timeout": math.nan}, "timeout must be"),
        ({"timeout": "1s"}, "timeout must be a timedelta"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
    ],
)
def test_a_source_declared_wrongly(kwargs: dict[str, object], fragment: str) -> None:
    options = {"name": "dec", **kwargs}
    with pytest.raises(SourceError, match=fragment):
        Dec(options.pop("name"), 1, **options)  # type: ignore[arg-type]


def test_a_retry_policy_declared_wrongly() -> None:
    from datetime import timedelta

    with pytest.raises(SourceError, match="initial_interval"):
        RetryPolicy(timedelta(seconds=-1))
    with pytest.raises(SourceError, match="backoff_coefficient"):
        RetryPolicy(timedelta(seconds=1), 0.5)
    with pytest.raises(SourceError, match="maximum_interval"):
        RetryPolicy(timedelta(seconds=1), 2.0, timedelta(seconds=-1))


def test_routes_and_predicates_declared_wrongly(open_board: OpenBoard) -> None:
    ctl = Controller(open_board())
    dec = Dec("dec", 1)
    with pytest.raises(RouteError, match="give chain or on_fail, not both"):
        ctl.route("e1", [dec], on_fail=[dec])
    with pytest.raises(RouteError, match="names source 'dec' twice"):
        ctl.route("e1", [dec, dec])
    with pytest.raises(RouteError, match="must be a list of sources"):
        ctl.route("e1", dec)  # type: ignore[arg-type]
    with pytest.raises(RouteError, match="not a KnowledgeSource"):
        ctl.route("e1", ["dec"])  # type: ignore[list-item]
    with pytest.raises(PredicateError, match="must be callable"):
        ctl.register_predicate("p", 3)  # type: ignore[arg-type]
    with pytest.raises(PredicateError, match="non-empty string"):
        ctl.register_predicate("", bool)
    with pytest.raises(RouteError, match="max_cycles"):
        Controller(open_board(), max_cycles=0)
    assert ctl.routes == {} and ctl.knowledge_sources == []


def test_a_resumed_board_needs_its_recorded_sources(open_board: OpenBoard) -> None:
    board = open_board()
    ctl = Controller(board, max_cycles=1)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.route("e1", [Dec("dec", 5)])
    board.write_entry("e1", BlackboardEntry(predicate="less_than_3", measurement=9))
    ctl.run()
    resumed = Controller(open_board())
    resumed.register_predicate("less_than_3", lambda m: m < 3)
    with unchanged(board), pytest.raises(UnknownSourceError, match=r"'e1'.*'dec'.*add_ks"):
        resumed.run()


def test_resolutions_given_wrongly(open_board: OpenBoard) -> None:
    board = open_board()
    board.write_entry("p1", pair(x=5, y=-2), segment="escalate")
    with unchanged(board):
        with pytest.raises(ResolutionError, match=r"'p1'.*decision must be a non-empty string"):
            board.resolve("p1", "", by="alice")
        with pytest.raises(ResolutionError, match="by must be"):
            board.resolve("p1", "ok", by="")
        with pytest.raises(ResolutionError, match="timezone-aware"):
            board.resolve("p1", "ok", by="alice", at=datetime(2026, 1, 1))
        with pytest.raises(ResolutionError, match=r"measurement has \['x'\]"):
            board.resolve("p1", "ok", by="alice", measurement={"x": 1})
        with pytest.raises(ResolutionError, match="non-finite"):
            board.resolve("p1", "ok", by="alice", measurement=math.nan)
        with pytest.raises(EntryNotFoundError):
            board.resolve("nope", "ok", by="alice")


def test_every_error_is_a_pybb_error_ending_in_error() -> None:
    import pybb.errors

    for name in pybb.errors.__all__:
        cls = getattr(pybb.errors, name)
        assert issubclass(cls, PybbError) and name.endswith("Error"), name
    assert issubclass(EntryNotFoundError, KeyError)


def test_a_blackboard_declared_wrongly() -> None:
    from blackboard import Level

    with pytest.raises(PybbError, match="writer '@me' is not usable"):
        Blackboard(writer="@me")
    with pytest.raises(PybbError, match="writer 'ks:me' is not usable"):
        Blackboard(writer="ks:me")
    with pytest.raises(PybbError, match=r"prefix 'pybb\.'"):
        Blackboard(regions=[Level("pybb.mine")])


def test_a_closed_board_and_a_broken_rule_stop_the_run_with_nothing_written() -> None:
    from blackboard import AdmissionRuleError
    from pybb import BoardClosedError

    board = Blackboard()
    ctl = Controller(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.route("e1", [Dec("dec", 3)])
    board.write_entry("e1", BlackboardEntry(predicate="less_than_3", measurement=5))
    board.model.control.abort("the operator stopped it")
    with unchanged(board), pytest.raises(BoardClosedError, match="operator stopped it"):
        ctl.run()

    def broken(proposed: object, reader: object) -> object:
        raise RuntimeError("oops")

    board = Blackboard(admission_rule=broken)  # type: ignore[arg-type]
    ctl = Controller(board)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.route("e1", [Dec("dec", 3)])
    board.write_entry("e1", BlackboardEntry(predicate="less_than_3", measurement=5))
    with unchanged(board), pytest.raises(AdmissionRuleError, match="RuntimeError: oops"):
        ctl.run()

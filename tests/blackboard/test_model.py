"""Declaring models, reopening runs, the control loop and the read side."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from blackboard import (
    Agent,
    BoardNotFoundError,
    BoardReader,
    Level,
    Model,
    ModelError,
    ModelMismatchError,
    Notification,
    Premise,
    RegionKindError,
    RunStatus,
    SequenceError,
    UndeclaredRegionError,
    Written,
    attach,
    create_model,
)
from blackboard.errors import StoreConfigError
from blackboard.stores import open_store
from storekit import StoreSpec

REGIONS: list[Level | Premise] = [Level("findings"), Premise("window")]


def _open(spec: StoreSpec, **kwargs: Any) -> Model:
    kwargs.setdefault("regions", REGIONS)
    kwargs.setdefault("premises", {"window": 5})
    return create_model(store=spec.open(), board_id="run-1", **kwargs)


def test_reopening_resumes_the_same_run(store_spec: StoreSpec) -> None:
    first = _open(store_spec)
    first.control.write("w", "findings", {"f": 1})
    first.control.set_premise("w", "window", 6, expected_version=1)
    digest = first.reader.digest()
    first.close()

    again = _open(store_spec, premises={"window": 99})  # opening values are not written again
    assert again.reader.digest() == digest
    assert again.reader.read_premise("window").value == 6
    assert again.control.write("w", "findings", {"f": 2}) == Written(4)


def test_a_closed_run_stays_closed_after_reopening(store_spec: StoreSpec) -> None:
    first = _open(store_spec)
    first.control.abort("enough")
    first.close()
    again = _open(store_spec)
    assert again.control.outcome().status is RunStatus.ABORTED
    assert not isinstance(again.control.write("w", "findings", {}), Written)


def test_reopening_with_a_different_model_is_refused(store_spec: StoreSpec) -> None:
    _open(store_spec).close()
    with pytest.raises(ModelMismatchError, match="run-1"):
        _open(store_spec, regions=[Level("findings"), Level("more"), Premise("window")])
    with pytest.raises(ModelMismatchError):
        _open(store_spec, agents=[Agent("a", writes_to=["findings"])])
    assert _open(store_spec).reader.head() == 1


def test_boards_in_one_store_are_independent(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    one = create_model(regions=REGIONS, premises={"window": 1}, store=store, board_id="one")
    two = create_model(regions=[Level("x")], store=store, board_id="two")
    one.control.write("w", "findings", 1)
    assert two.reader.head() == 0
    assert two.control.write("w", "x", 1) == Written(1)


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"regions": []}, ModelError, "at least one region"),
        ({"regions": [Level("a"), Level("a")]}, ModelError, "declared twice"),
        ({"regions": ["a"]}, ModelError, "is not a region"),
        ({"regions": [Level("")]}, ModelError, "name ''"),
        ({"regions": [Level("@x")]}, ModelError, "'@x'"),
        ({"regions": [Premise("p")]}, ModelError, "no opening value"),
        ({"regions": [Level("a")], "premises": {"b": 1}}, UndeclaredRegionError, "'b'"),
        ({"regions": [Level("a")], "premises": {"a": 1}}, ModelError, "is a level"),
        ({"regions": [Premise("p")], "premises": {"p": float("nan")}}, Exception, "non-finite"),
        (
            {"regions": [Level("a")], "agents": [Agent("x", writes_to=["b"])]},
            UndeclaredRegionError,
            "'b'",
        ),
        (
            {"regions": [Level("a")], "agents": [Agent("x"), Agent("x")]},
            ModelError,
            "declared twice",
        ),
        ({"regions": [Level("a", unique=3)]}, ModelError, "unique"),  # type: ignore[arg-type]
        ({"regions": [Level("a")], "board_id": ""}, ModelError, "board_id"),
    ],
)
def test_inconsistent_declarations_are_clear_errors(
    tmp_path: Any, kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    path = tmp_path / "m.db"
    with pytest.raises(error, match=fragment):
        create_model(store=f"sqlite:///{path}", **kwargs)


def test_store_urls() -> None:
    with pytest.raises(StoreConfigError, match="unknown scheme 'mysql'"):
        open_store("mysql://localhost/x")
    with pytest.raises(StoreConfigError, match="names no file"):
        open_store("sqlite://")
    with pytest.raises(StoreConfigError, match="synchronous"):
        open_store("sqlite:///x.db?synchronous=sometimes")


def test_reader_at_any_past_sequence(store_spec: StoreSpec) -> None:
    model = _open(store_spec)
    model.control.write("w", "findings", {"f": 1})
    model.control.set_premise("w", "window", 6, expected_version=1)
    model.control.write("w", "findings", {"f": 2})
    past = model.reader.at(2)
    assert [c.content for c in past.levels["findings"]] == [{"f": 1}]
    assert past.premises["window"].value == 5
    now = model.reader.at(4)
    assert now.premises["window"].version == 2 and len(now.levels["findings"]) == 2
    assert model.reader.at(0).premises == {}
    for bad in (-1, 5, "2", True):
        with pytest.raises(SequenceError):
            model.reader.at(bad)  # type: ignore[arg-type]
    assert [r.sequence for r in model.reader.log(since=2)] == [3, 4]


def test_digest_is_the_same_on_every_store(store_spec: StoreSpec) -> None:
    model = _open(store_spec)
    model.control.write("w", "findings", {"b": [1, 2.5, "é"], "a": None})
    model.control.set_premise("w", "window", {"k": True}, expected_version=1)
    model.control.abort("stop")
    # Computed once on the memory store; every backend must agree.
    assert model.reader.digest() == _reference_digest()


def _reference_digest() -> str:
    from blackboard.stores import MemoryStore

    model = create_model(
        regions=REGIONS, premises={"window": 5}, store=MemoryStore(), board_id="run-1"
    )
    model.control.write("w", "findings", {"b": [1, 2.5, "é"], "a": None})
    model.control.set_premise("w", "window", {"k": True}, expected_version=1)
    model.control.abort("stop")
    return model.reader.digest()


def test_control_loop_runs_agents_until_quiescent(store_spec: StoreSpec) -> None:
    holder: dict[str, Model] = {}

    def count_down(note: Notification) -> None:
        value = note.record.content
        if value > 0:
            assert note.record.version is not None  # a premise record carries its version
            holder["m"].control.set_premise(
                "counter", "window", value - 1, expected_version=note.record.version
            )

    model = _open(
        store_spec,
        agents=[Agent("counter", subscribes_to=["window"], notify=count_down)],
    )
    holder["m"] = model
    outcome = model.run()
    assert outcome.status is RunStatus.QUIESCENT
    assert model.reader.read_premise("window").value == 0
    assert model.reader.read_premise("window").version == 6


def test_termination_predicate_completes_the_run(store_spec: StoreSpec) -> None:
    def done(reader: BoardReader) -> bool:
        return len(reader.read_level("findings")) >= 2

    model = _open(store_spec, termination_predicate=done)
    model.control.write("w", "findings", 1)
    assert not model.control.outcome().closed
    model.control.write("w", "findings", 2)
    outcome = model.control.outcome()
    assert outcome.status is RunStatus.COMPLETED and outcome.sequence == 4
    assert not isinstance(model.control.write("w", "findings", 3), Written)


def test_follow_yields_writes_as_they_land_until_close(store_spec: StoreSpec) -> None:
    model = _open(store_spec)
    seen: list[int] = []

    def follower() -> None:
        seen.extend(r.sequence for r in model.reader.follow(since=1, timeout=10))

    thread = threading.Thread(target=follower)
    thread.start()
    for i in range(3):
        model.control.write("w", "findings", i)
    model.control.abort("finished")
    thread.join(15)
    assert not thread.is_alive()
    assert seen == [2, 3, 4, 5]


def test_attach_opens_a_run_with_its_stored_declaration(store_spec: StoreSpec) -> None:
    declared = _open(store_spec, agents=[Agent("scout", writes_to=["findings"])])
    declared.control.write("w", "findings", {"f": 1})
    attached = attach(store_spec.open(), "run-1")
    assert attached.regions == declared.regions
    assert attached.reader.digest() == declared.reader.digest()
    with pytest.raises(RegionKindError):  # the kinds came back with the names
        attached.control.write("scout", "window", 1)
    assert attached.control.write("w", "findings", {"f": 2}) == Written(4)
    assert declared.reader.read_level("findings")[-1].content == {"f": 2}


def test_attach_to_a_missing_board_creates_nothing(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    with pytest.raises(BoardNotFoundError, match="no board 'ghost'"):
        attach(store, "ghost")
    assert store.declaration("ghost") is None

"""Assignment: a policy routes asks; a person sees their own and their team's first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from notify_support import START, open_people_board, post

from blackboard import Model, Rejected, Written
from pybb.human import (
    Ask,
    AssignmentPolicy,
    AssignRule,
    DeadlinePolicy,
    MalformedContentError,
    Person,
    answer,
    ask_state,
    asks_for,
    assignee,
    assignees,
    assignments,
    reassign,
    set_person,
)

POLICY = DeadlinePolicy()
ROUTES = AssignmentPolicy(
    rules=(
        AssignRule("human:alice", reason="tampered_component"),
        AssignRule("team:ops", klass="fedora37"),
        AssignRule("human:bob", scope="fleet/site-b"),
    ),
    default="team:triage",
)


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Model]:
    model = open_people_board(tmp_path / "board.db")
    yield model
    model.close()


def _post(board: Model, ask_id: str, minutes: int, **tier: str) -> None:
    scope = tier.pop("scope", "fleet/site-a")
    post(
        board,
        ask_id,
        POLICY,
        created_at=START + timedelta(minutes=minutes),
        report_data={"tier_report": tier},
        scope=scope,
    )


def _ask(board: Model, ask_id: str) -> Ask:
    state = ask_state(board.reader, ask_id)
    assert state is not None
    return state.ask


def test_the_policy_routes_by_reason_class_and_scope(board: Model) -> None:
    _post(board, "t", 0, reason="tampered_component")
    _post(board, "f", 1, **{"class": "fedora37"})
    _post(board, "b", 2, scope="fleet/site-b")
    _post(board, "x", 3)
    routed = {s: assignee(board.reader, _ask(board, s), ROUTES) for s in "tfbx"}
    assert routed == {"t": "human:alice", "f": "team:ops", "b": "human:bob", "x": "team:triage"}


def test_a_person_sees_their_own_then_their_team_s_then_the_rest(board: Model) -> None:
    set_person(board.control, Person("human:carol", teams=("ops",)), writer="admin")
    _post(board, "other-old", 0, reason="tampered_component")  # alice's
    _post(board, "team-old", 1, **{"class": "fedora37"})  # team ops
    _post(board, "rest", 2)  # team triage
    _post(board, "team-new", 3, **{"class": "fedora37"})
    _post(board, "mine", 4)
    reassign(board.control, "human:dave", "mine", "human:carol", "carol knows this rack")
    order = [a.ask_id for a in asks_for(board.reader, "human:carol", ROUTES)]
    assert order == ["mine", "team-old", "team-new", "other-old", "rest"]
    # negative control: without the directory and the policy, it is plain age order
    plain = [a.ask_id for a in asks_for(board.reader, "human:zed")]
    assert plain == ["other-old", "team-old", "rest", "team-new", "mine"]


def test_reassigning_is_a_board_write_with_a_note_admitted_only_from_a_person(
    board: Model,
) -> None:
    _post(board, "a-1", 0)
    written = reassign(board.control, "human:alice", "a-1", "team:ops", "ops owns site A")
    assert isinstance(written, Written)
    (made,) = assignments(board.reader, "a-1")
    assert (made.by, made.to, made.note) == ("human:alice", "team:ops", "ops owns site A")
    assert assignee(board.reader, _ask(board, "a-1"), ROUTES) == "team:ops"
    # a machine may not reassign, nor a person in another's name
    content = {**made.to_json(), "by": "human:alice"}
    machine = board.control.write("pybb:escalation", "assignments", content)
    assert isinstance(machine, Rejected) and "only a person" in machine.reason
    spoof = board.control.write("human:mallory", "assignments", content)
    assert isinstance(spoof, Rejected) and "mallory" in spoof.reason
    with pytest.raises(MalformedContentError, match="neither"):
        reassign(board.control, "human:alice", "a-1", "ops")
    missing = reassign(board.control, "human:alice", "nope", "human:bob")
    assert isinstance(missing, Rejected) and "no ask 'nope'" in missing.reason
    answer(board.control, "human:bob", "a-1", "accept")
    settled = reassign(board.control, "human:alice", "a-1", "human:bob")
    assert isinstance(settled, Rejected) and "only an open ask" in settled.reason
    assert len(assignments(board.reader)) == 1  # nothing refused reached the board


def test_asks_addressed_to_others_are_not_listed(board: Model) -> None:
    post(board, "for-bob", POLICY, to=("human:bob",))
    post(board, "anyone", POLICY)
    assert [a.ask_id for a in asks_for(board.reader, "human:alice", ROUTES)] == ["anyone"]


def test_assignees_of_many_asks_agree_with_assignee_of_each(board: Model) -> None:
    _post(board, "t", 0, reason="tampered_component")
    _post(board, "f", 1, **{"class": "fedora37"})
    _post(board, "x", 2)
    reassign(board.control, "human:alice", "f", "human:bob", "bob has the logs")
    reassign(board.control, "human:bob", "f", "team:ops", "back to ops")  # the latest holds
    asks = [_ask(board, a) for a in "tfx"]
    many = assignees(board.reader, asks, ROUTES)
    assert many == {a.ask_id: assignee(board.reader, a, ROUTES) for a in asks}
    assert many == {"t": "human:alice", "f": "team:ops", "x": "team:triage"}


def test_an_assignment_policy_reads_from_json_and_names_what_is_wrong() -> None:
    data = {
        "default": "team:triage",
        "rules": [
            {"to": "human:alice", "reason": "tampered_component"},
            {"to": "team:ops", "class": "fedora37"},
            {"to": "human:bob", "scope": "fleet/site-b"},
        ],
    }
    assert AssignmentPolicy.from_json(data) == ROUTES
    assert AssignmentPolicy.from_json(ROUTES.to_json()) == ROUTES
    assert AssignmentPolicy.from_json({}) == AssignmentPolicy()
    bad: list[tuple[object, str]] = [
        ([], "must be an object"),
        ({"rule": []}, "'rule'.*not a key"),
        ({"rules": {}}, "rules.*must be a list"),
        ({"rules": ["human:bob"]}, "rule 1.*must be an object"),
        ({"rules": [{"reason": "x"}]}, "rule 1.*to.*missing"),
        ({"rules": [{"to": "human:bob", "klass": "x"}]}, "'klass'.*not a key.*class"),
        ({"rules": [{"to": "human:bob", "class": 3}]}, "class.*must be text"),
        ({"rules": [{"to": "bob"}]}, "neither 'human:<name>' nor 'team:<name>'"),
        ({"default": 7}, "default.*must be"),
        ({"default": "ops"}, "neither"),
    ]
    for data_, message in bad:
        with pytest.raises(MalformedContentError, match=message):
            AssignmentPolicy.from_json(data_)

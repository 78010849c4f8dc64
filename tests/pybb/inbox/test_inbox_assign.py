"""Issue 15, items 1 and 3 as the inbox shows them: each ask's deadline (when, time left, the
default decision) and assignee; a person's own asks first, then their teams', then the
rest; the team filter reading the assignee; reassigning with a note, by form and by the
JSON API, as a board write that shows in the ask's history and the decided view.

Through the real application on a real SQLite run that declares the people levels."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from inbox_support import (
    BUDGET,
    REPO,
    AppClient,
    forms,
    hostile_ask,
    login,
    new_board,
    run_command,
    settings,
)

from blackboard import Level, Model, Premise, create_model
from pybb.human import (
    ASSIGNMENTS,
    HUMAN_REGIONS,
    PEOPLE_REGIONS,
    Ask,
    AssignmentPolicy,
    AssignRule,
    DeadlinePolicy,
    Person,
    answer,
    answer_rule,
    assignments,
    compose_rules,
    post_ask,
    set_person,
)
from pybb.inbox import TokenTable, create_app

ROUTES = AssignmentPolicy(
    rules=(
        AssignRule("human:alice", scope="fleet/site-a"),
        AssignRule("team:ops", klass="rhel9"),
        AssignRule("human:bob", klass="arch"),
    ),
    default="team:triage",
)
DEADLINES = DeadlinePolicy(after=timedelta(hours=2), default="quarantine")


def routed_ask(ask_id: str, *, cls: str, scope: str = "fleet/site-b", age: int = 0) -> Ask:
    """An ask of class ``cls`` with a root cause of its own (no two share a finding)."""
    base = hostile_ask(len(ask_id))
    finding = {"pcr": 4, "found": ask_id, "reason": "tampered_component"}
    tier = {"reason": "tampered_component", "class": cls, "findings": [finding]}
    return dataclasses.replace(
        base, ask_id=ask_id, entry=f"dev-{ask_id}", subject=f"dev-{ask_id}", scope=scope,
        report_data={"tier_report": tier}, created_at=datetime.now(UTC) - timedelta(hours=age),
    )  # fmt: skip


def people_board(path: Path) -> Model:
    return create_model(
        regions=[*HUMAN_REGIONS, *PEOPLE_REGIONS, Level("entries"), Premise("budget")],
        premises={"budget": BUDGET},
        admission_rule=compose_rules(answer_rule),
        store=f"sqlite:///{path}",
        board_id="run-people",
    )


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Model]:
    model = people_board(tmp_path / "people.db")
    set_person(model.control, Person("human:alice", teams=("ops",)), writer="admin")
    set_person(model.control, Person("human:bob", teams=("sec",)), writer="admin")
    set_person(model.control, Person("human:carol", teams=("ops",)), writer="admin")
    # Oldest first: the rest, bob's, the team's, alice's: the list must turn this around.
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-rest", cls="uefi", age=4)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-bob", cls="arch", age=3)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-team", cls="rhel9", age=2)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-mine", cls="uefi", scope="fleet/site-a")))
    yield model
    model.close()


@pytest.fixture
def tokens(tmp_path: Path) -> TokenTable:
    return TokenTable(tmp_path / "tokens.json")


def client_for(model: Model, tokens: TokenTable, **kwargs: Any) -> AppClient:
    return AppClient(create_app(model, tokens, settings=settings(), **kwargs))


@pytest.fixture
def alice(board: Model, tokens: TokenTable) -> Iterator[AppClient]:
    client = client_for(board, tokens, assignment=ROUTES)
    login(client, tokens.issue("alice"))
    yield client
    client.close()


@pytest.fixture
def bob(board: Model, tokens: TokenTable) -> Iterator[AppClient]:
    client = client_for(board, tokens, assignment=ROUTES)
    login(client, tokens.issue("bob"))
    yield client
    client.close()


def order(page: str) -> list[str]:
    return re.findall(r'<article class="card ask[^"]*" id="ask-[^"]+" data-ask="([^"]+)"', page)


def ranks(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-ask="([^"]+)" data-rank="(\w+)"', page))


def reassign_form(page: str, ask_id: str) -> dict[str, str]:
    found = next(f for f in forms(page) if f.action == f"/asks/{ask_id}/reassign")
    return found.fields


def test_a_person_sees_their_own_then_their_team_s_then_the_rest(
    alice: AppClient, bob: AppClient, tokens: TokenTable
) -> None:
    page = alice.get("/").text
    assert order(page) == ["a-mine", "a-team", "a-rest", "a-bob"]
    assert ranks(page) == {"a-mine": "mine", "a-team": "team", "a-rest": "other", "a-bob": "other"}
    assert '<dd class="assignee">you</dd>' in page
    assert '<dd class="assignee">team:ops (your team)</dd>' in page
    assert order(bob.get("/").text)[0] == "a-bob"  # bob's own first for him
    bearer = {"authorization": f"Bearer {tokens.issue('alice')}"}
    listed = alice.get("/api/asks", headers=bearer).json()["asks"]
    assert [a["ask"]["ask_id"] for a in listed] == ["a-mine", "a-team", "a-rest", "a-bob"]
    assert [a["assignee"] for a in listed] == [
        "human:alice",
        "team:ops",
        "team:triage",
        "human:bob",
    ]


def test_the_team_filter_reads_the_assignee(alice: AppClient) -> None:
    ops = alice.get("/?team=ops").text  # the team's ask, and alice's (she is on ops)
    assert sorted(order(ops)) == ["a-mine", "a-team"]
    assert order(alice.get("/?team=triage").text) == ["a-rest"]
    assert order(alice.get("/?team=sec").text) == ["a-bob"]  # bob is on sec


def test_a_card_shows_the_deadline_the_time_left_and_the_default(
    alice: AppClient, board: Model, tokens: TokenTable
) -> None:
    page = alice.get("/").text
    card = page.split('data-ask="a-mine"', 1)[1].split("</article>", 1)[0]
    assert "<dt>Deadline</dt>" in card
    assert re.search(r", in 1 h 5\d min; then <strong class=\"default\">Quarantine ", card), card
    overdue = page.split('data-ask="a-rest"', 1)[1].split("</article>", 1)[0]
    assert "overdue by 2 h" in overdue  # asked 4 h ago with a 2 h deadline
    # An ask posted without a deadline: shown without one, unless the inbox knows the policy.
    post_ask(board.control, routed_ask("a-bare", cls="uefi"))
    bare = alice.get("/asks/a-bare").text
    assert "<dt>Deadline</dt>" not in bare
    knowing = client_for(board, tokens, assignment=ROUTES, deadlines=DEADLINES)
    try:
        login(knowing, tokens.issue("alice"))
        assert re.search(r"in 1 h 5\d min; then <strong", knowing.get("/asks/a-bare").text)
        bearer = {"authorization": f"Bearer {tokens.issue('alice')}"}
        due = knowing.get("/api/asks/a-bare", headers=bearer).json()["due"]
        assert (due["option"], due["overdue"]) == ("quarantine", False)
    finally:
        knowing.close()


def test_reassigning_with_a_note_is_a_board_write_that_moves_the_ask(
    alice: AppClient, bob: AppClient, board: Model, tokens: TokenTable
) -> None:
    page = alice.get("/").text
    fields = {**reassign_form(page, "a-mine"), "to": "bob", "note": "bob knows this shim"}
    done = alice.post("/asks/a-mine/reassign", data=fields)
    assert done.status_code == 303 and done.headers["location"] == "/asks/a-mine"
    made = assignments(board.reader, "a-mine")
    assert [(m.to, m.by, m.note) for m in made] == [
        ("human:bob", "human:alice", "bob knows this shim")
    ]
    assert order(alice.get("/").text)[-1] == "a-mine"  # no longer hers: at the end of her list
    assert order(bob.get("/").text)[:2] == ["a-bob", "a-mine"]  # bob's own two, oldest first
    history = alice.get("/asks/a-mine").text
    assert "human:alice</strong> reassigned it to human:bob: “bob knows this shim”" in history
    decided = alice.get("/decided").text
    assert (
        "reassigned" in decided and "to human:bob" in decided and "bob knows this shim" in decided
    )
    bearer = {"authorization": f"Bearer {tokens.issue('alice')}"}
    timeline = alice.get("/api/timeline", headers=bearer).json()["records"]
    assert timeline[0]["summary"] == "human:alice reassigned a-mine to human:bob"
    again = alice.post("/asks/a-mine/reassign", data=fields)  # nothing changes: said why
    assert again.status_code == 409 and "already assigned to human:bob" in again.text


def test_a_reassign_form_is_refused_when_forged_and_bad_input_is_named(
    alice: AppClient, board: Model
) -> None:
    page = alice.get("/").text
    good = {**reassign_form(page, "a-team"), "to": "team:sec", "note": "a signing key issue"}
    no_csrf = {k: v for k, v in good.items() if k != "csrf"}
    assert alice.post("/asks/a-team/reassign", data=no_csrf).status_code == 403
    other = {**good, "nonce": reassign_form(page, "a-rest")["nonce"]}  # another ask's nonce
    assert alice.post("/asks/a-team/reassign", data=other).status_code == 403
    answer_nonce = next(f for f in forms(page) if f.action == "/asks/a-team/answer")
    as_answer = {**good, "nonce": answer_nonce.fields["nonce"]}  # an answer form's nonce
    assert alice.post("/asks/a-team/reassign", data=as_answer).status_code == 403
    no_note = alice.post("/asks/a-team/reassign", data={**good, "note": "  "})
    assert no_note.status_code == 422 and "Say why you reassign it" in no_note.text
    nobody = alice.post("/asks/a-team/reassign", data={**good, "to": "human:zed"})
    assert nobody.status_code == 422 and "Nobody on this board is human:zed" in nobody.text
    assert "human:bob, human:carol" in nobody.text  # the people it could go to
    garbled = alice.post("/asks/a-team/reassign", data={**good, "to": "pybb:x"})
    assert garbled.status_code == 422 and "team:&lt;name&gt;" in garbled.text
    assert assignments(board.reader) == ()  # the board is unchanged
    answer(board.control, "human:carol", "a-team", "quarantine")
    settled = alice.post("/asks/a-team/reassign", data=good)
    assert settled.status_code == 409 and "answered" in settled.text
    assert assignments(board.reader) == ()


def test_the_api_reassigns_an_ask_and_names_what_is_wrong(board: Model, tokens: TokenTable) -> None:
    client = client_for(board, tokens, assignment=ROUTES)
    bearer = {"authorization": f"Bearer {tokens.issue('alice')}"}
    try:
        body = {"to": "team:sec", "note": "a signing key issue"}
        made = client.post("/api/asks/a-team/reassign", json=body, headers=bearer)
        assert made.status_code == 201, made.text
        created = made.json()
        assert created["assignment"]["to"] == "team:sec" and created["sequence"] > 0
        assert created["state"]["assignee"] == "team:sec" and created["state"]["rank"] == "other"
        got = client.get("/api/asks/a-team", headers=bearer).json()
        history = got["reassignments"]
        assert [(h["to"], h["by"], h["note"]) for h in history] == [
            ("team:sec", "human:alice", "a signing key issue")
        ]
        refusals: list[tuple[dict[str, Any], str]] = [
            ({"to": "team:sec"}, "note_required"),
            ({"to": 5, "note": "x"}, "invalid"),
            ({"to": "human:zed", "note": "x"}, "unknown_assignee"),
            ({"to": "bob", "note": "x", "extra": 1}, "invalid"),
        ]
        for bad, code in refusals:
            refused = client.post("/api/asks/a-team/reassign", json=bad, headers=bearer)
            assert (refused.status_code, refused.json()["error"]) == (422, code), bad
        as_text = client.post(
            "/api/asks/a-team/reassign", content=b"to=bob", headers={**bearer,
            "content-type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        assert as_text.status_code == 415
        missing = client.post("/api/asks/nope/reassign", json=body, headers=bearer)
        assert missing.status_code == 404
        answer(board.control, "human:carol", "a-team", "quarantine")
        assert got["due"]["option"] == "quarantine"  # while it is open
        settled = client.post("/api/asks/a-team/reassign", json=body, headers=bearer)
        assert settled.status_code == 409 and settled.json()["state"]["status"] == "answered"
        assert client.get("/api/asks/a-team", headers=bearer).json()["due"] is None
        assert len(assignments(board.reader)) == 1
    finally:
        client.close()


def test_an_ask_for_other_people_is_not_reassigned_to_someone_it_is_not_addressed_to(
    board: Model, tokens: TokenTable, alice: AppClient
) -> None:
    post_ask(board.control, dataclasses.replace(routed_ask("a-pair", cls="uefi"),
                                                to=("human:alice", "human:bob")))  # fmt: skip
    page = alice.get("/asks/a-pair").text
    fields = {**reassign_form(page, "a-pair"), "to": "human:carol", "note": "carol?"}
    refused = alice.post("/asks/a-pair/reassign", data=fields)
    assert refused.status_code == 422 and "addressed to human:alice, human:bob only" in refused.text
    team = alice.post("/asks/a-pair/reassign", data={**fields, "to": "team:ops"})  # alice's
    assert team.status_code == 303
    set_person(board.control, Person("human:dave", teams=("night",)), writer="admin")
    hidden = alice.post("/asks/a-pair/reassign", data={**fields, "to": "team:night"})
    assert hidden.status_code == 422 and "not to team:night" in hidden.text  # dave can't see it
    assert [m.to for m in assignments(board.reader)] == ["team:ops"]


def test_a_board_without_the_people_levels_orders_by_policy_and_offers_no_reassign(
    tmp_path: Path, tokens: TokenTable
) -> None:
    model = new_board(tmp_path / "plain.db")
    post_ask(model.control, routed_ask("p-rest", cls="uefi", age=1))
    post_ask(model.control, routed_ask("p-mine", cls="uefi", scope="fleet/site-a"))
    client = client_for(model, tokens, assignment=ROUTES)
    try:
        page = login(client, tokens.issue("alice"))
        assert order(page) == ["p-mine", "p-rest"]
        assert "/reassign" not in page and "<datalist" not in page
        bearer = {"authorization": f"Bearer {tokens.issue('alice')}"}
        body = {"to": "human:bob", "note": "x"}
        refused = client.post("/api/asks/p-mine/reassign", json=body, headers=bearer)
        assert refused.status_code == 403 and refused.json()["error"] == "not_recorded"
        assert ASSIGNMENTS not in model.regions
    finally:
        client.close()
        model.close()


def test_without_a_policy_every_ask_is_nobody_s_and_the_order_is_the_oldest_first(
    board: Model, tokens: TokenTable
) -> None:
    client = client_for(board, tokens)  # the default: AssignmentPolicy()
    try:
        page = login(client, tokens.issue("alice"))
        assert order(page) == ["a-rest", "a-bob", "a-team", "a-mine"]
        assert set(ranks(page).values()) == {"other"}
        assert '<dd class="assignee">nobody</dd>' in page
    finally:
        client.close()


# -- the command line: pybb inbox --assignment FILE, pybb attest --inbox --assignment FILE -------


def _inbox_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybb", "inbox", *args],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("routes.json", '{"rules": [{"to": "bob"}]}', "neither 'human:<name>' nor 'team:<name>'"),
        ("routes.json", '{"rules": [{"to": "team:ops", "klass": "x"}]}', "'klass' is not a key"),
        ("routes.json", "default = 'team:ops'", "is not JSON (name it .toml for TOML)"),
        ("routes.toml", "[[rules]\nto=", "is not TOML"),
        ("missing.json", None, "cannot read"),
    ],
)
def test_a_bad_assignment_file_is_named_and_nothing_is_served(
    tmp_path: Path, name: str, text: str | None, message: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    done = _inbox_command("--store", f"sqlite:///{tmp_path / 'x.db'}", "--assignment", str(path))
    assert done.returncode == 2
    assert "--assignment" in done.stderr and message in done.stderr, done.stderr
    assert "http://" not in done.stdout


def test_pybb_inbox_takes_an_assignment_file_and_lists_each_person_s_own_first(
    tmp_path: Path, board: Model
) -> None:
    routes = tmp_path / "routes.toml"  # the file docs/inbox.md shows
    page = (REPO / "docs" / "inbox.md").read_text(encoding="utf-8")
    (toml,) = re.findall(r"^```toml\n(.*?)^```", page, re.DOTALL | re.MULTILINE)
    routes.write_text(toml, encoding="utf-8")
    assert AssignmentPolicy.from_json(tomllib.loads(toml)) == ROUTES
    board.close()
    store = f"sqlite:///{tmp_path / 'people.db'}"
    command = ("--store", store, "--board-id", "run-people", "--human", "alice")
    with run_command(*command, "--assignment", str(routes)) as served:
        token = served.printed.split("token for human:alice: ")[1].split()[0]
        with httpx.Client(base_url=served.url) as web:
            web.post("/login", data={"token": token}, headers={"origin": served.url})
            assert order(web.get("/").text) == ["a-mine", "a-team", "a-rest", "a-bob"]
    with run_command(*command) as plain:  # without the file: nobody's, oldest first
        token = plain.printed.split("token for human:alice: ")[1].split()[0]
        with httpx.Client(base_url=plain.url) as web:
            web.post("/login", data={"token": token}, headers={"origin": plain.url})
            assert order(web.get("/").text) == ["a-rest", "a-bob", "a-team", "a-mine"]


def test_pybb_attest_takes_an_assignment_file_only_with_its_inbox(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    routes.write_text('{"default": "team:ops"}', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pybb", "attest", "--demo", "3", "--store",
         f"sqlite:///{tmp_path / 'a.db'}", "--assignment", str(routes)],
        capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--assignment routes the asks of the inbox; add --inbox" in done.stderr, done.stderr

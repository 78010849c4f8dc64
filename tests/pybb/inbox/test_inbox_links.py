"""A notification's signed link: a GET shows the ask, the POST uses the link once and signs in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import jsonschema_rs
import pytest
from inbox_support import (
    AppClient,
    FakeClock,
    answer_form,
    app_for,
    forms,
    hostile_ask,
    login,
    post_asks,
)

from blackboard import Model, create_model
from pybb.human import HUMAN_REGIONS, PEOPLE_REGIONS, answer_rule, compose_rules, sign_link
from pybb.inbox import TokenTable

SECRET = b"link-secret-0123456789abcdef"


@pytest.fixture
def people_board(tmp_path: Path) -> Iterator[Model]:
    board = create_model(
        regions=[*HUMAN_REGIONS, *PEOPLE_REGIONS],
        admission_rule=compose_rules(answer_rule),
        store=f"sqlite:///{tmp_path / 'run.db'}",
        board_id="run-1",
    )
    post_asks(board, [hostile_ask(1)])
    yield board
    board.close()


def _client(board: Model, tmp_path: Path, clock: FakeClock, **changes: object) -> AppClient:
    tokens = TokenTable(tmp_path / "tokens.json", clock=clock)
    return AppClient(app_for(board, tokens, **changes))


def _follow_form(page: str, token: str) -> dict[str, str]:
    (form,) = [f for f in forms(page) if f.action == f"/link/{token}"]
    return form.fields


def test_a_prefetch_get_uses_nothing_and_the_click_signs_in_for_that_ask(
    people_board: Model, tmp_path: Path
) -> None:
    clock = FakeClock()
    tokens = TokenTable(tmp_path / "tokens.json", clock=clock)
    app = app_for(people_board, tokens, link_secret=SECRET)
    scanner, person = AppClient(app), AppClient(app)
    try:
        token = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(hours=1))
        # a mail scanner (or a link prefetcher) GETs the link first: nothing is used
        scanned = scanner.get(f"/link/{token}")
        assert scanned.status_code == 200 and "Sign in and answer" in scanned.text
        assert "pybb_session" not in scanned.headers.get("set-cookie", "")
        assert people_board.reader.read_level("link_uses") == ()
        # the person's own click, after it
        shown = person.get(f"/link/{token}")
        assert shown.status_code == 200 and "&lt;img src=x" in shown.text
        assert "<img src=x" not in shown.text  # the ask's text is shown escaped
        assert people_board.reader.read_level("link_uses") == ()
        fields = _follow_form(shown.text, token)
        foreign = person.post(
            f"/link/{token}", data=fields, headers={"origin": "https://evil.example"}
        )
        assert foreign.status_code == 403  # a page elsewhere cannot press the button
        followed = person.post(f"/link/{token}", data=fields)
        assert followed.status_code == 303 and followed.headers["location"] == "/asks/ask-1"
        (use,) = people_board.reader.read_level("link_uses")
        assert (use.content["ask_id"], use.content["person"]) == ("ask-1", "human:alice")
        page = person.get("/asks/ask-1")
        assert page.status_code == 200 and "human:alice" in page.text
        form = answer_form(page.text, "ask-1", "quarantine")
        answered = person.post(form.action, data=form.fields)
        assert answered.status_code == 303, answered.text
        (answer,) = people_board.reader.read_level("answers")
        assert (answer.content["by"], answer.content["option"]) == ("human:alice", "quarantine")
        # the sign-in opens that ask only: not the list, not the API, not another page
        assert person.get("/").headers.get("location") == "/login"
        assert person.get("/decided").headers.get("location") == "/login"
        assert person.get("/api/asks").status_code == 401
        post_asks(people_board, [hostile_ask(2)])
        assert person.get("/asks/ask-2").headers.get("location") == "/login"
        other = person.post("/asks/ask-2/answer", data={**form.fields, "option": "quarantine"})
        assert other.status_code == 401
        assert len(people_board.reader.read_level("answers")) == 1
        # the scanner's page cannot use the link: its form is bound to its own browser
        assert scanner.post(f"/link/{token}", data=fields).status_code == 403
        replay = scanner.post(f"/link/{token}", data=_follow_form(scanned.text, token))
        assert replay.status_code == 410 and "already used" in replay.text
        again = person.get(f"/link/{token}")
        assert again.status_code == 410 and "log in with your token" in again.text
        assert len(people_board.reader.read_level("link_uses")) == 1
    finally:
        scanner.close()
        person.close()


def test_a_forged_or_expired_link_gets_a_page_that_says_what_to_do(
    people_board: Model, tmp_path: Path
) -> None:
    clock = FakeClock()
    client = _client(people_board, tmp_path, clock, link_secret=SECRET)
    try:
        forged = sign_link(b"not-the-inbox-secret-000", "ask-1", "human:alice", clock.now)
        refused = client.get(f"/link/{forged}")
        assert refused.status_code == 403 and "Not a valid link" in refused.text
        assert "Copy the whole link" in refused.text
        cut = client.get(f"/link/{forged[:-8]}")
        assert cut.status_code == 403 and "log in with your token" in cut.text
        # a non-ASCII signature (a URL may carry one) is not valid either, never a 500
        odd = client.get(f"/link/{forged.rsplit('.', 1)[0]}.%C3%A9%C3%A9")
        assert odd.status_code == 403 and "Not a valid link" in odd.text
        late = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(minutes=5))
        shown = client.get(f"/link/{late}")
        assert shown.status_code == 200
        clock.advance(minutes=5)
        expired = client.get(f"/link/{late}")
        assert expired.status_code == 410 and "Link expired" in expired.text
        assert "log in with your token" in expired.text
        # the button of a page shown before the expiry does not work after it either
        posted = client.post(f"/link/{late}", data=_follow_form(shown.text, late))
        assert posted.status_code == 410
        assert people_board.reader.read_level("link_uses") == ()
    finally:
        client.close()


def test_two_clicks_at_once_use_a_link_once(people_board: Model, tmp_path: Path) -> None:
    clock = FakeClock()
    client = _client(people_board, tmp_path, clock, link_secret=SECRET)
    try:
        token = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(hours=1))
        fields = _follow_form(client.get(f"/link/{token}").text, token)
        call = ("POST", f"/link/{token}", {"data": fields, "headers": {"origin": client.base_url}})
        codes = sorted(r.status_code for r in client.gather(*[call] * 6))
        assert codes == [303] + [410] * 5
        assert len(people_board.reader.read_level("link_uses")) == 1
    finally:
        client.close()


def test_a_person_logged_in_already_is_sent_to_the_ask_without_using_the_link(
    people_board: Model, tmp_path: Path
) -> None:
    clock = FakeClock()
    tokens = TokenTable(tmp_path / "tokens.json", clock=clock)
    client = AppClient(app_for(people_board, tokens, link_secret=SECRET))
    try:
        login(client, tokens.issue("alice"))
        token = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(hours=1))
        went = client.get(f"/link/{token}")
        assert went.status_code == 303 and went.headers["location"] == "/asks/ask-1"
        assert people_board.reader.read_level("link_uses") == ()
        assert client.get("/").status_code == 200  # the wider login is kept
    finally:
        client.close()


def test_an_inbox_without_a_link_secret_accepts_no_link(
    people_board: Model, tmp_path: Path
) -> None:
    clock = FakeClock()
    client = _client(people_board, tmp_path, clock)
    try:
        token = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(hours=1))
        assert client.get(f"/link/{token}").status_code == 404
        assert people_board.reader.read_level("link_uses") == ()
    finally:
        client.close()


def test_an_ask_with_a_deadline_keeps_the_api_contract(people_board: Model, tmp_path: Path) -> None:
    from pybb.human import DeadlinePolicy, post_ask

    stamped = DeadlinePolicy().stamp(replace(hostile_ask(2), ask_id="ask-deadline"))
    post_ask(people_board.control, stamped)
    clock = FakeClock()
    tokens = TokenTable(tmp_path / "tokens.json", clock=clock)
    client = AppClient(app_for(people_board, tokens))
    try:
        bearer = {"Authorization": f"Bearer {tokens.issue('alice')}"}
        document = client.get("/openapi.json").json()
        got = client.get("/api/asks/ask-deadline", headers=bearer)
        assert got.status_code == 200
        ask = got.json()["ask"]
        assert ask["deadline"] == stamped.deadline.isoformat()  # type: ignore[union-attr]
        root = {"$ref": "#/components/schemas/Ask", "components": document["components"]}
        jsonschema_rs.validate(root, ask)
        schema = document["components"]["schemas"]["Ask"]
        assert set(ask) <= set(schema["properties"]), set(ask) - set(schema["properties"])
        assert set(schema["required"]) <= set(ask)
        # negative control: the contract before deadlines named neither field
        assert {"deadline", "default_option"} <= set(ask) - set(schema["required"])
    finally:
        client.close()

"""The inbox accepts a notification's signed link exactly once (``GET /link/<token>``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import jsonschema_rs
import pytest
from inbox_support import AppClient, FakeClock, app_for, hostile_ask, post_asks

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


def test_a_link_opens_its_ask_once_then_is_gone(people_board: Model, tmp_path: Path) -> None:
    clock = FakeClock()
    client = _client(people_board, tmp_path, clock, link_secret=SECRET)
    try:
        token = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(hours=1))
        first = client.get(f"/link/{token}")
        assert first.status_code == 303 and first.headers["location"] == "/asks/ask-1"
        again = client.get(f"/link/{token}")
        assert again.status_code == 410 and "already used" in again.text
        (use,) = people_board.reader.read_level("link_uses")
        assert (use.content["ask_id"], use.content["person"]) == ("ask-1", "human:alice")
        forged = sign_link(b"not-the-inbox-secret-000", "ask-1", "human:alice", clock.now)
        assert client.get(f"/link/{forged}").status_code == 403
        late = sign_link(SECRET, "ask-1", "human:alice", clock.now + timedelta(minutes=5))
        clock.advance(minutes=5)
        assert client.get(f"/link/{late}").status_code == 410
        assert len(people_board.reader.read_level("link_uses")) == 1
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

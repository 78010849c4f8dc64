"""The JSON API confirms an accepted digest as the page does: a 428 with the preview (the
devices it would repair) and a token bound to it; the answer sent with that token is
applied once, and a token for a preview that has changed since is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from inbox_support import AppClient, app_for, tampered_fleet

from blackboard import Model
from pybb.human import ANSWERS, answer
from pybb.inbox import TokenTable


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Model]:
    model = tampered_fleet(tmp_path / "api.db")
    yield model
    model.close()


@pytest.fixture
def api(board: Model) -> Iterator[tuple[AppClient, dict[str, str]]]:
    tokens = TokenTable()
    client = AppClient(app_for(board, tokens))
    yield client, {"Authorization": f"Bearer {tokens.issue('alice')}"}
    client.close()


def _accept(client: AppClient, bearer: dict[str, str], **more: Any) -> Any:
    body = {"option": "accept-digest", "note": "vendor update", **more}
    return client.post("/api/asks/t-0/answer", json=body, headers=bearer)


def _validate(client: AppClient, schema: str, body: Any) -> None:
    document = client.get("/openapi.json").json()
    root = {"$ref": f"#/components/schemas/{schema}", "components": document["components"]}
    jsonschema_rs.validate(root, body)


def test_accepting_a_digest_by_api_shows_the_preview_and_applies_once_when_confirmed(
    api: tuple[AppClient, dict[str, str]], board: Model
) -> None:
    client, bearer = api
    first = _accept(client, bearer)
    assert first.status_code == 428, first.text
    body = first.json()
    assert body["error"] == "confirmation_required"
    assert body["preview"] == {"count": 3, "devices": ["dev-0", "dev-1", "dev-2"]}
    _validate(client, "ConfirmationRequired", body)
    assert board.reader.read_level(ANSWERS) == ()  # nothing changed yet
    forged = _accept(client, bearer, confirm="0" * 64)
    assert forged.status_code == 428 and forged.json()["error"] == "confirmation_stale"
    for text in ("\u0080", "é" * 64):  # found by schemathesis: once a 500 (compare_digest)
        odd = _accept(client, bearer, confirm=text)
        assert odd.status_code == 428 and odd.json()["error"] == "confirmation_stale"
    done = _accept(client, bearer, confirm=body["confirm"])
    assert done.status_code == 201, done.text
    assert done.json()["answer"]["option"] == "accept-digest"
    again = _accept(client, bearer, confirm=body["confirm"])
    assert again.status_code == 409  # applied exactly once
    (written,) = board.reader.read_level(ANSWERS)
    assert (written.content["by"], written.content["note"]) == ("human:alice", "vendor update")


def test_a_confirmation_of_a_preview_that_changed_is_refused_with_the_new_preview(
    api: tuple[AppClient, dict[str, str]], board: Model
) -> None:
    client, bearer = api
    token = _accept(client, bearer).json()["confirm"]
    answer(board.control, "human:bob", "t-2", "quarantine", "")  # one device fewer to repair
    stale = _accept(client, bearer, confirm=token)
    assert stale.status_code == 428
    body = stale.json()
    assert body["error"] == "confirmation_stale"
    assert body["preview"] == {"count": 2, "devices": ["dev-0", "dev-1"]}
    assert body["confirm"] != token
    assert [r.content["ask_id"] for r in board.reader.read_level(ANSWERS)] == ["t-2"]
    assert _accept(client, bearer, confirm=body["confirm"]).status_code == 201


def test_a_confirmation_is_bound_to_its_person_and_ask(
    api: tuple[AppClient, dict[str, str]], board: Model, tmp_path: Path
) -> None:
    client, bearer = api
    token = _accept(client, bearer).json()["confirm"]
    other = client.post(
        "/api/asks/t-3/answer", json={"option": "accept-digest", "confirm": token}, headers=bearer
    )
    assert other.status_code == 428  # a token for t-0 does not confirm t-3
    assert (
        client.post(
            "/api/asks/t-0/answer", json={"option": "accept-digest", "confirm": 7}, headers=bearer
        ).status_code
        == 422
    )
    plain = client.post("/api/asks/t-1/answer", json={"option": "quarantine"}, headers=bearer)
    assert plain.status_code == 201  # other options need no confirmation
    assert board.reader.read_level(ANSWERS)[0].content["ask_id"] == "t-1"


def test_the_openapi_document_names_the_confirmation(
    api: tuple[AppClient, dict[str, str]],
) -> None:
    client, _ = api
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/api/asks/{ask_id}/answer"]["post"]
    assert "428" in operation["responses"]
    request = document["components"]["schemas"]["AnswerRequest"]
    assert "confirm" in request["properties"] and request["required"] == ["option"]

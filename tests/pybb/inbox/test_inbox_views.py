"""Issue 15's inbox features through the real application: filters, root-cause groups and a
group answer (one board write per member, each admitted once), pages, the decided and
not-asked views, the accept-digest preview and its confirmation, and their guards."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from inbox_fixtures import *  # noqa: F403
from inbox_support import HOSTILE, AppClient, app_for, forms, login, tampered_fleet

from blackboard import Model, RecordKind
from pybb.human import ANSWERS, answer, close_ask
from pybb.inbox import TokenTable


@pytest.fixture
def fleet_model(tmp_path: Path) -> Any:
    board = tampered_fleet(tmp_path / "fleet.db", age=timedelta(hours=3))  # t-0..2: one cause
    yield board
    board.close()


@pytest.fixture
def fleet_client(fleet_model: Model, tokens: TokenTable) -> Any:
    c = AppClient(app_for(fleet_model, tokens))
    yield c
    c.close()


def _answers(model: Model) -> list[Any]:
    return [
        r.content for r in model.reader.log(0) if r.kind is RecordKind.LEVEL and r.region == ANSWERS
    ]


def _group_form(page: str, option: str) -> Any:
    return next(
        f for f in forms(page) if f.action == "/groups/answer" and f.fields.get("option") == option
    )


def test_one_root_cause_is_one_group_and_one_answer_writes_each_member_once(
    fleet_client: AppClient, fleet_model: Model, alice: str
) -> None:
    page = login(fleet_client, alice)
    assert page.count('data-group-size="3"') == 1 and "in 2 groups" in page
    form = _group_form(page, "quarantine")
    assert set(form.fields["asks"].split(",")) == {"t-0", "t-1", "t-2"}
    data = {**form.fields, "note": "one bad image"}
    done = fleet_client.post("/groups/answer", data=data)
    assert done.status_code == 200 and "Answered 3 of 3" in done.text
    again = fleet_client.post("/groups/answer", data=data)  # a replay admits nothing more
    assert "Answered 0 of 3" in again.text
    written = _answers(fleet_model)
    assert sorted(a["ask_id"] for a in written) == ["t-0", "t-1", "t-2"]
    assert {(a["by"], a["note"]) for a in written} == {("human:alice", "one bad image")}


def test_a_group_form_is_refused_without_its_csrf_token_or_for_other_asks(
    fleet_client: AppClient, fleet_model: Model, alice: str
) -> None:
    form = _group_form(login(fleet_client, alice), "quarantine")
    no_csrf = {k: v for k, v in form.fields.items() if k != "csrf"}
    assert fleet_client.post("/groups/answer", data=no_csrf).status_code == 403
    widened = {**form.fields, "asks": form.fields["asks"] + ",t-3"}  # not the group seen
    assert fleet_client.post("/groups/answer", data=widened).status_code == 403
    assert _answers(fleet_model) == []


def test_filters_narrow_the_list_and_bad_filters_are_named(
    fleet_client: AppClient, alice: str
) -> None:
    login(fleet_client, alice)
    only = fleet_client.get("/?class=arch-linux").text
    assert 'data-ask="t-3"' in only and 'data-ask="t-0"' not in only
    old = fleet_client.get("/?age=2h").text
    assert 'data-ask="t-0"' in old and 'data-ask="t-3"' not in old
    assert 'data-ask="t-' not in fleet_client.get("/?reason=corrupt_log").text
    bad = fleet_client.get("/?age=soon")
    assert bad.status_code == 422 and "30m, 2h or 1d" in bad.text
    assert fleet_client.get("/?page=0").status_code == 422


def test_accepting_a_digest_shows_the_devices_it_repairs_and_waits_for_a_confirmation(
    fleet_client: AppClient, fleet_model: Model, alice: str
) -> None:
    page = login(fleet_client, alice)
    form = next(
        f for f in forms(page)
        if f.action == "/asks/t-0/answer" and f.fields.get("option") == "accept-digest"
    )  # fmt: skip
    preview = fleet_client.post(form.action, data=form.fields)
    assert preview.status_code == 200
    assert '<strong class="repair-count">3</strong>' in preview.text
    assert "<code>dev-3</code>" not in preview.text  # another digest, another class
    assert _answers(fleet_model) == []  # nothing changed yet
    confirm = next(f for f in forms(preview.text) if f.fields.get("confirm"))
    forged = {**confirm.fields, "confirm": "0" * 64}
    assert "repair-count" in fleet_client.post(confirm.action, data=forged).text  # asked again
    done = fleet_client.post(confirm.action, data=confirm.fields)
    assert done.status_code == 303
    assert [a["option"] for a in _answers(fleet_model)] == ["accept-digest"]


def test_the_decided_view_lists_answers_and_closures_escaped_and_paged(
    fleet_client: AppClient, fleet_model: Model, alice: str
) -> None:
    answer(fleet_model.control, "human:bob", "t-0", "quarantine", f"note {HOSTILE[0]}")
    close_ask(fleet_model.control, "t-1", "resolved_oob: pybb:app resolved the entry")
    login(fleet_client, alice)
    page = fleet_client.get("/decided").text
    assert 'data-ask="t-0"' in page and 'data-ask="t-1"' in page
    assert "human:bob" in page and "out of band" in page
    assert HOSTILE[0] not in page  # shown escaped
    assert fleet_client.get("/decided?page=x").status_code == 422


def test_the_not_asked_view_refuses_a_pull_when_the_budget_is_spent(
    tmp_path: Path, tokens: TokenTable, alice: str
) -> None:
    from blackboard import Level, create_model
    from pybb.human import HUMAN_REGIONS, answer_rule, compose_rules

    model = create_model(
        regions=[*HUMAN_REGIONS, Level("supervision", unique="id"), *_budget_regions()],
        premises={"budget": {"fleet": {"spent": 2, "ceiling": 2}}},
        admission_rule=compose_rules(answer_rule),
        store=f"sqlite:///{tmp_path / 'spent.db'}",
        board_id="spent",
    )
    tier = {"reason": "corrupt_log", "class": "x", "findings": []}
    details = {"denied": {"refused": "budget_exhausted", "limit": "ceiling"}, "tier": tier}
    denied: dict[str, Any] = {
        "id": "decision:e-1", "kind": "decision", "escalation": "e-1", "key": "dev-9",
        "disposition": "DENIED", "decided_by": "aggregate_budget", "trail": [],
        "reason": "full", "scope": "fleet", "ask_id": None, "at": None, "details": details,
    }  # fmt: skip
    model.control.write("pybb:supervision", "supervision", denied)
    client = AppClient(app_for(model, tokens))
    try:
        login(client, alice)
        page = client.get("/not-asked").text
        assert "dev-9" in page and "corrupt_log" in page
        form = next(f for f in forms(page) if f.action == "/not-asked/pull")
        refused = client.post(form.action, data=form.fields)
        assert refused.status_code == 409
        assert "The budget is spent" in refused.text and "nothing was asked" in refused.text
        no_nonce = {**form.fields, "nonce": "x"}
        assert client.post(form.action, data=no_nonce).status_code == 403
        assert not [r for r in model.reader.log(0) if (r.content or {}).get("kind") == "pull"]
    finally:
        client.close()
        model.close()


def _budget_regions() -> list[Any]:
    from blackboard import Premise

    return [Premise("budget")]


def test_the_live_part_keeps_the_filters(fleet_client: AppClient, alice: str) -> None:
    login(fleet_client, alice)
    page = fleet_client.get("/?class=arch-linux").text
    assert 'data-fragment="/fragments/live?class=arch-linux"' in page
    live = fleet_client.get("/fragments/live?class=arch-linux").text
    assert 'data-ask="t-3"' in live and 'data-ask="t-0"' not in live

"""RA-13, targeted: authentication, CSRF, nonces, origins, hosts, addressing, exactly-once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from inbox_fixtures import *  # noqa: F403 (the fixtures)
from inbox_support import AppClient, FakeClock, answer_form, app_for, forms, login

from blackboard import Model
from pybb.human import ANSWERS, AskStatus, ask_state
from pybb.inbox import TokenTable
from pybb.inbox._security import CSP

API_READS = ["/api/asks", "/api/asks/ask-1", "/api/budget", "/api/timeline", "/api/me"]
PAGES = ["/", "/asks/ask-1", "/fragments/live", "/events"]
ANSWER = {"option": "accept"}


def _answers(model: Model) -> int:
    return len(model.reader.read_level(ANSWERS))


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# -- no token, wrong token ---------------------------------------------------------------------


def test_every_page_needs_a_login(client: AppClient) -> None:
    for path in PAGES:
        response = client.get(path)
        assert response.status_code in (303, 401), path
        if response.status_code == 303:
            assert response.headers["location"] == "/login"
    assert client.get("/login").status_code == 200


def test_every_state_change_without_a_login_is_refused(client: AppClient, model: Model) -> None:
    for path in ("/asks/ask-1/answer", "/logout"):
        assert client.post(path, data={"option": "accept"}).status_code == 401
    assert client.post("/api/asks/ask-1/answer", json=ANSWER).status_code == 401
    assert _answers(model) == 0


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer nope-nope-nope-nope", "Basic abc"])
def test_the_api_refuses_a_missing_or_wrong_token(client: AppClient, header: str) -> None:
    headers = {"authorization": header} if header else {}
    for path in API_READS:
        response = client.get(path, headers=headers)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"] == "unauthorized"
    answer = client.post("/api/asks/ask-1/answer", json=ANSWER, headers=headers)
    assert answer.status_code == 401


def test_a_wrong_token_does_not_log_in(client: AppClient, alice: str) -> None:
    response = client.post("/login", data={"token": alice + "x"})
    assert response.status_code == 401
    assert "not valid" in response.text
    assert "pybb_session" not in response.headers.get("set-cookie", "")
    assert client.get("/").status_code == 303


def test_the_api_does_not_take_the_session_cookie(client: AppClient, alice: str) -> None:
    login(client, alice)
    assert client.get("/api/asks").status_code == 401


# -- expiry and revocation --------------------------------------------------------------------


def test_an_expired_token_stops_working_for_api_and_sessions(
    client: AppClient, tokens: TokenTable, clock: FakeClock
) -> None:
    from datetime import timedelta

    token = tokens.issue("carol", ttl=timedelta(hours=1))
    login(client, token)
    assert client.get("/api/me", headers=_bearer(token)).json()["human"] == "human:carol"
    clock.advance(hours=1, seconds=1)
    assert client.get("/api/me", headers=_bearer(token)).status_code == 401
    assert client.get("/").status_code == 303
    assert client.post("/login", data={"token": token}).status_code == 401


def test_a_revoked_token_ends_its_sessions_at_once(
    client: AppClient, tokens: TokenTable, alice: str, model: Model
) -> None:
    page = login(client, alice)
    form = answer_form(page, "ask-1", "accept")
    assert tokens.revoke(alice)
    assert client.get("/api/me", headers=_bearer(alice)).status_code == 401
    assert client.get("/").status_code == 303
    assert client.post(form.action, data=form.fields).status_code == 401
    assert _answers(model) == 0


def test_revoking_in_the_file_from_another_process_counts(
    client: AppClient, tokens: TokenTable, alice: str, tmp_path: Path
) -> None:
    assert client.get("/api/me", headers=_bearer(alice)).status_code == 200
    other = TokenTable(tmp_path / "tokens.json")  # another process's view of the same file
    info = tokens.verify(alice)
    assert info is not None
    assert other.revoke(info.token_id)
    assert client.get("/api/me", headers=_bearer(alice)).status_code == 401


# -- CSRF and nonces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tamper",
    [
        lambda f: f.pop("csrf"),
        lambda f: f.update(csrf="x" * 43),
        lambda f: f.pop("nonce"),
        lambda f: f.update(nonce="0" * 64),
        # compare_digest raises on non-ASCII text: such a field must be refused, not a 500
        lambda f: f.update(csrf="\u0080" * 43),
        lambda f: f.update(nonce="é" * 64),
    ],
    ids=["no-csrf", "wrong-csrf", "no-nonce", "wrong-nonce", "non-ascii-csrf", "non-ascii-nonce"],
)
def test_a_forged_form_is_refused(client: AppClient, alice: str, model: Model, tamper: Any) -> None:
    form = answer_form(login(client, alice), "ask-1", "accept")
    fields = dict(form.fields)
    tamper(fields)
    response = client.post(form.action, data=fields)
    assert response.status_code == 403
    assert "Form refused" in response.text
    assert _answers(model) == 0


def test_a_nonce_is_good_for_its_own_ask_only(client: AppClient, alice: str, model: Model) -> None:
    page = login(client, alice)
    mine = answer_form(page, "ask-1", "accept")
    other = answer_form(page, "ask-2", "accept")
    response = client.post(other.action, data={**other.fields, "nonce": mine.fields["nonce"]})
    assert response.status_code == 403
    assert _answers(model) == 0


def test_a_nonce_is_good_in_its_own_session_only(
    client: AppClient, client2: AppClient, alice: str, model: Model
) -> None:
    first = answer_form(login(client, alice), "ask-1", "accept")
    second = answer_form(login(client2, alice), "ask-1", "accept")
    assert first.fields["nonce"] != second.fields["nonce"]
    assert first.fields["csrf"] != second.fields["csrf"]
    mixed = {**second.fields, "nonce": first.fields["nonce"]}
    assert client2.post(second.action, data=mixed).status_code == 403
    assert client2.post(second.action, data=second.fields).status_code == 303
    assert _answers(model) == 1


def test_logout_needs_the_csrf_token(client: AppClient, alice: str) -> None:
    page = login(client, alice)
    logout = next(f for f in forms(page) if f.action == "/logout")
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    assert client.get("/").status_code == 200
    assert client.post("/logout", data=logout.fields).status_code == 303
    assert client.get("/").status_code == 303


# -- origins and hosts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"origin": "null", "sec-fetch-site": "cross-site"},
        {"origin": "http://127.0.0.1:9999"},
        {"origin": "https://127.0.0.1"},
        {"origin": "http://127.0.0.1", "sec-fetch-site": "cross-site"},
        {"origin": "http://127.0.0.1", "sec-fetch-site": "same-site"},
        {"referer": "http://evil.example/page"},
    ],
)
def test_a_request_from_a_foreign_origin_is_refused(
    client: AppClient, alice: str, model: Model, headers: dict[str, str]
) -> None:
    form = answer_form(login(client, alice), "ask-1", "accept")
    response = client.request("POST", form.action, data=form.fields, headers=headers)
    assert response.status_code == 403
    login_attempt = client.request("POST", "/login", data={"token": alice}, headers=headers)
    assert login_attempt.status_code == 403
    api = client.request(
        "POST", "/api/asks/ask-1/answer", json=ANSWER, headers={**headers, **_bearer(alice)}
    )
    assert api.status_code == 403
    assert api.json()["error"] == "foreign_origin"
    assert _answers(model) == 0


def test_a_browser_form_post_with_a_null_origin_from_our_own_page_is_accepted(
    client: AppClient, alice: str, model: Model
) -> None:
    # Chromium sends Origin: null on same-origin form posts under Referrer-Policy: no-referrer.
    form = answer_form(login(client, alice), "ask-1", "accept")
    headers = {"origin": "null", "sec-fetch-site": "same-origin"}
    assert client.request("POST", form.action, data=form.fields, headers=headers).status_code == 303
    assert _answers(model) == 1


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "10.0.0.1:8765", ""])
def test_a_foreign_host_is_refused(client: AppClient, alice: str, host: str) -> None:
    for method, path in [("GET", "/login"), ("GET", "/api/me"), ("POST", "/login")]:
        response = client.request(method, path, headers={"host": host, **_bearer(alice)})
        assert response.status_code == 403, (method, path)


def test_loopback_host_names_are_answered(model: Model, tokens: TokenTable, alice: str) -> None:
    for base in ("http://localhost:8765", "http://[::1]:8765", "http://127.0.0.1:8765"):
        c = AppClient(app_for(model, tokens), base_url=base)
        try:
            assert c.get("/api/me", headers=_bearer(alice)).status_code == 200
            assert c.post("/login", data={"token": alice}).status_code == 303
        finally:
            c.close()


# -- addressing ---------------------------------------------------------------------------------


def test_another_persons_ask_is_not_found(
    client: AppClient, alice: str, bob: str, model: Model
) -> None:
    page = login(client, alice)
    assert "ask-9" not in page
    assert client.get("/asks/ask-9").status_code == 404
    assert client.get("/api/asks/ask-9", headers=_bearer(alice)).status_code == 404
    listed = client.get("/api/asks?status=all", headers=_bearer(alice)).json()["asks"]
    assert "ask-9" not in {a["ask"]["ask_id"] for a in listed}
    timeline = client.get("/api/timeline", headers=_bearer(alice)).text
    assert "ask-9" not in timeline
    assert "(an ask for other people)" in timeline
    answer = client.post("/api/asks/ask-9/answer", json=ANSWER, headers=_bearer(alice))
    assert answer.status_code == 404
    assert _answers(model) == 0
    assert client.get("/api/asks/ask-9", headers=_bearer(bob)).status_code == 200
    assert (
        client.post("/api/asks/ask-9/answer", json=ANSWER, headers=_bearer(bob)).status_code == 201
    )


# -- exactly one answer ------------------------------------------------------------------------


def test_a_double_click_admits_one_answer_and_explains_the_second(
    client: AppClient, alice: str, model: Model
) -> None:
    form = answer_form(login(client, alice), "ask-1", "accept")
    first = client.post(form.action, data=form.fields)
    second = client.post(form.action, data=form.fields)
    assert first.status_code == 303
    assert first.headers["location"] == "/asks/ask-1"
    assert second.status_code == 409
    assert "You already answered this ask" in second.text
    assert _answers(model) == 1
    done = client.get("/asks/ask-1")
    assert "Answered by <strong>you</strong>" in done.text


def test_two_people_answering_one_ask_admit_one_and_tell_the_other_who(
    client: AppClient, client2: AppClient, alice: str, bob: str, model: Model
) -> None:
    alice_form = answer_form(login(client, alice), "ask-2", "quarantine")
    bob_form = answer_form(login(client2, bob), "ask-2", "accept")
    assert client2.post(bob_form.action, data=bob_form.fields).status_code == 303
    late = client.post(alice_form.action, data=alice_form.fields)
    assert late.status_code == 409
    assert "human:bob already answered this ask" in late.text
    api = client.post("/api/asks/ask-2/answer", json=ANSWER, headers=_bearer(alice))
    assert api.status_code == 409
    body = api.json()
    assert body["state"]["answer"]["by"] == "human:bob"
    assert body["state"]["status"] == "answered"
    assert _answers(model) == 1


def test_concurrent_api_answers_admit_exactly_one(
    client: AppClient, alice: str, bob: str, model: Model
) -> None:
    for n in range(4):
        calls = [
            ("POST", f"/api/asks/ask-{n}/answer", {"json": ANSWER, "headers": _bearer(t)})
            for t in (alice, bob, alice, bob)
        ]
        statuses = sorted(r.status_code for r in client.gather(*calls))
        assert statuses == [201, 409, 409, 409]
    assert _answers(model) == 4


# -- bodies, media types, limits ----------------------------------------------------------------


def test_a_body_over_the_cap_is_refused(client: AppClient, alice: str, model: Model) -> None:
    big = {"option": "accept", "note": "x" * 70_000}
    response = client.post("/api/asks/ask-1/answer", json=big, headers=_bearer(alice))
    assert response.status_code == 413
    login(client, alice)
    assert client.post("/asks/ask-1/answer", data={"note": "x" * 70_000}).status_code == 413

    async def chunks() -> Any:
        for _ in range(20):
            yield b"x" * 8192

    streamed = client.post(
        "/api/asks/ask-1/answer",
        content=chunks(),
        headers={**_bearer(alice), "content-type": "application/json"},
    )
    assert streamed.status_code == 413
    assert _answers(model) == 0


def test_bad_bodies_get_typed_errors(client: AppClient, alice: str, model: Model) -> None:
    url, auth = "/api/asks/ask-1/answer", _bearer(alice)
    as_form = client.post(url, content=b"option=accept", headers=auth)
    assert (as_form.status_code, as_form.json()) == (
        415,
        {"error": "unsupported_media_type", "message": "Send the body as application/json."},
    )
    bad_json = {**auth, "content-type": "application/json"}
    not_json = client.post(url, content=b"{", headers=bad_json)
    assert (not_json.status_code, not_json.json()["message"]) == (400, "The body is not JSON.")
    extra = client.post(url, json={"option": "accept", "by": "human:bob"}, headers=auth)
    shape = 'Send {"option": "<option id>", "note": "<text>"}.'
    assert (extra.status_code, extra.json()["message"]) == (422, shape)
    assert client.post(url, content=b"[" * 50_000, headers=bad_json).status_code == 400
    assert client.post(url, json={"option": "delete"}, headers=auth).status_code == 422
    assert client.post(url, json={"option": 3}, headers=auth).status_code == 422
    assert _answers(model) == 0


def test_answers_beyond_the_rate_are_refused_with_429(
    model: Model, tokens: TokenTable, alice: str
) -> None:
    from pybb.inbox import RateLimit

    c = AppClient(app_for(model, tokens, answer_rate=RateLimit(per_minute=1, burst=2)))
    try:
        statuses = [
            c.post("/api/asks/ask-9/answer", json=ANSWER, headers=_bearer(alice)).status_code
            for _ in range(4)
        ]
        assert statuses == [404, 404, 429, 429]
        limited = c.post("/api/asks/ask-1/answer", json=ANSWER, headers=_bearer(alice))
        assert int(limited.headers["retry-after"]) >= 1
    finally:
        c.close()


def test_logins_beyond_the_rate_are_refused_with_429(model: Model, tokens: TokenTable) -> None:
    from pybb.inbox import RateLimit

    c = AppClient(app_for(model, tokens, login_rate=RateLimit(per_minute=1, burst=3)))
    try:
        statuses = [
            c.post("/login", data={"token": f"guess-{n:020d}"}).status_code for n in range(5)
        ]
        assert statuses == [401, 401, 401, 429, 429]
    finally:
        c.close()


# -- what every response carries ----------------------------------------------------------------


def test_a_message_page_offers_the_logout_only_to_the_person_it_knows(
    client: AppClient, alice: str
) -> None:
    def shown(path: str) -> tuple[int, str, list[str]]:
        response = client.get(path)
        heading = re.search(r"<h1>(.*?)</h1>", response.text)
        assert heading is not None, response.text
        return response.status_code, heading.group(1), [f.action for f in forms(response.text)]

    assert shown("/fragments/live") == (401, "Please log in", [])
    login(client, alice)
    assert shown("/asks/ask-9") == (404, "No such ask", ["/logout"])
    assert shown("/?age=soon") == (422, "Not a filter", ["/logout"])
    # Starlette's own errors (no such page, no such method) are pages for nobody, even
    # to a person logged in.
    assert shown("/nowhere") == (404, "Not here", [])
    assert shown("/logout") == (405, "Not possible", [])


def test_every_response_carries_the_security_headers(client: AppClient, alice: str) -> None:
    page = login(client, alice)
    form = answer_form(page, "ask-1", "accept")
    client.post(form.action, data=form.fields)
    client.get("/asks/ask-1")
    client.get("/nowhere")
    client.get("/static/inbox.js")
    client.get("/api/asks", headers=_bearer(alice))
    client.get("/", headers={"host": "evil.example"})
    assert len(client.responses) >= 8
    for response in client.responses:
        headers = response.headers
        assert headers["content-security-policy"] == CSP, response.url
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in CSP
    script_src = re.search(r"script-src ([^;]*)", CSP)
    assert script_src is not None
    assert "'unsafe-inline'" not in script_src.group(1)
    assert "'unsafe-eval'" not in CSP


def test_the_session_cookie_is_httponly_strict_and_secure_only_on_https(
    model: Model, tokens: TokenTable, alice: str
) -> None:
    for base, secure in (("http://127.0.0.1", False), ("https://127.0.0.1", True)):
        c = AppClient(app_for(model, tokens), base_url=base)
        try:
            cookie = c.post("/login", data={"token": alice}).headers["set-cookie"]
        finally:
            c.close()
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        assert ("Secure" in cookie) is secure
        assert alice not in cookie


def test_the_token_table_holds_no_plaintext_token(
    tokens: TokenTable, alice: str, bob: str, tmp_path: Path
) -> None:
    text = (tmp_path / "tokens.json").read_text()
    memory = repr(tokens.entries()) + repr(vars(tokens))
    for token in (alice, bob):
        assert token not in text
        assert token not in memory
        assert token[5:] not in text  # nor without its prefix
    assert oct((tmp_path / "tokens.json").stat().st_mode & 0o777) == "0o600"
    assert len(tokens.entries()) == 2


def test_templates_never_mark_agent_text_safe() -> None:
    from importlib.resources import files

    folder = files("pybb.inbox") / "templates"
    names = [p.name for p in folder.iterdir() if p.name.endswith(".html")]
    assert len(names) >= 6
    for name in names:
        text = (folder / name).read_text()
        assert "|safe" not in text.replace(" ", "")
        assert "autoescape false" not in text
        assert "<script>" not in text  # only <script src=...> from /static


def test_the_state_after_a_form_answer_is_on_the_board(
    client: AppClient, alice: str, model: Model
) -> None:
    form = answer_form(login(client, alice), "ask-3", "remeasure")
    assert client.post(form.action, data=form.fields).status_code == 303
    state = ask_state(model.reader, "ask-3")
    assert state is not None
    assert state.status is AskStatus.ANSWERED
    assert state.answer is not None
    assert (state.answer.by, state.answer.option) == ("human:alice", "remeasure")

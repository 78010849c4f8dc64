"""RA-15 for the inbox: canary tokens never appear in logs, output, responses or the board.

Unique random tokens are used the way people use them: to log in, as Bearer tokens,
mistyped, revoked, expired, and through the ``pybb inbox`` command. Afterwards every
log record (the inbox's and uvicorn's, access log included), everything printed,
every response body and header, every row of the SQLite file and the token file are
scanned for each canary in raw, base64 (every alignment), URL-encoded and hex form.
The only place a token may leave a trace is the token table's digest column, and a
digest is none of those forms. The negative controls show the scan catches a logger
that prints a token, in each form, and an application that logs its request headers.
"""

from __future__ import annotations

import base64
import logging
import secrets
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from inbox_support import (
    answer_form,
    app_for,
    canary_forms,
    find_canaries,
    hostile_ask,
    new_board,
    post_asks,
    run_command,
    serve,
)

from pybb.inbox import TokenTable


class Recorder:
    """Keeps every response's status line, headers and body."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.multi_items())
        self.seen.append(
            f"{response.status_code} {response.url.path}\n{headers}\n\n{response.text}"
        )


def _dump_sqlite(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        return "\n".join(connection.iterdump())


def _client(url: str, recorder: Recorder) -> httpx.Client:
    return httpx.Client(base_url=url, event_hooks={"response": [recorder]}, timeout=10)


def _use_the_inbox(
    url: str, good: str, wrong: str, revoked: str, recorder: Recorder, ask_id: str
) -> None:
    """What people do with tokens: log in, answer, call the API, mistype, use old ones."""
    origin = {"origin": url}
    with _client(url, recorder) as browser:
        assert browser.post("/login", data={"token": wrong}, headers=origin).status_code == 401
        assert browser.post("/login", data={"token": good}, headers=origin).status_code == 303
        page = browser.get("/").text
        form = answer_form(page, ask_id, "accept")
        assert browser.post(form.action, data=form.fields, headers=origin).status_code == 303
        browser.get(f"/asks/{ask_id}")
        browser.get("/fragments/live")
        browser.get("/asks/nope")
    with _client(url, recorder) as api:
        for token in (good, wrong, revoked, good + "x"):
            auth = {"authorization": f"Bearer {token}"}
            api.get("/api/asks?status=all", headers=auth)
            api.get("/api/me", headers=auth)
            api.get("/api/timeline", headers=auth)
            api.post("/api/asks/ask-2/answer", json={"option": "accept"}, headers=auth)
        basic = base64.b64encode(f"alice:{good}".encode()).decode()
        api.get("/api/me", headers={"authorization": f"Basic {basic}"})
        api.get(f"/api/me?token={wrong}")  # someone pastes a token into a URL


@pytest.fixture
def canaries() -> dict[str, str]:
    return {
        "good": "pybb_" + secrets.token_urlsafe(32),
        "wrong": "pybb_" + secrets.token_urlsafe(32),
        "revoked": "pybb_" + secrets.token_urlsafe(32),
        "expired": "pybb_" + secrets.token_urlsafe(32),
        "configured": "canary+/=%&" + secrets.token_hex(16),
    }


def test_no_canary_leaks_from_the_served_inbox(
    tmp_path: Path,
    canaries: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    model = new_board(tmp_path / "run.db")
    post_asks(model, [hostile_ask(n) for n in range(4)])
    tokens = TokenTable(tmp_path / "tokens.json")
    tokens.add(canaries["good"], "alice")
    tokens.add(canaries["configured"], "bob")
    tokens.add(canaries["revoked"], "carol")
    tokens.revoke(canaries["revoked"])
    tokens.add(canaries["expired"], "dave", expires_at=tokens.now() - timedelta(seconds=1))
    recorder = Recorder()
    try:
        with serve(app_for(model, tokens)) as url:
            _use_the_inbox(
                url, canaries["good"], canaries["wrong"], canaries["revoked"], recorder, "ask-1"
            )
            _use_the_inbox(
                url,
                canaries["configured"],
                canaries["expired"],
                canaries["wrong"],
                recorder,
                "ask-0",
            )
    finally:
        model.close()
    out, err = capsys.readouterr()
    assert "GET /api/me" in caplog.text, "uvicorn's access log must be among the scanned logs"
    assert "GET /api/me?…" in caplog.text, "the access log cuts query strings"
    # The test's own HTTP client logs the URLs it sends; the inbox's records are the rest.
    records = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    haystacks = {
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.__dict__!r}" for r in records),
        "stdout": out,
        "stderr": err,
        "responses": "\n".join(recorder.seen),
        "board": _dump_sqlite(tmp_path / "run.db"),
        "token table": (tmp_path / "tokens.json").read_text(),
    }
    assert len(recorder.seen) > 30
    assert find_canaries(haystacks, list(canaries.values())) == []


def test_no_canary_leaks_from_the_pybb_inbox_command(
    tmp_path: Path, canaries: dict[str, str]
) -> None:
    model = new_board(tmp_path / "run.db")
    post_asks(model, [hostile_ask(n) for n in range(3)])
    model.close()
    tokens = TokenTable(tmp_path / "tokens.json")
    tokens.add(canaries["good"], "alice")
    env = {"PYBB_INBOX_TOKEN": canaries["configured"], "PYBB_INBOX_HUMAN": "bob"}
    store = f"sqlite:///{tmp_path / 'run.db'}"
    recorder = Recorder()
    with run_command(
        "--store",
        store,
        "--board-id",
        "run-1",
        "--token-file",
        str(tmp_path / "tokens.json"),
        env=env,
    ) as served:
        good, wrong = canaries["good"], canaries["wrong"]
        _use_the_inbox(served.url, good, wrong, canaries["revoked"], recorder, "ask-1")
        _use_the_inbox(
            served.url, canaries["configured"], wrong, canaries["expired"], recorder, "ask-0"
        )
    assert served.process.returncode == 0, served.err
    assert "GET /api/me" in served.out + served.err  # uvicorn's access log
    haystacks = {
        "stdout": served.printed + served.out,
        "stderr": served.err,
        "responses": "\n".join(recorder.seen),
        "board": _dump_sqlite(tmp_path / "run.db"),
        "token table": (tmp_path / "tokens.json").read_text(),
    }
    assert find_canaries(haystacks, list(canaries.values())) == []


# -- negative controls ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["raw", "url", "hex", "base64/0", "base64/1", "base64/2"])
def test_negative_control_a_logger_that_prints_a_token_is_caught(
    caplog: pytest.LogCaptureFixture, canaries: dict[str, str], form: str
) -> None:
    token = canaries["configured"]
    leaked = {
        "raw": token,
        "url": canary_forms(token)["url"],
        "hex": token.encode().hex(),
        "base64/0": base64.b64encode(token.encode()).decode(),
        "base64/1": base64.b64encode(b"u" + token.encode()).decode(),
        "base64/2": base64.b64encode(b"u:" + token.encode()).decode(),
    }[form]
    with caplog.at_level(logging.INFO):
        logging.getLogger("careless").info("debugging login with %s", leaked)
    assert find_canaries({"logs": caplog.text}, [token])


def test_negative_control_an_app_that_logs_its_headers_is_caught(
    tmp_path: Path, canaries: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    model = new_board(tmp_path / "run.db")
    tokens = TokenTable()
    tokens.add(canaries["good"], "alice")
    inner = app_for(model, tokens)

    async def logs_headers(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            logging.getLogger("careless.app").debug("headers: %r", scope["headers"])
        await inner(scope, receive, send)

    try:
        with serve(logs_headers) as url:
            httpx.get(url + "/api/me", headers={"authorization": f"Bearer {canaries['good']}"})
    finally:
        model.close()
    assert "logs: raw" in find_canaries({"logs": caplog.text}, [canaries["good"]])

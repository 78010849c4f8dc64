"""The inbox's parts: its public face, tokens, budget, attaching to a run, the live stream,
the pybb inbox command."""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from inbox_fixtures import *  # noqa: F403 (the fixtures)
from inbox_support import (
    AppClient,
    FakeClock,
    answer_form,
    app_for,
    hostile_ask,
    login,
    new_board,
    post_asks,
    run_command,
    settings,
)

import pybb.inbox as inbox
from blackboard import Agent, Level, Premise, create_model
from pybb.cli.inbox import register as add_inbox_command
from pybb.cli.inbox import run_inbox
from pybb.errors import PybbError
from pybb.human import HUMAN_REGIONS, AskStatus, ask_state, post_ask
from pybb.inbox import (
    BoardNotFoundError,
    NoBudget,
    PremiseBudgetView,
    ScopeUsage,
    TokenError,
    TokenTable,
    attach_run,
)
from pybb.inbox._logs import RedactQueryStrings

# -- the public face ---------------------------------------------------------------------------


def _isort_key(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", ["pybb.inbox", "pybb.human"])
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert all(getattr(module, n) is not None for n in exported)


def _loaded_after(statement: str) -> set[str]:
    names = "','.join(sorted({m.split('.')[0] for m in sys.modules}))"
    code = f"import sys\n{statement}\nprint({names})"
    return set(subprocess.check_output([sys.executable, "-c", code], text=True).strip().split(","))


def test_the_human_loop_and_the_inbox_import_nothing_of_buddhi() -> None:
    assert "buddhi" not in _loaded_after("import pybb.human")
    assert "buddhi" not in _loaded_after("import pybb.inbox; pybb.inbox.create_app")


def test_the_web_dependencies_are_imported_only_when_the_app_is_built() -> None:
    loaded = _loaded_after("import pybb.inbox, pybb.cli.inbox")
    assert not loaded & {"starlette", "uvicorn", "jinja2", "multipart", "python_multipart"}


def test_a_missing_inbox_extra_names_the_pip_install() -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "import pybb.inbox\n"
        "try:\n    pybb.inbox.create_app\n"
        "except pybb.inbox.InboxDependencyError as exc:\n    print(exc)\n"
    )
    printed = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert "pip install 'mrpybb[inbox]'" in printed


def test_errors_are_rooted_at_pybb_error() -> None:
    for error in (inbox.InboxError, TokenError, BoardNotFoundError, inbox.InboxDependencyError):
        assert issubclass(error, PybbError)
    assert issubclass(inbox.InboxDependencyError, ImportError)


# -- tokens ------------------------------------------------------------------------------------


def test_tokens_are_issued_verified_expired_and_revoked(tmp_path: Path, clock: FakeClock) -> None:
    table = TokenTable(tmp_path / "t.json", clock=clock)
    forever, hour = table.issue("alice"), table.issue("human:bob", ttl=timedelta(hours=1))
    assert forever.startswith(inbox.TOKEN_PREFIX)
    assert len(forever) > 40
    alice = table.verify(forever)
    assert alice is not None
    assert alice.human == "human:alice"
    assert table.verify(hour).human == "human:bob"  # type: ignore[union-attr]
    clock.advance(hours=1)
    assert table.verify(hour) is None
    assert table.check(alice.token_id) is not None
    assert table.revoke(alice.token_id)
    assert table.verify(forever) is None
    assert table.check(alice.token_id) is None
    assert not table.revoke("no-such-token-or-id")
    for bad in ("", "x" * 2000, None, 3):
        assert table.verify(bad) is None  # type: ignore[arg-type]


def test_a_revoked_token_cannot_be_added_back(tmp_path: Path) -> None:
    table = TokenTable(tmp_path / "t.json")
    table.add("configured-token-0001", "alice")
    table.add("configured-token-0001", "alice")  # a restart adds it again: fine
    assert len(table.entries()) == 1
    assert table.revoke("configured-token-0001")
    with pytest.raises(TokenError, match="stays revoked"):
        TokenTable(tmp_path / "t.json").add("configured-token-0001", "alice")
    assert table.verify("configured-token-0001") is None


def test_the_table_file_keeps_digests_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    token = TokenTable(path).issue("alice")
    document = json.loads(path.read_text())
    assert document["version"] == 1
    assert {e["human"] for e in document["tokens"]} == {"human:alice"}
    assert token not in path.read_text()
    assert TokenTable(path).verify(token) is not None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.add("short", "alice"), "at least 16"),
        (lambda t: t.add("x" * 20, "not a name"), "not a person's name"),
        (lambda t: t.add("x" * 20, "alice", expires_at=datetime(2030, 1, 1)), "timezone-aware"),
    ],
)
def test_bad_tokens_are_refused(call: Any, message: str) -> None:
    with pytest.raises(TokenError, match=message):
        call(TokenTable())


def test_a_file_that_is_not_a_token_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("{not json")
    with pytest.raises(TokenError, match="not a pybb token table"):
        TokenTable(path)


# -- budget ------------------------------------------------------------------------------------


def test_the_budget_premise_is_read_as_usage(tmp_path: Path) -> None:
    value = {
        "a": {"spent": 1, "ceiling": 4},
        "b": {"spent": "x"},
        "c": 3,
        "d": {"spent": 2, "ceiling": 0},
    }
    model = create_model(
        regions=[*HUMAN_REGIONS, Premise("budget")],
        premises={"budget": json.dumps(value)},
        store=f"sqlite:///{tmp_path / 'b.db'}",
    )
    with model:
        usage = PremiseBudgetView.for_reader(model.reader).usage()
        assert usage == (ScopeUsage("a", 1.0, 4.0), ScopeUsage("d", 2.0, 0.0))
        assert usage[0].fraction == 0.25
        assert usage[1].fraction == 1.0
    without = create_model(regions=HUMAN_REGIONS, store=f"sqlite:///{tmp_path / 'n.db'}")
    with without:
        assert isinstance(PremiseBudgetView.for_reader(without.reader), NoBudget)
        assert NoBudget().usage() == ()


def test_a_budget_view_of_ones_own_is_shown(
    client: AppClient, model: Any, tokens: TokenTable, alice: str
) -> None:
    class Fixed:
        def usage(self) -> list[ScopeUsage]:
            return [ScopeUsage("fleet/<b>x</b>", 3, 9)]

    from pybb.inbox import create_app

    c = AppClient(create_app(model, tokens, budget=Fixed(), settings=settings()))
    try:
        page = login(c, alice)
        assert "fleet/&lt;b&gt;x&lt;/b&gt;" in page
        body = c.get("/api/budget", headers={"authorization": f"Bearer {alice}"}).json()
        assert body == {"scopes": [{"scope": "fleet/<b>x</b>", "spent": 3.0, "ceiling": 9.0}]}
    finally:
        c.close()


# -- attaching to a run ------------------------------------------------------------------------


def test_attach_run_opens_a_run_it_did_not_declare(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    owner = create_model(
        regions=[
            Level("entries"),
            *HUMAN_REGIONS,
            Premise("budget", guarded=True),
            Level("u", unique=True),
        ],
        premises={"budget": {}},
        agents=[Agent("controller", writes_to=["entries", "asks", "ask_closures"])],
        store=url,
        board_id="fleet",
    )
    with owner:
        post_ask(owner.control, hostile_ask(1), writer="controller")
        attached = attach_run(url, "fleet")
        with attached:
            assert ask_state(attached.reader, "ask-1") is not None
            tokens = TokenTable()
            token = tokens.issue("alice")
            c = AppClient(app_for(attached, tokens))
            try:
                form = answer_form(login(c, token), "ask-1", "accept")
                assert c.post(form.action, data=form.fields).status_code == 303
            finally:
                c.close()
        assert ask_state(owner.reader, "ask-1").status is AskStatus.ANSWERED  # type: ignore[union-attr]


def test_attach_run_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    with pytest.raises(BoardNotFoundError, match="no SQLite file"):
        attach_run(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()
    new_board(tmp_path / "run.db").close()
    with pytest.raises(BoardNotFoundError, match="no board 'other'"):
        attach_run(f"sqlite:///{tmp_path / 'run.db'}", "other")
    create_model(regions=[Level("x")], store=f"sqlite:///{tmp_path / 'plain.db'}").close()
    with pytest.raises(BoardNotFoundError, match="declares no human loop"):
        attach_run(f"sqlite:///{tmp_path / 'plain.db'}")


# -- the live stream ---------------------------------------------------------------------------


def test_the_event_stream_announces_board_changes(
    model: Any, tokens: TokenTable, alice: str
) -> None:
    short = settings(stream_lifetime=timedelta(seconds=1.5), heartbeat=timedelta(seconds=0.3))
    c = AppClient(
        app_for(model, tokens, **{k: getattr(short, k) for k in ("stream_lifetime", "heartbeat")})
    )
    try:
        login(c, alice)
        head = model.reader.head()
        threading.Timer(0.4, lambda: post_ask(model.control, hostile_ask(77))).start()
        stream = c.get(f"/events?since={head}")
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.text.startswith("retry: 2000")
        assert f'id: {head + 1}\nevent: board\ndata: {{"head": {head + 1}}}' in stream.text
        assert ": alive" in stream.text
        assert f"id: {head + 1}" in c.get("/events", headers={"last-event-id": str(head)}).text
    finally:
        c.close()


def test_the_event_stream_ends_when_the_login_does(
    model: Any, tokens: TokenTable, alice: str
) -> None:
    c = AppClient(
        app_for(
            model, tokens, stream_lifetime=timedelta(seconds=3), heartbeat=timedelta(seconds=0.2)
        )
    )
    try:
        login(c, alice)
        threading.Timer(0.3, lambda: tokens.revoke(alice)).start()
        started = time.monotonic()
        stream = c.get("/events")
        assert "event: logout" in stream.text
        assert time.monotonic() - started < 2.5
        assert c.get("/events").status_code == 401
    finally:
        c.close()


def test_answers_after_the_run_closed_are_refused(
    client: AppClient, model: Any, alice: str
) -> None:
    model.control.complete("done")
    response = client.post(
        "/api/asks/ask-1/answer",
        json={"option": "accept"},
        headers={"authorization": f"Bearer {alice}"},
    )
    assert response.status_code == 409
    assert response.json()["error"] == "run_closed"


# -- logs --------------------------------------------------------------------------------------


def test_the_access_log_filter_cuts_query_strings() -> None:
    import logging

    record = logging.LogRecord(
        "uvicorn.access",
        20,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4:5", "GET", "/x?token=s3cret", "1.1", 200),
        None,
    )
    assert RedactQueryStrings().filter(record)
    assert record.getMessage() == '1.2.3.4:5 - "GET /x?… HTTP/1.1" 200'


# -- the command -------------------------------------------------------------------------------


def test_the_server_binds_at_once_serves_in_a_thread_and_stops(app: Any) -> None:
    server = inbox.InboxServer("127.0.0.1", 0, quiet=True)
    assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/"
    with pytest.raises(OSError, match="in use"):
        inbox.InboxServer("127.0.0.1", server.port)  # refused before any app is built
    with server.running(app) as url:
        assert url == server.url
        assert httpx.get(url + "api/me").status_code == 401
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "api/me", timeout=2)  # stopped, and its socket closed


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pybb")
    add_inbox_command(parser.add_subparsers())
    return parser.parse_args(["inbox", *argv])


def test_the_command_line_and_its_defaults() -> None:
    args = _parse("--store", "sqlite:///run.db")
    assert (args.host, args.port, args.board_id, args.human) == ("127.0.0.1", 8765, None, [])
    assert args.handler is run_inbox
    args = _parse("--store", "s", "--human", "alice", "--human", "bob", "--port", "0")
    assert args.human == ["alice", "bob"]


def test_the_command_refuses_a_missing_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_inbox(_parse("--store", f"sqlite:///{tmp_path / 'none.db'}"), out=io.StringIO()) == 2
    assert "no SQLite file" in capsys.readouterr().err


def test_the_command_serves_with_the_tokens_it_prints(tmp_path: Path) -> None:
    board = new_board(tmp_path / "run.db")
    post_asks(board, [hostile_ask(1)])
    board.close()
    store = f"sqlite:///{tmp_path / 'run.db'}"
    with run_command("--store", store, "--board-id", "run-1", "--human", "alice") as served:
        token = served.printed.split("token for human:alice: ")[1].split()[0]
        with httpx.Client(base_url=served.url) as web:
            assert web.get("/").headers["location"] == "/login"
            assert (
                web.post(
                    "/login", data={"token": token}, headers={"origin": served.url}
                ).status_code
                == 303
            )
            assert "ask-1" in web.get("/").text
    assert served.process.returncode == 0
    assert "pybb inbox: stopped" in served.out


def test_the_command_takes_a_token_from_the_environment(tmp_path: Path) -> None:
    new_board(tmp_path / "run.db").close()
    token = "env-token-" + os.urandom(8).hex()
    env = {"PYBB_INBOX_TOKEN": token, "PYBB_INBOX_HUMAN": "carol"}
    store = f"sqlite:///{tmp_path / 'run.db'}"
    with run_command("--store", store, "--board-id", "run-1", env=env) as served:
        me = httpx.get(served.url + "/api/me", headers={"authorization": f"Bearer {token}"})
        assert me.json()["human"] == "human:carol"
    assert token not in served.printed + served.out + served.err
    assert "token for" not in served.printed  # nothing issued when one was configured


def test_the_command_keeps_issued_tokens_in_the_file(tmp_path: Path) -> None:
    new_board(tmp_path / "run.db").close()
    store = f"sqlite:///{tmp_path / 'run.db'}"
    path = tmp_path / "tokens.json"
    with run_command(
        "--store", store, "--board-id", "run-1", "--human", "dan", "--token-file", str(path)
    ) as served:
        token = served.printed.split("token for human:dan: ")[1].split()[0]
    assert token not in path.read_text()
    assert TokenTable(path).verify(token) is not None
    with run_command("--store", store, "--board-id", "run-1", "--token-file", str(path)) as again:
        assert "using the tokens kept in" in again.printed
        assert (
            httpx.get(
                again.url + "/api/me", headers={"authorization": f"Bearer {token}"}
            ).status_code
            == 200
        )

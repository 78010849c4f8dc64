"""Issue 15 (items 4 and 5) end to end in a real browser: `pybb attest --inbox` and Chromium.

With the inbox tests' harness (dialogs, CSP violations, injected elements, headers and
off-loopback requests checked in every flow): one answer to a root-cause group writes one
answer per member; a quarantine reaches the board, the JSON report and `pybb attest
quarantine`; the decided view says who decided what and when (a person, out of band); a
person pulls an escalation the budget did not ask about into an ask, charged to the budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inbox"))  # the inbox's harness

from supervision_support import twin_fleet
from test_inbox_browser import Live, Session, browser  # noqa: F401
from test_supervision_attestation import attest_inbox, board_of, wait_for  # noqa: F401

from pybb.attestation import save_fleet
from pybb.human import AskStatus, ask_state, ask_states, open_asks
from pybb.inbox import TokenTable
from pybb.supervision import applied_answers, quarantined, supervision_records
from pybb.supervision.attestation import ACCEPT, QUARANTINE

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def fleet_folder(tmp_path: Path) -> Path:
    fleet, _, _ = twin_fleet(between=2, name="groups")
    return save_fleet(fleet, tmp_path / "groups")


def _person(browser: Any, command: Any, model: Any, name: str = "operator") -> Session:  # noqa: F811
    live = Live(command.url, model, TokenTable(), command.token, command.token)
    person = Session(browser, live, name)
    person.login(command.token)
    person.page.wait_for_selector("#live-status:text('live')")
    return person


def test_one_answer_to_a_group_writes_one_answer_per_member(
    tmp_path: Path,
    fleet_folder: Path,
    attest_inbox: Any,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox(str(fleet_folder), store=store)
    model = board_of(store, "attest-groups")
    try:
        asks = {a.entry: a for a in open_asks(model.reader)}
        person = _person(browser, command, model)
        try:
            card = person.card(asks["first"].ask_id)
            assert card.get_attribute("data-group-size") == "2"
            person.page.fill(f"#note-{asks['first'].ask_id}", "both from one bad image")
            person.inspect()
            card.locator(f"button[data-group-option='{QUARANTINE}']").click()
            person.page.wait_for_load_state()
            assert "Answered 2 of 2" in person.page.inner_text("h1")
            states = [ask_state(model.reader, a.ask_id) for a in asks.values()]
            assert all(s is not None and s.status is AskStatus.ANSWERED for s in states)
            answers = [s.answer for s in states if s is not None and s.answer is not None]
            assert (
                sorted((a.by, a.option, a.note) for a in answers)
                == [("human:operator", QUARANTINE, "both from one bad image")] * 2
            )
            # Answering the group again admits nothing more: each member was answered once.
            person.page.go_back()
            person.page.reload()
            assert person.page.locator("article.ask").count() == 0
            wait_for(lambda: len(applied_answers(model.reader)) == 2)
        finally:
            person.finish("inboxui-group-answer")
    finally:
        model.close()
    command.stop()


def test_a_quarantine_in_the_browser_reaches_the_json_report_and_the_cli(
    tmp_path: Path,
    fleet_folder: Path,
    attest_inbox: Any,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox(str(fleet_folder), store=store)
    model = board_of(store, "attest-groups")
    try:
        asks = {a.entry: a for a in open_asks(model.reader)}
        person = _person(browser, command, model)
        try:
            person.page.fill(f"#note-{asks['first'].ask_id}", "seen on the wire")
            person.click_option(asks["first"].ask_id, QUARANTINE)
            assert "Answered by you" in person.page.inner_text(".banner")
            wait_for(lambda: quarantined(model.reader) == ["first"])
        finally:
            person.finish("inboxui-quarantine")
    finally:
        model.close()
    out = command.stop()
    assert command.process.returncode == 0, out
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["quarantined"] == ["first"]
    lines = {d["device"]: d for d in report["devices"]}
    assert lines["first"]["quarantined"] is True
    assert not any(d.get("quarantined") for k, d in lines.items() if k != "first")
    listed = subprocess.run(
        [sys.executable, "-m", "pybb", "attest", "quarantine", "--store", f"sqlite:///{store}",
         "--board-id", "attest-groups"],
        capture_output=True, text=True, cwd=REPO, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "first" in listed.stdout and "seen on the wire" in listed.stdout
    assert "1 device(s) quarantined" in listed.stdout


def test_the_decided_view_says_who_decided_what_and_when(
    tmp_path: Path,
    fleet_folder: Path,
    attest_inbox: Any,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox(str(fleet_folder), store=store)
    model = board_of(store, "attest-groups")
    try:
        asks = {a.entry: a for a in open_asks(model.reader)}
        person = _person(browser, command, model)
        try:
            person.page.fill(f"#note-{asks['first'].ask_id}", "vendor update, checked")
            person.click_option(asks["first"].ask_id, ACCEPT)
            person.page.click("button[data-confirm]")
            person.page.wait_for_load_state()
            assert "Answered by you" in person.page.inner_text(".banner")
            wait_for(lambda: _closed(model.reader, asks["twin"].ask_id))
            person.page.goto("/decided")
            first = person.page.locator(f"tr[data-ask='{asks['first'].ask_id}']")
            twin = person.page.locator(f"tr[data-ask='{asks['twin'].ask_id}']")
            cells = first.locator("td").all_inner_texts()
            assert cells[2:] == [
                "answer", "human:operator", "Accept the new digest into the allowlist",
                "vendor update, checked",
            ]  # fmt: skip
            assert cells[0].startswith("20")  # when
            twin_cells = twin.locator("td").all_inner_texts()
            assert twin_cells[2] == "out of band" and twin_cells[3] == "human:operator"
            person.inspect()
        finally:
            person.finish("inboxui-decided")
    finally:
        model.close()
    command.stop()


def test_a_person_pulls_a_not_asked_escalation_into_an_ask_within_the_budget(
    tmp_path: Path,
    attest_inbox: Any,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox("--demo", "200", store=store)
    model = board_of(store, "attest-demo-200-seed-0")
    try:
        denied = [r for r in supervision_records(model.reader) if r.disposition.name == "DENIED"]
        assert denied, "the demo's budget must leave escalations unasked"
        before = len(open_asks(model.reader))
        person = _person(browser, command, model)
        try:
            person.page.goto("/not-asked")
            assert int(person.page.inner_text("h1 .count")) == len(denied)
            target = denied[0]
            person.inspect()
            person.page.click(f"tr[data-escalation='{target.escalation_id}'] button[data-pull]")
            person.page.wait_for_load_state()
            assert person.page.inner_text("h1") == "Asked", person.page.inner_text("main")
            entries = {a.entry for a in open_asks(model.reader)}
            assert target.key in entries and len(entries) == before + 1
            person.page.goto("/")
            assert person.page.locator(f"article.ask:has-text('{target.key}')").count() >= 1
            person.page.goto("/not-asked")
            row = person.page.locator(f"tr[data-escalation='{target.escalation_id}']")
            assert "asked by human:operator" in row.inner_text()
        finally:
            person.finish("inboxui-pull")
        spent = list(ask_states(model.reader))
        assert len(spent) == before + 1
    finally:
        model.close()
    command.stop()


def _closed(reader: Any, ask_id: str) -> bool:
    state = ask_state(reader, ask_id)
    return state is not None and state.status is AskStatus.CLOSED


@pytest.mark.skipif(
    os.environ.get("PYBB_DOCS_SCREENSHOT") != "1",
    reason="set PYBB_DOCS_SCREENSHOT=1 to refresh the screenshots of docs/inbox.md",
)
def test_refresh_the_docs_screenshots_of_issue_15(
    tmp_path: Path,
    attest_inbox: Any,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox("--demo", "200", store=store)
    model = board_of(store, "attest-demo-200-seed-0")
    docs = REPO / "docs"
    try:
        person = _person(browser, command, model)
        try:
            person.page.screenshot(path=str(docs / "inbox-groups.png"))
            person.page.goto("/?reason=tampered_component")
            accept = person.page.locator("button[data-option='accept-digest']")
            if accept.count():
                person.inspect()
                accept.first.click()
                person.page.wait_for_load_state()
                person.page.screenshot(path=str(docs / "inbox-confirm.png"))
                person.page.click("button[data-confirm]")
                person.page.wait_for_load_state()
            person.page.goto("/")
            card = person.page.locator("article.ask").first
            person.inspect()
            card.locator("button[data-option='quarantine']").click()
            person.page.wait_for_load_state()
            person.page.goto("/decided")
            person.page.screenshot(path=str(docs / "inbox-decided.png"))
            person.page.goto("/not-asked")
            person.page.screenshot(path=str(docs / "inbox-not-asked.png"))
            person.inspect()
        finally:
            person.finish("inboxui-docs")
    finally:
        model.close()
    command.stop()
    for name in ("groups", "decided", "not-asked"):
        assert (docs / f"inbox-{name}.png").stat().st_size < 300_000

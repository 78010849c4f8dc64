"""Issue 15 (items 1 and 3) in a real browser: Debian's Chromium through Playwright.

With the inbox tests' harness (dialogs, CSP violations, injected elements, headers and
off-loopback requests checked in every flow): a person sees their own asks first, then
their team's, each with its deadline, the time left and the default decision; they
reassign one with a note, and it moves to the other person's list (live, on the page
that person has open) and into the ask's history.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from inbox_support import REALISTIC, REPO, serve, settings
from test_inbox_assign import DEADLINES, ROUTES, people_board, routed_ask
from test_inbox_browser import Live, Session, browser  # noqa: F401

from pybb.human import (
    AssignmentPolicy,
    AssignRule,
    DeadlinePolicy,
    Person,
    assignments,
    post_ask,
    set_person,
)
from pybb.inbox import TokenTable, create_app

pytestmark = pytest.mark.browser


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    model = people_board(tmp_path / "people.db")
    set_person(model.control, Person("human:alice", teams=("ops",)), writer="admin")
    set_person(model.control, Person("human:bob", teams=("sec",)), writer="admin")
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-rest", cls="uefi", age=4)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-bob", cls="arch", age=3)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-team", cls="rhel9", age=2)))
    post_ask(model.control, DEADLINES.stamp(routed_ask("a-mine", cls="uefi", scope="fleet/site-a")))
    tokens = TokenTable()
    alice, bob = tokens.issue("alice"), tokens.issue("bob")
    try:
        with serve(create_app(model, tokens, settings=settings(), assignment=ROUTES)) as url:
            yield Live(url, model, tokens, alice, bob)
    finally:
        model.close()


def _cards(person: Session) -> list[tuple[str, str]]:
    found = person.page.eval_on_selector_all(
        "article.ask", "cards => cards.map(c => [c.dataset.ask, c.dataset.rank])"
    )
    return [(a, r) for a, r in found]


def test_a_person_sees_their_own_first_reassigns_one_with_a_note_and_it_moves(
    live: Live,
    browser: Any,  # noqa: F811
) -> None:
    bob = Session(browser, live, "bob")
    alice = Session(browser, live, "alice")
    try:
        bob.login(live.bob)
        bob.page.wait_for_selector("#live-status:text('live')")
        assert _cards(bob)[0] == ("a-bob", "mine")
        alice.login(live.alice)
        assert _cards(alice) == [
            ("a-mine", "mine"), ("a-team", "team"), ("a-rest", "other"), ("a-bob", "other")
        ]  # fmt: skip
        mine = alice.card("a-mine")
        assert mine.locator(".assignee").inner_text() == "you"
        deadline = mine.locator(".due dd").inner_text()
        assert ", in 1 h 5" in deadline and "; then Quarantine" in deadline
        assert "overdue by 2 h" in alice.card("a-rest").locator(".due dd").inner_text()
        alice.inspect()
        mine.locator("details.reassign summary").click()
        mine.locator("details.reassign input[name='to']").fill("human:bob")
        mine.locator("details.reassign input[name='note']").fill("bob knows this shim")
        mine.locator("button[data-reassign='a-mine']").click()
        alice.page.wait_for_url(live.url + "/asks/a-mine")
        history = alice.page.inner_text(".history")
        assert "human:alice reassigned it to human:bob: “bob knows this shim”" in history
        assert alice.page.inner_text(".assignee") == "human:bob"
        made = assignments(live.model.reader, "a-mine")
        assert [(m.to, m.by, m.note) for m in made] == [
            ("human:bob", "human:alice", "bob knows this shim")
        ]
        alice.inspect()
        alice.page.goto("/")
        assert _cards(alice)[-1] == ("a-mine", "other")  # no longer hers
        # Bob's open page takes the reassignment in live: the ask is his now.
        bob.page.wait_for_selector("article[data-ask='a-mine'][data-rank='mine']")
        assert _cards(bob)[:2] == [("a-bob", "mine"), ("a-mine", "mine")]
        alice.page.goto("/decided")
        row = alice.page.locator("tr.how-reassigned[data-ask='a-mine']").inner_text()
        assert "human:alice" in row and "to human:bob" in row and "bob knows this shim" in row
    finally:
        bob.finish("assign-reassign")
        alice.finish("assign-reassign")


DOCS_ROUTES = AssignmentPolicy(
    rules=(
        AssignRule("human:alice", klass="dell-r650"),
        AssignRule("team:ops", klass="lenovo-se350"),
    ),
    default="team:triage",
)


@pytest.mark.skipif(
    os.environ.get("PYBB_DOCS_SCREENSHOT") != "1",
    reason="set PYBB_DOCS_SCREENSHOT=1 to refresh docs/inbox-assign.png",
)
def test_refresh_the_docs_screenshot_of_assignment(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    model = people_board(tmp_path / "docs.db")
    set_person(model.control, Person("human:alice", teams=("ops",)), writer="admin")
    set_person(model.control, Person("human:bob", teams=("ops",)), writer="admin")
    classes = ("dell-r650", "lenovo-se350", "supermicro-x12")
    policy = DeadlinePolicy(after=timedelta(hours=4), default="quarantine")
    now = datetime.now(UTC)
    for n, (ask, cls) in enumerate(zip(REALISTIC, classes, strict=True)):
        tier = {"reason": "tampered_component", "class": cls, "findings": [{"pcr": 4 + n}]}
        data = {**ask.report_data, "tier_report": tier}
        made = dataclasses.replace(ask, report_data=data, created_at=now - timedelta(hours=n))
        post_ask(model.control, policy.stamp(made))
    tokens = TokenTable()
    token = tokens.issue("alice")
    target = REPO / "docs" / "inbox-assign.png"
    try:
        app = create_app(model, tokens, settings=settings(), assignment=DOCS_ROUTES)
        with serve(app) as url:
            person = Session(browser, Live(url, model, tokens, token, token), "alice")
            person.login(token)
            person.page.wait_for_selector("#live-status:text('live')")
            card = person.card(REALISTIC[0].ask_id)
            card.locator("details.reassign summary").click()
            card.locator("details.reassign input[name='to']").fill("human:bob")
            card.locator("details.reassign input[name='note']").fill("bob rolled out the new shim")
            person.page.evaluate("window.scrollTo(0, 0)")
            person.page.screenshot(path=str(target))
            person.finish("assign-docs")
    finally:
        model.close()
    assert target.stat().st_size < 300_000

"""Issue 15 in a real browser: notified by email and webhook, the link opens the ask once,
a person answers it, and an ask nobody answers gets its default at the deadline.

A supervised run (SQLite) notifies alice over a local webhook receiver and a local
aiosmtpd server; the real inbox (uvicorn, on the same store) accepts the links. Chromium
(Debian's, driven by Playwright) follows the emailed link after a mail scanner has
fetched it (which uses nothing), signs in with the landing page's button (which uses
the link) and answers with one click; the same link again is refused. The run's fake
clock passes the other ask's deadline and the ask page shows it answered by the deadline.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "human"), str(HERE.parent / "inbox")]

from inbox_support import serve  # noqa: E402
from notify_support import smtp_server, webhook_receiver  # noqa: E402
from supervision_support import open_run, settings, write  # noqa: E402

from pybb.human import (  # noqa: E402
    DEADLINE_BY,
    AssignmentPolicy,
    Channel,
    DeadlinePolicy,
    EmailNotifier,
    Person,
    WebhookNotifier,
    ask_state,
    set_person,
)
from pybb.inbox import InboxSettings, TokenTable, attach_run, create_app  # noqa: E402
from pybb.supervision import NotifySettings  # noqa: E402
from pybb.testing import FakeClock  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
LINK_SECRET = b"the inbox's link secret, 32 bytes"
HOOK_SECRET = b"the webhook's shared secret....."

pytestmark = pytest.mark.browser

if not CHROMIUM.exists() and not IN_CI:
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)


def _screenshot(page: Any, name: str) -> None:
    """Into test-artifacts/inbox/, and with PYBB_DOCS_SCREENSHOT=1 into docs/ as well."""
    repo = Path(__file__).resolve().parents[3]
    shots = repo / "test-artifacts" / "inbox"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / name), full_page=True)
    if os.environ.get("PYBB_DOCS_SCREENSHOT") == "1":
        page.screenshot(path=str(repo / "docs" / f"inbox-{name}"), full_page=True)


def _link(text: str) -> str:
    return next(line.strip() for line in text.splitlines() if "/link/" in line)


def test_notified_by_email_and_webhook_the_link_opens_the_ask_once(tmp_path: Path) -> None:
    from playwright import sync_api

    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))  # links expire in real time
    store = f"sqlite:///{tmp_path / 'run.db'}"
    tokens = TokenTable(tmp_path / "tokens.json")
    token = tokens.issue("alice")
    with webhook_receiver() as hook, smtp_server() as box:
        run = open_run(store, settings(deadlines=DeadlinePolicy(after=timedelta(hours=1))))
        run.close()  # the board exists; the inbox attaches to it like `pybb inbox` does
        inbox_model = attach_run(store, "sup")
        try:
            app = create_app(inbox_model, tokens, settings=InboxSettings(link_secret=LINK_SECRET))
            with serve(app) as url:
                notify = NotifySettings(
                    {
                        "webhook": WebhookNotifier(HOOK_SECRET),
                        "email": EmailNotifier("127.0.0.1", box.port, sender="pybb@localhost"),
                    },
                    LINK_SECRET,
                    url,
                )
                run = open_run(
                    store,
                    settings(
                        deadlines=DeadlinePolicy(after=timedelta(hours=1)),
                        assignment=AssignmentPolicy(default="human:alice"),
                        notify=notify,
                    ),
                    clock=clock,
                )
                try:
                    _flow(run, clock, url, token, hook, box, sync_api)
                finally:
                    run.close()
        finally:
            inbox_model.close()


def _flow(
    run: Any, clock: FakeClock, url: str, token: str, hook: Any, box: Any, sync_api: Any
) -> None:
    model = run.blackboard.model
    alice = Person(
        "human:alice",
        (Channel("webhook", hook.url), Channel("email", "alice@localhost")),
    )
    set_person(model.control, alice, writer="app")
    write(run.blackboard, {"a": None, "b": None})
    run.run()
    run.poll()
    first, second = run.open_asks()
    # both channels got both asks: the webhook signed, the mail with the link
    assert sorted(m["X-Pybb-Ask"] for m in box.messages) == sorted([first.ask_id, second.ask_id])
    for headers, body in hook.received:
        signature = "sha256=" + hmac.new(HOOK_SECRET, body, hashlib.sha256).hexdigest()
        assert headers["X-Pybb-Signature"] == signature
    assert {json.loads(b)["ask_id"] for _, b in hook.received} == {first.ask_id, second.ask_id}
    mail = next(m for m in box.messages if m["X-Pybb-Ask"] == first.ask_id)
    link = _link(mail.get_content())
    assert link.startswith(url + "/link/")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            # a mail scanner fetches the link first (its own client, no cookies): it
            # sees the landing page and uses nothing
            scanner = browser.new_context(base_url=url)
            scanned = scanner.request.get(link)
            assert scanned.status == 200 and "Sign in and answer" in scanned.text()
            scanner.close()
            assert model.reader.read_level("link_uses") == ()
            page = browser.new_context(base_url=url).new_page()
            page.set_default_timeout(15_000)
            page.goto(link)  # the person's click, not logged in: the ask and one button
            assert page.url == link
            assert first.title in page.inner_text("h1")
            _screenshot(page, "link-landing.png")
            page.click("button[data-follow-link='yes']")  # uses the link, signs in
            page.wait_for_url(f"{url}/asks/{first.ask_id}")
            assert len(model.reader.read_level("link_uses")) == 1
            option = first.options[-1].id
            page.locator(f"button[data-option='{option}']").click()
            page.wait_for_load_state()
            assert "Answered by you" in page.inner_text(".banner")
            again = page.goto(link)  # the same link a second time: refused
            assert again is not None and again.status == 410
            assert "already used" in page.inner_text("body")
            # the sign-in from the link opened that ask only; the token opens the rest
            page.goto(f"/asks/{second.ask_id}")
            assert page.url == f"{url}/login"
            page.fill("#token", token)
            page.click("form[action='/login'] button")
            page.wait_for_url(url + "/")

            clock.advance(3600)  # nobody answered the other ask: its deadline passes
            run.poll()
            page.goto(f"/asks/{second.ask_id}")
            assert "Answered by deadline" in page.inner_text(".banner")
            shot = Path(__file__).resolve().parents[3] / "test-artifacts" / "inbox"
            shot.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot / "deadline-default.png"), full_page=True)
        finally:
            browser.close()

    assert run.blackboard.get_resolution(first.entry).by == "human:alice"
    default = run.blackboard.get_resolution(second.entry)
    assert (default.by, default.decision) == (DEADLINE_BY, second.default_option)
    state = ask_state(model.reader, first.ask_id)
    assert state is not None and state.answer is not None and state.answer.option == option
    assert len(model.reader.read_level("link_uses")) == 1

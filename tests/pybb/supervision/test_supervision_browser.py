"""Issue 6 end to end, in a real browser: a fleet, its inbox, one click, the board.

``pybb attest FOLDER --inbox`` runs a fleet in which two devices boot the same unknown
digest, and serves its inbox. Debian's Chromium (driven by Playwright, with the inbox
tests' harness: dialogs, CSP violations, injected elements, headers and off-loopback
requests are all checked) logs in with the printed token and answers the first
device's ask with "Accept the new digest into the allowlist", sees the preview of the
two devices it repairs (one root cause, so one group card), and confirms. Then, on the board: the
answer was written by ``human:operator``, the first device is resolved with that
decision in good standing, and the second device passes too without anyone answering
its ask, whose card leaves another open inbox page without a reload.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inbox"))  # the inbox's harness

from supervision_support import twin_fleet
from test_inbox_browser import Live, Session, browser  # noqa: F401
from test_supervision_attestation import attest_inbox, board_of, wait_for  # noqa: F401

from pybb import Stage
from pybb.attestation import load_fleet, save_fleet
from pybb.human import AskStatus, ask_state, open_asks
from pybb.inbox import TokenTable
from pybb.supervision import applied_answers
from pybb.supervision.attestation import ACCEPT, SupervisedAttestation

pytestmark = pytest.mark.browser


@pytest.fixture
def fleet_folder(tmp_path: Path) -> Path:
    fleet, _, _ = twin_fleet(between=2, name="browser")
    return save_fleet(fleet, tmp_path / "browser")  # a folder's fleet is named after it


def test_a_person_accepts_a_digest_in_the_browser_and_the_other_device_passes(
    tmp_path: Path,
    fleet_folder: Path,
    attest_inbox: Any,  # noqa: F811 - the fixture imported above
    browser: Any,  # noqa: F811 - the inbox tests' fixture
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox(str(fleet_folder), store=store)
    model = board_of(store, "attest-browser")
    try:
        reader = model.reader
        asks = {a.entry: a for a in open_asks(reader)}
        assert set(asks) == {"first", "twin"}
        live = Live(command.url, model, TokenTable(), command.token, command.token)
        person = Session(browser, live, "operator")
        watcher = Session(browser, live, "watcher")  # another tab, left on the inbox
        try:
            for session in (watcher, person):
                session.login(command.token)
                session.page.wait_for_selector("#live-status:text('live')")
            before = watcher.watch.navigations
            # One root cause (same reason, class and digest): the twin is in first's group.
            group = watcher.card(asks["first"].ask_id)
            assert group.get_attribute("data-group-size") == "2"
            assert "twin" in group.locator("ul.members").inner_text()
            card = person.card(asks["first"].ask_id)
            assert "Accept the new digest into the allowlist" in card.inner_text()
            assert "★" in card.locator("form.recommended button").first.inner_text()
            person.click_option(asks["first"].ask_id, ACCEPT)
            # Fleet policy changes only after a preview of exactly what it repairs.
            assert person.page.inner_text(".repair-count") == "2"
            assert person.page.locator("ul.repairs li").all_inner_texts() == ["first", "twin"]
            still = ask_state(reader, asks["first"].ask_id)
            assert still is not None and still.status is AskStatus.OPEN
            person.inspect()
            person.page.click("button[data-confirm]")
            person.page.wait_for_load_state()
            assert "Answered by you" in person.page.inner_text(".banner")
            # The answer is on the board, written by the person the token stands for.
            state = ask_state(reader, asks["first"].ask_id)
            assert state is not None and state.status is AskStatus.ANSWERED
            assert state.answer is not None
            assert (state.answer.by, state.answer.option) == ("human:operator", ACCEPT)
            # The run applies it: the first device resolved, the twin passes, its ask goes.
            applied = wait_for(lambda: applied_answers(reader))
            assert [(a.key, a.outcome) for a in applied] == [("first", "resolved")]
            wait_for(lambda: _closed(reader, asks["twin"].ask_id))
            watcher.card(asks["first"].ask_id).wait_for(state="detached")
            assert watcher.watch.navigations == before  # no reload
        finally:
            person.finish("supervision-accept-digest")
            watcher.finish("supervision-accept-digest")
    finally:
        model.close()
    out = command.stop()
    assert command.process.returncode == 0, out
    assert "1 answer(s) applied" in out
    _check_board(fleet_folder, store)


def _closed(reader: Any, ask_id: str) -> bool:
    state = ask_state(reader, ask_id)
    return state is not None and state.status is AskStatus.CLOSED


def _check_board(folder: Path, store: Path) -> None:
    """Reopen the run as the controller sees it: decisions, who, and standing."""
    with SupervisedAttestation(load_fleet(folder), store=f"sqlite:///{store}") as session:
        board = session.attestation.blackboard
        for device in ("first", "twin"):
            resolution = board.get_resolution(device)
            assert resolution is not None and resolution.decision == ACCEPT
            assert resolution.by == "human:operator"
            entry = board.get_entry(device)
            assert entry.stage is Stage.RESOLVED and entry.good_standing  # it passes
            assert board.get_history(device)[-2].kind == "resolution"
        closed = [(r.key, r.disposition.name) for r in session.run.records() if r.kind == "closed"]
        assert closed == [("twin", "RESOLVED_OOB")]

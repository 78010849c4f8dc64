"""Answers that act: quarantine reaches the board, the report and the CLI; pulling a denied
escalation into an ask is charged to the same budget and refused when it is spent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from supervision_support import twin_fleet

from pybb.attestation import generate_fleet
from pybb.human import answer
from pybb.supervision import quarantine_entry, quarantined, remeasure_requests
from pybb.supervision.attestation import (
    QUARANTINE,
    REMEASURE,
    SupervisedAttestation,
    attestation_settings,
)

REPO = Path(__file__).resolve().parents[3]


def test_a_quarantine_answer_reaches_the_board_the_report_and_the_cli(tmp_path: Path) -> None:
    fleet, first, twin = twin_fleet(between=1, name="q")
    store = f"sqlite:///{tmp_path / 'q.db'}"
    with SupervisedAttestation(fleet, store=store) as session:
        session.attest()
        board = session.attestation.blackboard
        asks = {a.entry: a for a in session.run.open_asks()}
        answer(board.model.control, "human:alice", asks[first].ask_id, QUARANTINE, "stolen?")
        session.run.poll()
        session.run.poll()  # applying again changes nothing: the list is written once
        assert quarantined(board) == [first]
        again = quarantine_entry(
            board.model.control, first, by="human:bob", at=asks[first].created_at
        )
        assert again is False and quarantined(board) == [first]
        data = session.report().to_json()
        assert data["quarantined"] == [first]
        lines = {d["device"]: d for d in data["devices"]}
        assert lines[first]["quarantined"] is True and "quarantined" not in lines[twin]
        board_id = session.board_id
    done = subprocess.run(
        [sys.executable, "-m", "pybb", "attest", "quarantine", "--store", store,
         "--board-id", board_id, "--json"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["quarantined"]
    assert [(r["key"], r["by"], r["note"]) for r in rows] == [(first, "human:alice", "stolen?")]


def test_the_quarantine_subcommand_names_a_board_it_cannot_find(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pybb", "attest", "quarantine", "--store",
         f"sqlite:///{tmp_path / 'none.db'}", "--board-id", "nope"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no SQLite file" in done.stderr


def test_a_remeasure_answer_is_a_request_on_the_board(tmp_path: Path) -> None:
    fleet, first, _ = twin_fleet(between=0, name="r")
    with SupervisedAttestation(fleet, store=f"sqlite:///{tmp_path / 'r.db'}") as session:
        session.attest()
        board = session.attestation.blackboard
        asks = {a.entry: a for a in session.run.open_asks()}
        answer(board.model.control, "human:alice", asks[first].ask_id, REMEASURE)
        session.run.poll()
        assert [(r["key"], r["by"]) for r in remeasure_requests(board)] == [(first, "human:alice")]
        assert quarantined(board) == []


def test_pulling_a_denied_escalation_is_charged_to_the_budget_and_refused_when_spent(
    tmp_path: Path,
) -> None:
    fleet = generate_fleet(40, seed=4)
    settings = attestation_settings(asks=3)
    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'p.db'}", settings=settings
    ) as session:
        session.attest()
        supervisor = session.run.supervisor
        denied = [r for r in supervisor.records() if r.disposition.name == "DENIED"]
        assert denied, "the fleet must overflow a budget of three asks"
        asked = len(session.run.open_asks())
        spent = {s.path: s for s in supervisor.store.scopes()}
        outcome = supervisor.pull(denied[0].escalation_id, "human:alice", "look at it")
        if asked < 3:
            assert outcome["outcome"] == "asked", outcome
            assert len(session.run.open_asks()) == asked + 1
        else:
            assert outcome["outcome"] == "refused"
            assert "nothing was asked" in outcome["message"]
            assert len(session.run.open_asks()) == asked
        assert supervisor.pull(denied[0].escalation_id, "human:bob") == outcome  # once
        assert spent  # the scopes exist


def test_pulling_within_the_budget_asks_and_charges_it(tmp_path: Path) -> None:
    fleet = generate_fleet(40, seed=4)
    settings = attestation_settings(asks=30)
    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'p.db'}", settings=settings
    ) as session:
        session.attest()
        supervisor = session.run.supervisor
        denied = [r for r in supervisor.records() if r.disposition.name == "DENIED"]
        assert denied, "the graduated bar must deny some escalations"
        before = len(session.run.open_asks())
        outcome = supervisor.pull(denied[0].escalation_id, "human:alice")
        assert outcome["outcome"] == "asked", outcome
        assert outcome["admission"]["spent"] == before + 1
        assert len(session.run.open_asks()) == before + 1
        assert denied[0].key in {a.entry for a in session.run.open_asks()}


# A re-measured device running again when its fresh evidence arrives (passing, repaired,
# escalated again and asked again, once across sessions): test_supervision_remeasure.py.


def test_the_accept_preview_counts_the_devices_the_budget_did_not_ask_about(
    tmp_path: Path,
) -> None:
    from pybb.inbox._service import visible_states
    from pybb.inbox._views import digest_preview, not_asked_rows
    from pybb.supervision.attestation import ACCEPT

    fleet, first, twin = twin_fleet(between=3, name="preview")
    settings = attestation_settings(asks=1)  # the twin is escalated but not asked
    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'v.db'}", settings=settings
    ) as session:
        session.attest()
        model = session.attestation.blackboard.model
        asks = {a.entry: a for a in session.run.open_asks()}
        assert set(asks) == {first}
        states = visible_states(model, "human:alice")
        unasked = not_asked_rows(model)
        assert [r["key"] for r in unasked] == [twin]
        assert digest_preview(states, asks[first], unasked) == [first, twin]
        assert digest_preview(states, asks[first]) == [first]  # control: asks alone
        # What the preview promised is what accepting does.
        answer(model.control, "human:alice", asks[first].ask_id, ACCEPT)
        session.run.poll()
        board = session.attestation.blackboard
        assert all(board.get_entry(d).good_standing for d in (first, twin))


def test_with_real_evidence_a_remeasure_issues_the_device_one_fresh_challenge(
    tmp_path: Path,
) -> None:
    from pybb.attestation import Registry

    fleet, first, _ = twin_fleet(between=0, name="nonce")
    store = f"sqlite:///{tmp_path / 'n.db'}"
    registry = Registry(store, "registry", writer="human:ops")
    with (
        registry,
        SupervisedAttestation(fleet, store=store, challenge=registry.challenge) as session,
    ):
        session.attest()
        board = session.attestation.blackboard
        asks = {a.entry: a for a in session.run.open_asks()}
        assert session.challenges() == {}
        answer(board.model.control, "human:alice", asks[first].ask_id, REMEASURE)
        session.run.poll()
        session.run.poll()  # challenged once, not at every poll
        nonces = session.challenges()
        assert list(nonces) == [first]
        registry.spend(first, bytes.fromhex(nonces[first]))  # issued to it, unexpired

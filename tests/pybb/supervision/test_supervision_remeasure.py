"""Re-measure: fresh evidence runs the device through the tree again, once.

A person answers "Re-measure the device"; when fresh evidence arrives the device's next
generation is opened (``Controller.reopen``) and goes through the tiers like a new
device: it passes, is repaired by the attribution tier, or is escalated again, which is
a new escalation and so a new ask within the budget. The first generation's escalation,
its ask and the request stay in the history. Two sessions polling the same board (and a
restart) run it once. With a challenge, only evidence quoted over the new nonce counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from supervision_support import twin_fleet

from pybb import Chain, Stage
from pybb.attestation import Evidence, Reason, generate_fleet, load_fleet, save_fleet
from pybb.human import answer, ask_states
from pybb.supervision import applied_answers, human_record, remeasure_requests
from pybb.supervision.attestation import REMEASURE, SupervisedAttestation


def _evidence(kind: str, like: Evidence, seed: int) -> Evidence:
    """A boot of ``kind`` of the class of ``like``, as the device ``like.device``."""
    fleet = generate_fleet(24, seed=seed, mix={kind: 1.0})
    for device in fleet.devices:
        found = fleet.load(device)
        reason = fleet.truth[device].reason
        wanted = {"clean": None, "sanctioned_update": Reason.SANCTIONED_UPDATE}.get(
            kind, Reason.TAMPERED_COMPONENT
        )
        if found.device_class == like.device_class and reason is wanted:
            return dataclasses.replace(found, device=like.device)
    raise AssertionError(f"no {kind} device of class {like.device_class} in the fleet")


def _measured_again(folder: Path, evidence: Evidence) -> None:
    """Write ``evidence`` as the device's fresh evidence in the fleet folder."""
    log_name = f"logs/{hashlib.sha256(evidence.log).hexdigest()[:20]}.bin"
    (folder / log_name).write_bytes(evidence.log)
    data = json.dumps(evidence.to_json(log_name), indent=1)
    (folder / "devices" / f"{evidence.device}.json").write_text(data, encoding="utf-8")


def _sent_back(tmp_path: Path, name: str, **options: Any) -> tuple[SupervisedAttestation, Path]:
    """A session whose device ``first`` was escalated, asked about and sent back."""
    fleet, first, _ = twin_fleet(between=1, name=name)
    folder = save_fleet(fleet, tmp_path / name)
    store = options.pop("store", f"sqlite:///{tmp_path / (name + '.db')}")
    session = SupervisedAttestation(load_fleet(folder), store=store, **options)
    session.attest()
    board = session.attestation.blackboard
    asks = {a.entry: a for a in session.run.open_asks()}
    answer(board.model.control, "human:alice", asks[first].ask_id, REMEASURE, "reboot it")
    session.run.poll()
    assert [(a.key, a.outcome) for a in applied_answers(board.model.reader)] == [
        (first, "awaiting")
    ]
    return session, folder


def _line(session: SupervisedAttestation, device: str) -> dict[str, Any]:
    lines = {d["device"]: d for d in session.report().to_json()["devices"]}
    return dict(lines[device])


def _asks_for(session: SupervisedAttestation, key: str) -> list[str]:
    reader = session.attestation.blackboard.model.reader
    return [s.ask.ask_id for s in ask_states(reader) if s.ask.entry == key]


def test_fresh_evidence_that_passes_goes_through_the_tree_again(tmp_path: Path) -> None:
    session, folder = _sent_back(tmp_path, "pass")
    with session:
        board = session.attestation.blackboard
        escalated = board.get_escalation("first")
        assert escalated is not None
        assert session.remeasure() == []  # the same evidence is no fresh evidence
        _measured_again(folder, _evidence("clean", session.attestation.fleet.load("first"), 3))
        session.run.poll()  # the run's polls re-measure
        entry = board.get_entry("first")
        # A new generation, run like a new device: a provisional pass the verification
        # tier confirmed, not a person's resolution out of good standing.
        assert (entry.stage, entry.chain) == (Stage.GOOD, Chain.ON_PASS)
        assert entry.ks_history == {"verification": 1}
        assert entry.generation == 2
        assert board.get_resolution("first") is None
        assert _line(session, "first")["outcome"] == "passed"
        # The history keeps the first generation's escalation and the request.
        kinds = [(e.kind, e.data.get("generation", 1)) for e in board.get_history("first")]
        assert ("escalation", 1) in kinds and ("entry", 2) in kinds
        opened = next(e for e in board.get_history("first") if e.data.get("generation") == 2)
        assert (opened.data["by"], opened.data["note"]) == ("human:alice", "reboot it")
        assert opened.data["after"]["escalation"] == escalated.sequence
        assert [r["key"] for r in remeasure_requests(board)] == ["first"]
        record = human_record(board)["first"]  # who decided what: the first generation's
        assert record.escalation_id == escalated.id and record.decision is not None
        assert (record.decision.by, record.decision.decision) == ("human:alice", REMEASURE)
        assert session.remeasure() == []  # once


def test_fresh_evidence_a_tier_can_repair_is_repaired(tmp_path: Path) -> None:
    session, folder = _sent_back(tmp_path, "repair")
    with session:
        board = session.attestation.blackboard
        like = session.attestation.fleet.load("first")
        _measured_again(folder, _evidence("sanctioned_update", like, 5))
        assert session.remeasure() == ["first"]
        entry = board.get_entry("first")
        assert (entry.stage, entry.chain) == (Stage.GOOD, Chain.ON_FAIL)
        assert entry.ks_history == {"attribution": 1}
        assert entry.generation == 2
        line = _line(session, "first")
        assert (line["outcome"], line["reason"]) == ("repaired", "sanctioned_update")


def test_fresh_evidence_that_still_fails_is_escalated_again_and_asked_again(
    tmp_path: Path,
) -> None:
    session, folder = _sent_back(tmp_path, "again")
    with session:
        board = session.attestation.blackboard
        first = board.get_escalation("first")
        assert first is not None
        before = _asks_for(session, "first")
        like = session.attestation.fleet.load("first")
        _measured_again(folder, _evidence("tampered_component", like, 7))
        session.run.poll()
        again = board.get_escalation("first")
        assert again is not None and again.id != first.id
        assert board.get_entry("first").generation == 2
        assert board.get_entry("first").stage is Stage.ESCALATED
        # A new item for the supervisor: decided, and asked again within the budget.
        decision = session.run.supervisor.decision(again.id)
        assert decision is not None and decision.ask_id is not None
        assert decision.ask_id not in before
        assert decision.ask_id in {a.ask_id for a in session.run.open_asks()}
        assert _asks_for(session, "first") == [*before, decision.ask_id]
        assert session.run.supervisor.decision(first.id) is not None  # the first one stays
        record = human_record(board)["first"]  # the report reads the latest escalation
        assert (record.escalation_id, record.ask_id) == (again.id, decision.ask_id)
        # The new ask can send it back again: a request of its own, for the new escalation.
        answer(board.model.control, "human:bob", decision.ask_id, REMEASURE)
        session.run.poll()
        assert [r.get("escalation") for r in remeasure_requests(board)] == [first.id, again.id]
        _measured_again(folder, _evidence("clean", like, 3))
        session.run.poll()
        assert board.get_entry("first").generation == 3
        assert board.get_entry("first").stage is Stage.GOOD


def test_fresh_evidence_that_cannot_be_loaded_is_escalated_again_for_it(tmp_path: Path) -> None:
    session, folder = _sent_back(tmp_path, "broken")
    with session:
        board = session.attestation.blackboard
        (folder / "devices" / "first.json").write_text("{not json", encoding="utf-8")
        assert session.remeasure() == ["first"]
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation, list(entry.measurement)) == (
            Stage.ESCALATED, 2, ["evidence"],
        )  # fmt: skip
        assert _line(session, "first")["reason"] == "bad_evidence"
        assert len(_asks_for(session, "first")) == 2


def test_two_sessions_polling_one_board_and_a_restart_run_it_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'once.db'}"
    session, folder = _sent_back(tmp_path, "once", store=store)
    other = SupervisedAttestation(load_fleet(folder), store=store, board_id=session.board_id)
    try:
        like = session.attestation.fleet.load("first")
        _measured_again(folder, _evidence("tampered_component", like, 7))
        other.attestation.fleet.load("first")
        session.run.poll()
        other.run.poll()
        session.run.poll()
    finally:
        other.close()
        session.close()
    with SupervisedAttestation(load_fleet(folder), store=store) as restarted:
        restarted.run.run()
        restarted.run.poll()
        board = restarted.attestation.blackboard
        history = board.get_history("first")
        assert [e.data.get("generation") for e in history if e.kind == "entry"] == [None, 2]
        assert sum(1 for e in history if e.kind == "escalation") == 2
        assert sum(1 for e in history if e.kind == "attempt" and e.data.get("generation")) == 1
        asks = _asks_for(restarted, "first")
        assert len(asks) == 2 and len(set(asks)) == 2  # one new ask, not one per session
        decisions = [r for r in restarted.run.records() if r.key == "first"]
        assert len({r.escalation_id for r in decisions if r.kind == "decision"}) == 2


def test_with_a_challenge_only_evidence_over_the_new_nonce_runs_it_again(tmp_path: Path) -> None:
    from pybb.attestation import Registry
    from pybb.attestation._signed import SignedQuote
    from pybb.attestation._tpm import encode_tpms_attest, parse_tpms_attest

    store = f"sqlite:///{tmp_path / 'nonce.db'}"
    registry = Registry(store, "registry", writer="human:ops")
    with registry:
        session, folder = _sent_back(tmp_path, "nonce", store=store, challenge=registry.challenge)
        with session:
            board = session.attestation.blackboard
            nonce = bytes.fromhex(session.challenges()["first"])
            clean = _evidence("clean", session.attestation.fleet.load("first"), 3)
            assert clean.signed is not None
            assert parse_tpms_attest(clean.signed.message).extra_data != nonce
            # Clean evidence, but quoted over an old nonce: it answers no challenge.
            _measured_again(folder, clean)
            session.run.poll()
            assert board.get_entry("first").stage is Stage.ESCALATED  # still waiting
            assert board.get_entry("first").generation == 1
            # The same boot quoted over the nonce issued for this re-measure.
            attest = dataclasses.replace(parse_tpms_attest(clean.signed.message), extra_data=nonce)
            answered = SignedQuote(encode_tpms_attest(attest), clean.signed.signature)
            _measured_again(folder, dataclasses.replace(clean, signed=answered))
            session.run.poll()
            entry = board.get_entry("first")
            assert (entry.stage, entry.generation) == (Stage.GOOD, 2)
            assert list(session.challenges()) == ["first"]  # one challenge for one request


_POLL = """
import sys
from pybb.attestation import load_fleet
from pybb.supervision.attestation import SupervisedAttestation

folder, store, board_id = sys.argv[1:4]
with SupervisedAttestation(load_fleet(folder), store=store, board_id=board_id) as session:
    print(session.attestation.blackboard.get_entry("first").generation, flush=True)
    sys.stdin.readline()  # every process has opened the board: poll together
    session.run.poll()
"""


def test_processes_polling_at_once_run_it_again_once(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    store = f"sqlite:///{tmp_path / 'procs.db'}"
    session, folder = _sent_back(tmp_path, "procs", store=store)
    board_id = session.board_id
    like = session.attestation.fleet.load("first")
    session.close()
    _measured_again(folder, _evidence("tampered_component", like, 7))
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", _POLL, str(folder), store, board_id]
    pipe = subprocess.PIPE
    children = [
        subprocess.Popen(command, env=env, stdin=pipe, stdout=pipe, stderr=pipe) for _ in range(4)
    ]
    for child in children:  # each saw the device as it was sent back: all of them race
        assert child.stdout is not None
        assert child.stdout.readline() == b"1\n"
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    with SupervisedAttestation(load_fleet(folder), store=store) as again:
        history = again.attestation.blackboard.get_history("first")
        assert [e.data.get("generation") for e in history if e.kind == "entry"] == [None, 2]
        assert sum(1 for e in history if e.kind == "escalation") == 2
        asks = _asks_for(again, "first")
        assert len(asks) == 2 and len(set(asks)) == 2

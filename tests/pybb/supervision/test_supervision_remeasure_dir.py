"""Re-measure with real evidence: a new quote in the device's EVIDENCE_DIR folder runs it again.

The fleet is an EVIDENCE_DIR of tpm2-tools files whose quotes are signed with a real
key (``sign_quote``) and verified against the live AK registry, as ``pybb attest
verify`` does. A device sent back for re-measuring is challenged through the registry;
only a quote over that nonce, verified (and its nonce spent) when it arrives, opens the
device's next generation. The old quote dropped again, or a quote over any other nonce,
leaves it waiting; a badly signed answer is escalated as bad evidence.
"""

from __future__ import annotations

from pathlib import Path

from evidence_support import GCE, GOLDEN, OTHER_KEY, TAMPERED, pem, quoted

from pybb import Stage
from pybb.attestation import Registry, load_evidence_dir
from pybb.attestation._quote import load_attestation_key
from pybb.human import answer
from pybb.supervision import applied_answers
from pybb.supervision.attestation import REMEASURE, SupervisedAttestation


def _sent_back(
    tmp_path: Path, *, challenge: bool = True
) -> tuple[Registry, SupervisedAttestation, Path]:
    """An evidence-dir session whose device ``first`` (an unexpected boot) was sent back."""
    store = f"sqlite:///{tmp_path / 'dir.db'}"
    registry = Registry(store, "registry", writer="human:ops")
    registry.add_class(GOLDEN)
    root = tmp_path / "evidence"
    for device in ("first", "second"):
        registry.enroll(device, load_attestation_key(pem()), "gce")
        log = TAMPERED if device == "first" else GCE
        quoted(root / device, log, registry.challenge(device), 1000)
    fleet = load_evidence_dir(root, registry)
    issue = registry.challenge if challenge else None
    session = SupervisedAttestation(fleet, store=store, challenge=issue)
    session.attest()
    board = session.attestation.blackboard
    assert board.get_entry("first").stage is Stage.ESCALATED
    assert board.get_entry("second").stage is Stage.GOOD
    asks = {a.entry: a for a in session.run.open_asks()}
    answer(board.model.control, "human:alice", asks["first"].ask_id, REMEASURE, "reboot it")
    session.run.poll()
    assert [(a.key, a.outcome) for a in applied_answers(board.model.reader)] == [
        ("first", "awaiting")
    ]
    return registry, session, root


def test_a_new_quote_over_the_challenge_runs_the_device_again(tmp_path: Path) -> None:
    registry, session, root = _sent_back(tmp_path)
    with registry, session:
        board = session.attestation.blackboard
        folder = root / "first"
        old = (folder / "quote.msg").read_bytes(), (folder / "quote.sig").read_bytes()
        nonce = bytes.fromhex(session.challenges()["first"])
        session.run.poll()  # the old quote is still there: it answers no challenge
        assert (board.get_entry("first").stage, board.get_entry("first").generation) == (
            Stage.ESCALATED,
            1,
        )
        # A clean boot, really signed, but over a nonce issued for something else.
        quoted(folder, GCE, registry.challenge("first"), 2000)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        # The old (spent) quote dropped in again.
        (folder / "quote.msg").write_bytes(old[0])
        (folder / "quote.sig").write_bytes(old[1])
        (folder / "eventlog.bin").write_bytes(TAMPERED)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        # The same clean boot quoted over the re-measure challenge.
        quoted(folder, GCE, nonce, 3000)
        session.run.poll()
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation) == (Stage.GOOD, 2)
        line = {d["device"]: d for d in session.report().to_json()["devices"]}["first"]
        assert line["outcome"] == "passed", line
        assert list(session.challenges()) == ["first"]  # one challenge for one request


def test_without_a_challenge_a_quote_over_any_fresh_nonce_runs_it_again(tmp_path: Path) -> None:
    registry, session, root = _sent_back(tmp_path, challenge=False)
    with registry, session:
        board = session.attestation.blackboard
        folder = root / "first"
        old = (folder / "quote.msg").read_bytes(), (folder / "quote.sig").read_bytes()
        session.run.poll()  # the old quote, still there, was spent at load
        assert board.get_entry("first").generation == 1
        quoted(folder, GCE, registry.challenge("first"), 2000)
        (folder / "quote.msg").write_bytes(old[0])  # and dropped in again over a new one
        (folder / "quote.sig").write_bytes(old[1])
        (folder / "eventlog.bin").write_bytes(TAMPERED)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        quoted(folder, GCE, registry.challenge("first"), 3000)
        session.run.poll()
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation) == (Stage.GOOD, 2)


def test_an_answer_signed_by_another_key_is_escalated_as_bad_evidence(tmp_path: Path) -> None:
    registry, session, root = _sent_back(tmp_path)
    with registry, session:
        board = session.attestation.blackboard
        nonce = bytes.fromhex(session.challenges()["first"])
        quoted(root / "first", GCE, nonce, 2000, key=OTHER_KEY)
        session.run.poll()
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation) == (Stage.ESCALATED, 2)
        line = {d["device"]: d for d in session.report().to_json()["devices"]}["first"]
        assert line["reason"] == "bad_signature", line
        session.run.poll()  # read once: the refused answer does not run it a third time
        assert board.get_entry("first").generation == 2

"""Re-measure with real evidence: a new quote in the device's EVIDENCE_DIR folder runs it again.

The fleet is an EVIDENCE_DIR of tpm2-tools files whose quotes are signed with a real
key (``sign_quote``) and verified against the live AK registry, as ``pybb attest
verify`` does. A device sent back for re-measuring is challenged through the registry;
only a quote over that nonce, verified (and its nonce spent) when it arrives, opens the
device's next generation. The old quote dropped again, or a quote over any other nonce,
leaves it waiting; a badly signed answer is escalated as bad evidence.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pybb import Stage
from pybb.attestation import (
    DeviceClass,
    Registry,
    builtin_logs,
    load_evidence_dir,
    parse_event_log,
    replay,
)
from pybb.attestation._quote import load_attestation_key, sign_quote
from pybb.attestation._tpm import ClockInfo
from pybb.human import answer
from pybb.supervision import applied_answers
from pybb.supervision.attestation import REMEASURE, SupervisedAttestation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attestation"))
from attest_support import with_digests  # the attestation tests' tamperer

GCE = builtin_logs()["gce-ubuntu"]
TAMPERED = with_digests(GCE, parse_event_log(GCE).events[2], b"implant")  # a firmware implant
GOLDEN = DeviceClass.from_log("gce", GCE)
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _quoted(
    folder: Path, log: bytes, nonce: bytes, clock: int, key: rsa.RSAPrivateKey = KEY
) -> tuple[bytes, bytes]:
    """Write the device's evidence: ``log`` and a quote over its replay and ``nonce``."""
    values = replay(log)[GOLDEN.policy.bank]
    selected = {GOLDEN.policy.bank: {p: values[p] for p in GOLDEN.policy.pcrs}}
    message, signature = sign_quote(key, selected, nonce, clock=ClockInfo(clock, 1, 0, True))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eventlog.bin").write_bytes(log)
    (folder / "quote.msg").write_bytes(message)
    (folder / "quote.sig").write_bytes(signature)
    return message, signature


def _sent_back(
    tmp_path: Path, *, challenge: bool = True
) -> tuple[Registry, SupervisedAttestation, Path]:
    """An evidence-dir session whose device ``first`` (an unexpected boot) was sent back."""
    store = f"sqlite:///{tmp_path / 'dir.db'}"
    registry = Registry(store, "registry", writer="human:ops")
    registry.add_class(GOLDEN)
    pem = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    root = tmp_path / "evidence"
    for device in ("first", "second"):
        registry.enroll(device, load_attestation_key(pem), "gce")
        log = TAMPERED if device == "first" else GCE
        _quoted(root / device, log, registry.challenge(device), 1000)
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
        _quoted(folder, GCE, registry.challenge("first"), 2000)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        # The old (spent) quote dropped in again.
        (folder / "quote.msg").write_bytes(old[0])
        (folder / "quote.sig").write_bytes(old[1])
        (folder / "eventlog.bin").write_bytes(TAMPERED)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        # The same clean boot quoted over the re-measure challenge.
        _quoted(folder, GCE, nonce, 3000)
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
        _quoted(folder, GCE, registry.challenge("first"), 2000)
        (folder / "quote.msg").write_bytes(old[0])  # and dropped in again over a new one
        (folder / "quote.sig").write_bytes(old[1])
        (folder / "eventlog.bin").write_bytes(TAMPERED)
        session.run.poll()
        assert board.get_entry("first").generation == 1
        _quoted(folder, GCE, registry.challenge("first"), 3000)
        session.run.poll()
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation) == (Stage.GOOD, 2)


def test_an_answer_signed_by_another_key_is_escalated_as_bad_evidence(tmp_path: Path) -> None:
    registry, session, root = _sent_back(tmp_path)
    with registry, session:
        board = session.attestation.blackboard
        nonce = bytes.fromhex(session.challenges()["first"])
        _quoted(root / "first", GCE, nonce, 2000, key=OTHER_KEY)
        session.run.poll()
        entry = board.get_entry("first")
        assert (entry.stage, entry.generation) == (Stage.ESCALATED, 2)
        line = {d["device"]: d for d in session.report().to_json()["devices"]}["first"]
        assert line["reason"] == "bad_signature", line
        session.run.poll()  # read once: the refused answer does not run it a third time
        assert board.get_entry("first").generation == 2

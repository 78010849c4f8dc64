"""``pybb attest verify EVIDENCE_DIR --inbox``, run as an operator runs it (a subprocess).

The command docs/human-loop.md shows, on an EVIDENCE_DIR whose quotes a real RSA key
signs (enrolled in the registry as the devices' AK): the device with a firmware implant
is escalated and asked in the inbox; a person answers "re-measure" through the API
(token auth); the command prints the fresh challenge; a clean boot quoted over it is
written into the device's folder, and the device runs again and passes, on the board
and in the report written at Ctrl-C. Malformed inbox and notification options are
refused with exit 2 and one sentence naming them, before the store is created; without
``--inbox`` the command is as it was.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_support import Child, refused, run

sys.path.insert(0, str(Path(__file__).resolve().parent / "supervision"))

from evidence_support import GCE, GOLDEN, TAMPERED, pem, quoted

from pybb.attestation import Registry
from pybb.attestation._quote import load_attestation_key

PAGE = Path(__file__).resolve().parents[2] / "docs" / "human-loop.md"
SECRET = "a-webhook-secret-of-32-bytes...."


def _documented() -> list[str]:
    """The ``pybb attest verify ... --inbox`` command docs/human-loop.md shows (its words)."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"^```sh\n(pybb attest verify .*?)^```", text, re.DOTALL | re.MULTILINE)
    assert found is not None, "the verify --inbox section of human-loop.md moved"
    line = found.group(1).replace("\\\n", " ").strip()
    words = shlex.split(line)
    assert words[:3] == ["pybb", "attest", "verify"] and "--inbox" in words, words
    return words[1:]


def _evidence(tmp_path: Path, store: str) -> Path:
    """``evidence/`` with ``first`` (a firmware implant) and ``second`` (a clean boot)."""
    root = tmp_path / "evidence"
    with Registry(store, writer="human:ops") as registry:
        registry.add_class(GOLDEN)
        for device, log in (("first", TAMPERED), ("second", GCE)):
            registry.enroll(device, load_attestation_key(pem()), "gce")
            quoted(root / device, log, registry.challenge(device), 1000)
    return root


def _outcomes(report: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(report.read_text(encoding="utf-8"))
    return {d["device"]: d for d in data["devices"]}


def _value(child: Child, pattern: str) -> str:
    found = re.search(pattern, child.wait_for(pattern))
    assert found is not None
    return found.group(1)


def test_the_documented_command_serves_the_inbox_and_a_remeasure_answer_makes_it_pass(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'attest.db'}"
    root = _evidence(tmp_path, store)
    report = tmp_path / "verify.json"
    args = [str(root) if word.rstrip("/") == "evidence" else word for word in _documented()]
    args += ["--store", store, "--inbox-port", "0", "--report", str(report)]
    child = Child(args, cwd=tmp_path)
    try:
        child.wait_for(r"Ctrl-C to stop", timeout=120)
        token = _value(child, r"token for human:alice: (pybb_\S+)")
        url = _value(child, r"pybb inbox for run '[^']+': (http://\S+)").rstrip("/")
        first = _outcomes(report)  # written when the fleet is done
        assert (first["first"]["outcome"], first["second"]["outcome"]) == ("escalated", "passed")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            asks = client.get("/api/asks", params={"status": "open"}).json()["asks"]
            assert [a["ask"]["entry"] for a in asks] == ["first"], asks
            ask = asks[0]["ask"]
            assert "remeasure" in [o["id"] for o in ask["options"]], ask["options"]
            answered = client.post(
                f"/api/asks/{ask['ask_id']}/answer",
                json={"option": "remeasure", "note": "rebooted from the clean image"},
            )
            assert answered.status_code == 201, answered.text
        nonce = _value(child, r"re-measure first: quote over the nonce ([0-9a-f]+) ")
        assert f"into {root / 'first'}/" in child.wait_for(r"re-measure first:")
        quoted(root / "first", GCE, bytes.fromhex(nonce), 3000)  # the machine, booted clean
        child.wait_for(r"re-measured first: fresh evidence ran generation 2, now good")
        child.process.send_signal(signal.SIGINT)
        code, text = child.finish()
    finally:
        child.kill()
    assert code == 0, text[-3000:]  # no device stands escalated any more
    assert "Traceback" not in text and "1 answer(s) applied" in text
    devices = _outcomes(report)
    assert (devices["first"]["outcome"], devices["second"]["outcome"]) == ("passed", "passed")
    decision = devices["first"]["human"]["decision"]  # who sent it back, and why
    assert (decision["by"], decision["decision"], decision["note"]) == (
        "human:alice",
        "remeasure",
        "rebooted from the clean image",
    )


BAD = [
    (["--inbox", "--inbox-port", "99999"], "--inbox-port", "give 1..65535"),
    (["--inbox", "--notify-webhook", "ftp://hooks.example.org"], "--notify-webhook",
     "not an http(s) URL"),
    (["--inbox", "--notify-smtp", "smtp.example.org"], "--notify-smtp", "is not HOST:PORT"),
    (["--inbox", "--assign-to", "team:"], "--assign-to", "neither human:NAME nor team:NAME"),
    (["--inbox", "--notify-webhook", "http://127.0.0.1:9/h", "--webhook-secret-env", "NOPE"],
     "NOPE is not set", "export"),
    (["--inbox", "--assignment", "missing.json"], "--assignment", "cannot read"),
    (["--notify-webhook", "http://127.0.0.1:9/h"], "need --inbox", "add --inbox"),
    (["--assignment", "routes.json"], "--assignment routes the asks", "add --inbox"),
    (["--link-secret-env", "PYBB_LINKS"], "--link-secret-env signs the links", "--notify-smtp"),
    (["--inbox", "--store", "memory://"], "--inbox needs --store to be a SQLite", ""),
]  # fmt: skip


@pytest.mark.parametrize(("more", "named", "how"), BAD)
def test_malformed_inbox_options_are_refused_before_anything_is_created(
    tmp_path: Path, more: list[str], named: str, how: str
) -> None:
    (tmp_path / "evidence" / "first").mkdir(parents=True)
    (tmp_path / "routes.json").write_text(json.dumps({"default": "team:ops"}))
    before = sorted(tmp_path.rglob("*"))
    store = f"sqlite:///{tmp_path / 'attest.db'}"
    done = run("attest", "verify", "evidence", "--store", store, *more, cwd=tmp_path,
               env={"PYBB_WEBHOOK_SECRET": SECRET})  # fmt: skip
    refused(done, named, how)
    assert sorted(tmp_path.rglob("*")) == before  # no store, no report


def test_a_busy_inbox_port_is_refused_before_a_quote_is_read(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'attest.db'}"
    root = _evidence(tmp_path, store)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        done = run("attest", "verify", str(root), "--inbox", "--inbox-port", busy,
                   "--store", store, cwd=tmp_path)  # fmt: skip
    refused(done, f"--inbox-port {busy}: cannot listen", "give another --inbox-port")
    # The quotes' nonces were not spent: the same evidence still verifies.
    report = tmp_path / "after.json"
    run("attest", "verify", str(root), "--store", store, "--report", str(report), cwd=tmp_path)
    assert _outcomes(report)["second"]["outcome"] == "passed"


def test_without_the_inbox_verify_is_as_it_was(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'attest.db'}"
    root = _evidence(tmp_path, store)
    report = tmp_path / "plain.json"
    done = run("attest", "verify", str(root), "--store", store, "--report", str(report),
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]  # first is escalated
    assert "2 devices verified, 1 escalated" in done.stdout
    assert "token for" not in done.stdout and "Ctrl-C" not in done.stdout  # nothing served
    data = json.loads(report.read_text())
    assert "human_loop" not in data  # the plain report, as before
    assert {d["device"]: d["outcome"] for d in data["devices"]} == {
        "first": "escalated",
        "second": "passed",
    }

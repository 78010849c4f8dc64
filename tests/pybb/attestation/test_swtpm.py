"""Real quotes from a software TPM: ``pybb attest verify`` against ``tpm2_checkquote``.

A private swtpm (:mod:`swtpm_support`) is extended from the real firmware logs and
quotes over nonces ``pybb attest challenge`` issued; the devices' evidence is written in
tpm2-tools' own formats and attested with ``pybb attest verify``. Every good and bad
quote is also given to ``tpm2_checkquote`` (with the event log, ``-e``), which must
agree wherever it can judge (it keeps no state, so a replayed nonce and a rolled-back
clock pass it: those are the registry's to catch).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from swtpm_support import MISSING, SoftwareTpm

from pybb.attestation import DeviceClass, builtin_logs, parse_event_log
from pybb.attestation._registry import Registry
from pybb.cli import main

if MISSING and not os.environ.get("CI"):
    pytest.skip(
        f"{', '.join(MISSING)} not on PATH (apt-get install swtpm swtpm-tools tpm2-tools)",
        allow_module_level=True,
    )

GCE = builtin_logs()["gce-ubuntu"]
ARCH = builtin_logs()["arch-linux"]


@dataclass
class World:
    tpm: SoftwareTpm
    store: str
    root: Path
    handle: str
    pem: Path
    pcrs: str

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        capsys.readouterr()
        status = main(["attest", *args, "--store", self.store])
        return status, capsys.readouterr().out

    def challenge(self, capsys: pytest.CaptureFixture[str], device: str, *extra: str) -> str:
        status, out = self.cli(capsys, "challenge", device, *extra)
        assert status == 0
        nonce = out.strip()
        assert len(bytes.fromhex(nonce)) >= 20
        return nonce

    def evidence(
        self, folder: Path, device: str, nonce: str | None, log: bytes = GCE, handle: str = ""
    ) -> Path:
        out = folder / device
        self.tpm.quote(handle or self.handle, self.pcrs, nonce, out)
        (out / "eventlog.bin").write_bytes(log)
        return out

    def verify(self, capsys: pytest.CaptureFixture[str], folder: Path) -> dict[str, Any]:
        report = folder.parent / f"{folder.name}.json"
        self.cli(capsys, "verify", str(folder), "--report", str(report))
        data: dict[str, Any] = json.loads(report.read_text())
        return {d["device"]: d for d in data["devices"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("swtpm")
    tpm = SoftwareTpm(root / "tpm")
    try:
        handle, pem = tpm.create_ak("ak")
        store = f"sqlite:///{root / 'attest.db'}"
        golden = DeviceClass.from_log("gce", GCE)
        with Registry(store) as registry:
            registry.add_class(golden)
        pcrs = "sha256:" + ",".join(map(str, golden.policy.pcrs))
        tpm.extend(GCE)
        yield World(tpm, store, root, handle, pem, pcrs)
    finally:
        tpm.close()


def _enroll(world: World, capsys: pytest.CaptureFixture[str], device: str, pem: Path) -> None:
    status, out = world.cli(capsys, "enroll", device, "--ak", str(pem), "--class", "gce")
    assert status == 0, out
    assert f"enrolled {device}" in out


def test_real_quotes_good_and_bad_agree_with_tpm2_checkquote(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = world.root / "fleet"
    early = world.root / "early"
    handle2, pem2 = world.tpm.create_ak("second")
    devices = [
        "a-good",
        "b-flipped",
        "c-second-ak",
        "d-nonce-unknown",
        "e-altered-digest",
        "f-other-log",
        "h-revoked",
        "i-expired",
        "z-early",
    ]
    for device in devices:
        _enroll(world, capsys, device, world.pem)
    # Made first, verified last: its clock is behind the quotes accepted before it.
    early_nonce = world.challenge(capsys, "z-early")
    world.evidence(early, "z-early", early_nonce)
    time.sleep(0.05)

    nonces: dict[str, str] = {}
    for device in devices[:-1]:
        extra = ("--ttl", "0.0001") if device == "i-expired" else ()
        nonces[device] = world.challenge(capsys, device, *extra)
    world.evidence(fleet, "a-good", nonces["a-good"])
    flipped = world.evidence(fleet, "b-flipped", nonces["b-flipped"])
    message = bytearray((flipped / "quote.msg").read_bytes())
    message[-1] ^= 0x01  # the last byte of pcrDigest
    (flipped / "quote.msg").write_bytes(bytes(message))
    world.evidence(fleet, "c-second-ak", nonces["c-second-ak"], handle=handle2)
    world.evidence(fleet, "d-nonce-unknown", secrets.token_hex(32))
    altered = world.evidence(fleet, "e-altered-digest", nonces["e-altered-digest"])
    log = bytearray(GCE)
    event = next(e for e in parse_event_log(GCE).events if e.pcr_index == 4 and e.measured)
    at = bytes(log).index(event.digests["sha256"], event.offset)
    log[at] ^= 0xFF
    (altered / "eventlog.bin").write_bytes(bytes(log))
    world.evidence(fleet, "f-other-log", nonces["f-other-log"], log=ARCH)
    world.evidence(fleet, "g-unknown-ak", world.challenge(capsys, "g-unknown-ak"))
    world.evidence(fleet, "h-revoked", nonces["h-revoked"])
    assert world.cli(capsys, "revoke", "h-revoked")[0] == 0
    world.evidence(fleet, "i-expired", nonces["i-expired"])
    time.sleep(0.02)  # its nonce lived 6 ms

    landed = world.verify(capsys, fleet)
    got = {device: (d["outcome"], d["reason"]) for device, d in landed.items()}
    assert got == {
        "a-good": ("passed", None),
        "b-flipped": ("escalated", "bad_signature"),
        "c-second-ak": ("escalated", "bad_signature"),
        "d-nonce-unknown": ("escalated", "nonce_unknown"),
        "e-altered-digest": ("escalated", "pcr_digest_mismatch"),
        "f-other-log": ("escalated", "pcr_digest_mismatch"),
        "g-unknown-ak": ("escalated", "unknown_ak"),
        "h-revoked": ("escalated", "revoked_ak"),
        "i-expired": ("escalated", "nonce_expired"),
    }
    # With quote.pcrs the report names the PCR the altered event is in, and the file.
    text = landed["e-altered-digest"]["text"]
    assert "PCR 4 (sha256)" in text and "e-altered-digest/eventlog.bin" in text
    assert "b-flipped/quote.sig" in landed["b-flipped"]["text"]

    # tpm2_checkquote: the same verdict on every quote it can judge.
    check = world.tpm.checkquote
    assert check(world.pem, fleet / "a-good", nonces["a-good"]) == 0
    assert check(world.pem, fleet / "b-flipped", nonces["b-flipped"]) != 0
    assert check(world.pem, fleet / "c-second-ak", nonces["c-second-ak"]) != 0
    assert check(pem2, fleet / "c-second-ak", nonces["c-second-ak"]) == 0  # its own AK signed it
    assert check(world.pem, fleet / "d-nonce-unknown", nonces["d-nonce-unknown"]) != 0
    assert check(world.pem, fleet / "e-altered-digest", nonces["e-altered-digest"]) != 0
    assert check(world.pem, fleet / "f-other-log", nonces["f-other-log"]) != 0

    # A replayed quote (the good one again) and an old one: stateless checkquote passes both.
    again = world.root / "again"
    shutil.copytree(fleet / "a-good", again / "a-good")
    shutil.copytree(early / "z-early", again / "z-early")
    second = world.verify(capsys, again)
    assert (second["a-good"]["outcome"], second["a-good"]["reason"]) == (
        "escalated",
        "nonce_reused",
    )
    assert second["z-early"]["reason"] == "clock_rollback"
    assert check(world.pem, again / "a-good", nonces["a-good"]) == 0
    assert check(world.pem, again / "z-early", early_nonce) == 0


def test_verify_survives_bad_files_and_names_them(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = world.root / "bad"
    names = ["bad-garbage-msg", "bad-short-sig", "bad-huge-log", "bad-no-sig", "bad-pcrs", "ok"]
    for device in names:
        _enroll(world, capsys, device, world.pem)
        world.evidence(fleet, device, world.challenge(capsys, device))
    (fleet / "bad-garbage-msg" / "quote.msg").write_bytes(b"\x00garbage")
    sig = fleet / "bad-short-sig" / "quote.sig"
    sig.write_bytes(sig.read_bytes()[:100])
    with open(fleet / "bad-huge-log" / "eventlog.bin", "wb") as handle:
        handle.truncate(16 * 1024 * 1024 + 1)  # sparse: the cap is checked before reading
    (fleet / "bad-no-sig" / "quote.sig").unlink()
    (fleet / "bad-pcrs" / "quote.pcrs").write_bytes(b"\x01\x00")
    (fleet / "not a device").mkdir()
    landed = world.verify(capsys, fleet)
    assert landed["ok"]["outcome"] == "passed"
    reasons = {device: (d["reason"], d.get("text", "")) for device, d in landed.items()}
    assert reasons["bad-garbage-msg"][0] == "bad_quote"
    assert "bad-garbage-msg/quote.msg" in reasons["bad-garbage-msg"][1]
    assert "magic" in reasons["bad-garbage-msg"][1]
    assert reasons["bad-short-sig"][0] == "bad_quote"
    assert "truncated" in reasons["bad-short-sig"][1]
    assert reasons["bad-huge-log"][0] == "bad_evidence"
    assert "over the cap of 16777216 bytes" in reasons["bad-huge-log"][1]
    assert reasons["bad-no-sig"][0] == "bad_evidence"
    assert "bad-no-sig/quote.sig" in reasons["bad-no-sig"][1]
    assert reasons["bad-pcrs"][0] == "bad_quote"
    stand_in = next(d for d in landed if d.startswith("dir:"))
    assert reasons[stand_in][0] == "bad_evidence"

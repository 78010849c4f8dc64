"""Generated fleets carry signed quotes and their ledger; a saved folder keeps both.

An attacker editing a saved fleet folder is caught by the signatures: a forged PCR value
under an untouched signed quote, a removed quote, another device's quote, and a device
whose AK was taken out of ``registry.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pybb.attestation import (
    Attestation,
    DeviceOutcome,
    FleetError,
    QuoteError,
    Reason,
    generate_fleet,
    load_fleet,
    parse_tpms_attest,
    save_fleet,
)
from pybb.attestation._generate import QUOTE_KINDS


def test_each_quote_kind_lands_as_its_truth_says_and_the_others_are_signed() -> None:
    fleet = generate_fleet(60, seed=12, mix=dict.fromkeys((*QUOTE_KINDS, "clean"), 1.0))
    kinds = {fleet.truth[d].kind for d in fleet.devices}
    assert kinds == {*QUOTE_KINDS, "clean"}
    for device in fleet.devices:
        evidence = fleet.load(device, verify_quote=False)
        assert evidence.signed is not None
        attest = parse_tpms_attest(evidence.signed.message)
        assert len(attest.extra_data) == 32
    with Attestation(fleet) as attestation:
        report = attestation.run()
    assert report.accuracy == 1.0
    reasons = {r.truth.kind: r.reason for r in report.devices if r.truth is not None}
    assert reasons == {
        "clean": None,
        "replayed_nonce": Reason.NONCE_REUSED,
        "bad_signature": Reason.BAD_SIGNATURE,
        "unknown_ak": Reason.UNKNOWN_AK,
    }


def _saved(tmp_path: Path) -> tuple[Path, list[str]]:
    root = save_fleet(generate_fleet(8, seed=5, mix={"clean": 1.0}), tmp_path / "fleet")
    devices = sorted(p.stem for p in (root / "devices").glob("*.json"))
    return root, devices


def _edit(root: Path, device: str, change: object) -> None:
    path = root / "devices" / f"{device}.json"
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def test_a_saved_fleet_keeps_its_quotes_and_edits_to_it_are_caught(tmp_path: Path) -> None:
    root, devices = _saved(tmp_path)
    assert (root / "registry.json").is_file()
    first, second, third, fourth = devices[:4]

    def forge(data: dict) -> None:  # type: ignore[type-arg]
        bank = next(iter(data["quote"]))
        data["quote"][bank]["0"] = "00" * (len(data["quote"][bank]["0"]) // 2)

    _edit(root, first, forge)
    _edit(root, second, lambda data: data.pop("signed_quote"))
    other = json.loads((root / "devices" / f"{fourth}.json").read_text())["signed_quote"]
    _edit(root, third, lambda data: data.__setitem__("signed_quote", other))
    registry = json.loads((root / "registry.json").read_text())
    del registry["aks"][fourth]
    (root / "registry.json").write_text(json.dumps(registry))

    fleet = load_fleet(root)
    expected = {
        first: Reason.PCR_DIGEST_MISMATCH,
        second: Reason.BAD_QUOTE,
        third: Reason.BAD_SIGNATURE,
        fourth: Reason.UNKNOWN_AK,
    }
    for device, reason in expected.items():
        with pytest.raises(QuoteError) as caught:
            fleet.load(device)
        assert caught.value.reason is reason
        assert caught.value.path is None
        assert (caught.value.field or "").startswith(("signed_quote", "quote"))
    with Attestation(fleet) as attestation:
        report = attestation.run()
    landed = {r.device: (r.outcome, r.reason) for r in report.devices}
    for device in devices:
        want = expected.get(device)
        assert landed[device] == (
            (DeviceOutcome.ESCALATED, want) if want else (DeviceOutcome.PASSED, None)
        )


def test_without_its_registry_a_saved_fleet_is_an_unsigned_one(tmp_path: Path) -> None:
    # The old folder format keeps working: no registry.json, no quote checks.
    root, devices = _saved(tmp_path)
    (root / "registry.json").unlink()
    _edit(root, devices[0], lambda data: data.pop("signed_quote"))
    with Attestation(load_fleet(root)) as attestation:
        assert attestation.report().devices[0].outcome is DeviceOutcome.PENDING
        assert {r.outcome for r in attestation.run().devices} == {DeviceOutcome.PASSED}


def test_a_malformed_registry_refuses_the_fleet(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    (root / "registry.json").write_text('{"aks": {}, "nonces": {}}')
    with pytest.raises(FleetError, match=r"registry\.json"):
        load_fleet(root)

"""Fleet folders: written and read back, and the class, truth and device files they hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from attest_support import FEDORA, device, golden

from pybb.attestation import (
    Attestation,
    DeviceClass,
    DeviceOutcome,
    FleetError,
    PolicyError,
    Reason,
    generate_fleet,
    load_class,
    load_fleet,
    save_fleet,
)
from pybb.attestation import Fleet as FleetType


def outcomes(fleet: FleetType) -> list[tuple[str, str, str | None, str | None]]:
    with Attestation(fleet) as attestation:
        report = attestation.run()
    assert report.accuracy in (None, 1.0)
    return [
        (r.device, r.outcome.value, r.reason and r.reason.value, r.tier and r.tier.value)
        for r in report.devices
    ]


def test_a_saved_fleet_reads_back_and_lands_the_same(tmp_path: Path) -> None:
    generated = generate_fleet(120, seed=9)
    folder = save_fleet(generated, tmp_path / "fleet")
    assert len(list((folder / "devices").glob("*.json"))) == 120
    assert len(list((folder / "logs").glob("*.bin"))) < 120  # identical logs are shared
    loaded = load_fleet(folder)
    assert loaded.devices == generated.devices and set(loaded.classes) == set(generated.classes)
    for name, device_class in generated.classes.items():
        assert loaded.classes[name] == device_class
    assert {d: loaded.truth[d] for d in loaded.devices} == {
        d: generated.truth[d] for d in generated.devices
    }
    assert outcomes(loaded) == outcomes(generated)
    assert loaded.device_class(loaded.devices[0]) == generated.device_class(generated.devices[0])


def test_a_class_file_round_trips(tmp_path: Path) -> None:
    device_class = DeviceClass.from_log(
        "fedora", golden(FEDORA), allowed={0: [b"\x01" * 32]}, denied=[b"\x02" * 20]
    )
    path = tmp_path / "fedora.json"
    path.write_text(json.dumps(device_class.to_json()))
    assert load_class(path) == device_class
    assert load_class(path).fingerprint == device_class.fingerprint


def class_json() -> dict[str, object]:
    return DeviceClass.from_log("fedora", golden(FEDORA)).to_json()


def _set(data: dict[str, object], dotted: str, value: object) -> dict[str, object]:
    *parents, last = dotted.split(".")
    node: object = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]  # type: ignore[index]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is KeyError:
        del node[last]  # type: ignore[attr-defined]
    else:
        node[last] = value  # type: ignore[index]
    return data


@pytest.mark.parametrize(
    ("dotted", "value", "field"),
    [
        ("name", "no spaces allowed", "name"),
        ("policy.bank", "md5", "policy.bank"),
        ("policy.pcrs", [], "policy.pcrs"),
        ("policy.pcrs", [0, 0], "policy.pcrs"),
        ("policy.pcrs", [0, 40], "policy.pcrs.1"),
        ("policy.allow", {"0": ["zz"]}, "policy.allow.0.0"),
        ("policy.allow", {"x": []}, "policy.allow.x"),
        ("policy.deny", ["abc"], "policy.deny.0"),
        ("policy.secure_boot_required", "yes", "policy.secure_boot_required"),
        ("policy.colour", "blue", "policy.colour"),
        ("reference.4", KeyError, "reference.4"),
        ("reference.4", "00" * 31, "reference.4"),
        ("manifest.0.digest", "nothex" * 8, "manifest.0.digest"),
        ("manifest.0.pcr", -1, "manifest.0.pcr"),
        ("manifest.0", "a string", "manifest.0"),
    ],
)
def test_a_bad_class_file_stops_the_fleet_naming_file_and_field(
    tmp_path: Path, dotted: str, value: object, field: str
) -> None:
    (tmp_path / "classes").mkdir()
    (tmp_path / "classes" / "fedora.json").write_text(json.dumps(_set(class_json(), dotted, value)))
    with pytest.raises(PolicyError) as caught:
        load_fleet(tmp_path)
    assert (caught.value.path, caught.value.field) == ("classes/fedora.json", field)
    assert f"'classes/fedora.json', field '{field}'" in str(caught.value)


def test_a_folder_without_classes_or_with_a_bad_truth_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="not a folder"):
        load_fleet(tmp_path / "missing")
    with pytest.raises(FleetError, match=r"classes/\*\.json"):
        load_fleet(tmp_path)
    save_fleet(generate_fleet(3, seed=1), tmp_path)
    (tmp_path / "truth.json").write_text('{"dev-00000": {"kind": "clean", "outcome": "great"}}')
    with pytest.raises(FleetError) as caught:
        load_fleet(tmp_path)
    assert (caught.value.path, caught.value.field) == ("truth.json", "dev-00000")


def test_device_files_that_cannot_be_used_escalate_that_device_only(tmp_path: Path) -> None:
    save_fleet(generate_fleet(6, seed=4, mix={"clean": 1.0}), tmp_path)
    devices = tmp_path / "devices"
    (devices / "bad name!.json").write_text("{}")
    good = json.loads((devices / "dev-00000.json").read_text())
    (devices / "dev-imposter.json").write_text(json.dumps(good))  # names dev-00000 inside
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text(json.dumps({**good, "device": "dev-link"}))
    os.symlink(outside, devices / "dev-link.json")
    (devices / "dev-dir.json").mkdir()
    fleet = load_fleet(tmp_path)
    with Attestation(fleet) as attestation:
        report = attestation.run()
    results = {r.device: r for r in report.devices}
    assert sum(r.outcome is DeviceOutcome.PASSED for r in results.values()) == 6
    bad = [r for r in results.values() if r.outcome is DeviceOutcome.ESCALATED]
    assert len(bad) == 4 and all(r.reason is Reason.BAD_EVIDENCE for r in bad)
    messages = {r.device: r.report.findings[0].message for r in bad if r.report}
    assert "not '<device id>.json'" in next(m for k, m in messages.items() if k.startswith("file:"))
    assert messages["dev-imposter"].startswith("device: names device 'dev-00000'")
    assert "leading out of the fleet folder" in messages["dev-link"]
    assert "not a regular file" in messages["dev-dir"]


def test_a_class_enrolled_from_a_log_covers_what_the_log_extends() -> None:
    device_class = DeviceClass.from_log("fedora", golden(FEDORA))
    assert device_class.policy.bank == "sha256"
    assert (
        device_class.reference[0].hex()
        == device("x", "fedora", golden(FEDORA)).quote["sha256"][0].hex()
    )
    assert [c.event_index for c in device_class.components(0)] == [1, 2, 3, 16]
    with pytest.raises(PolicyError, match="carries no sha384"):
        DeviceClass.from_log("x", golden(FEDORA), bank="sha384")

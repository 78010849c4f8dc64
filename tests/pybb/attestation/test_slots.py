"""Allowlists bound to a place: a digest sanctioned in one slot is refused in another.

A slot is the PCR, the event type and (where meaningful) the component's label. An
entry written before slots (a bare PCR) keeps working and stands for the event types
that PCR's manifest holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from attest_support import FEDORA, attest, device, event, golden, with_digests

from blackboard import Rejected
from pybb.attestation import (
    ALLOWLIST,
    Allowlist,
    Attestation,
    DeviceClass,
    DeviceOutcome,
    Fleet,
    FleetError,
    PolicyError,
    Reason,
    Slot,
    load_class,
    parse_event_log,
)

UPDATE = b"firmware volume 1.2.4"
BLOB = "EV_EFI_PLATFORM_FIRMWARE_BLOB"
EV_POST_CODE = 0x01
EV_EFI_PLATFORM_FIRMWARE_BLOB = 0x80000008
EV_EFI_HANDOFF_TABLES = 0x80000009


def landed(device_class: DeviceClass, log: bytes) -> tuple[DeviceOutcome, Reason | None]:
    report, _ = attest([device_class], [device("d", device_class.name, log)])
    (result,) = report.devices
    return result.outcome, result.reason


def test_a_firmware_update_digest_in_the_crtm_version_slot_is_escalated() -> None:
    """Negative control of issue 16: it was "repaired, sanctioned update"."""
    update = hashlib.sha256(UPDATE).digest()
    crtm = event(FEDORA, 1)
    assert (crtm.pcr_index, crtm.type_name) == (0, "EV_S_CRTM_VERSION")
    forged = with_digests(golden(FEDORA), crtm, UPDATE)
    for allowed in ({Slot(0, BLOB): [update]}, {0: [update]}):  # bound, and an old entry
        fedora = DeviceClass.from_log("fedora", golden(FEDORA), allowed=allowed)
        report, _ = attest([fedora], [device("d", "fedora", forged)])
        (result,) = report.devices
        assert result.outcome is DeviceOutcome.ESCALATED, allowed
        assert result.report is not None
        assert Reason.SANCTIONED_UPDATE not in {f.reason for f in result.report.findings}
        # and the same digest where it was sanctioned is a repair
        updated = with_digests(golden(FEDORA), event(FEDORA, 2), UPDATE)
        assert landed(fedora, updated) == (DeviceOutcome.REPAIRED, Reason.SANCTIONED_UPDATE)


def test_a_digest_sanctioned_for_one_firmware_blob_is_refused_at_the_other() -> None:
    first, second = event(FEDORA, 2), event(FEDORA, 3)
    assert first.type_name == second.type_name == BLOB and first.label != second.label
    update = hashlib.sha256(UPDATE).digest()
    fedora = DeviceClass.from_log(
        "fedora", golden(FEDORA), allowed={Slot(0, BLOB, first.label): [update]}
    )
    assert landed(fedora, with_digests(golden(FEDORA), first, UPDATE)) == (
        DeviceOutcome.REPAIRED,
        Reason.SANCTIONED_UPDATE,
    )
    assert landed(fedora, with_digests(golden(FEDORA), second, UPDATE)) == (
        DeviceOutcome.ESCALATED,
        Reason.TAMPERED_COMPONENT,
    )


def pcr0_log(kit: ModuleType, *events: tuple[int, bytes]) -> bytes:
    """A log of PCR 0 events whose digests are of stand-in payloads, not of their data."""
    builder = kit.LogBuilder()
    built = []
    for event_type, payload in events:
        digests = [(alg, kit.digest_of(alg, payload)) for alg in builder.algorithms]
        built.append(builder.event(0, event_type, bytes(16), digests=digests))
    return bytes(builder.build(*built))


def test_the_event_type_binds_where_data_cannot_tell(kit: ModuleType) -> None:
    # a POST code and a firmware blob: neither digest is of its event data, so only the
    # slot stops a blob's sanctioned digest from passing as a POST code
    golden_log = pcr0_log(kit, (EV_POST_CODE, b"post"), (EV_EFI_PLATFORM_FIRMWARE_BLOB, b"fv"))
    update = hashlib.sha256(UPDATE).digest()
    as_post_code = pcr0_log(kit, (EV_POST_CODE, UPDATE), (EV_EFI_PLATFORM_FIRMWARE_BLOB, b"fv"))
    as_blob = pcr0_log(kit, (EV_POST_CODE, b"post"), (EV_EFI_PLATFORM_FIRMWARE_BLOB, UPDATE))
    bound = DeviceClass.from_log("synthetic", golden_log, allowed={Slot(0, BLOB): [update]})
    assert landed(bound, as_blob)[0] is DeviceOutcome.REPAIRED
    assert landed(bound, as_post_code) == (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT)
    # an entry written before slots: any type PCR 0's manifest holds, and no other
    legacy = DeviceClass.from_log("synthetic", golden_log, allowed={0: [update]})
    assert landed(legacy, as_post_code)[0] is DeviceOutcome.REPAIRED
    inserted = pcr0_log(
        kit,
        (EV_POST_CODE, b"post"),
        (EV_EFI_PLATFORM_FIRMWARE_BLOB, b"fv"),
        (EV_EFI_HANDOFF_TABLES, UPDATE),
    )
    assert landed(legacy, inserted) == (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT)


def test_an_old_class_file_keeps_working(tmp_path: Path) -> None:
    """A fleet folder's class file from before slots: ``allow`` keyed by bare PCRs."""
    update = hashlib.sha256(UPDATE).digest()
    data = DeviceClass.from_log("fedora", golden(FEDORA)).to_json()
    data["policy"]["allow"] = {"0": [update.hex()]}
    path = tmp_path / "fedora.json"
    path.write_text(json.dumps(data))
    old = load_class(path)
    assert dict(old.policy.allowed) == {Slot(0): frozenset({update})}
    assert old.policy.to_json()["allow"] == {"0": [update.hex()]}
    updated = with_digests(golden(FEDORA), event(FEDORA, 2), UPDATE)
    assert landed(old, updated) == (DeviceOutcome.REPAIRED, Reason.SANCTIONED_UPDATE)


def test_a_class_file_with_slots_round_trips(tmp_path: Path) -> None:
    blob = event(FEDORA, 2)
    allowed = {Slot(0, BLOB, blob.label): [b"\x01" * 32], Slot(4, "EV_EFI_ACTION"): [b"\x02" * 32]}
    device_class = DeviceClass.from_log("fedora", golden(FEDORA), allowed=allowed)
    text = json.dumps(device_class.to_json())
    assert f'"0:{BLOB}:{blob.label}"' in text and '"4:EV_EFI_ACTION"' in text
    path = tmp_path / "fedora.json"
    path.write_text(text)
    assert load_class(path) == device_class


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("x", "does not start with a PCR index"),
        ("32", "out of range"),
        ("0:firmware", "not a TCG event type name"),
        ("0:EV_POST_CODE:", None),  # an empty label is no label
    ],
)
def test_a_bad_slot_key_is_named(tmp_path: Path, key: str, fragment: str | None) -> None:
    data = DeviceClass.from_log("fedora", golden(FEDORA)).to_json()
    data["policy"]["allow"] = {key: ["01" * 32]}
    path = tmp_path / "fedora.json"
    path.write_text(json.dumps(data))
    if fragment is None:
        assert Slot(0, "EV_POST_CODE") in load_class(path).policy.allowed
        return
    with pytest.raises(PolicyError) as caught:
        load_class(path)
    assert fragment in str(caught.value) and f"policy.allow.{key}" in str(caught.value)


def test_slot_keys_and_the_pcr_view() -> None:
    label = "HD(1,GPT,x)/\\EFI\\boot:x64.efi"  # a label may hold colons
    slot = Slot(4, "EV_EFI_BOOT_SERVICES_APPLICATION", label)
    assert Slot.from_key(slot.key) == slot
    allowlist = Allowlist({slot: [b"a"], 4: [b"b"], "0:EV_POST_CODE": [b"c"]})
    assert allowlist[4] == {b"a", b"b"}  # every digest allowed somewhere in PCR 4
    assert allowlist.allowed_at(4, slot.event_type or "", label) == {b"a"}
    assert allowlist.allowed_at(4, "EV_EFI_ACTION", "x", {"EV_EFI_ACTION"}) == {b"b"}
    with pytest.raises(ValueError, match="must name its event type"):
        Slot(0, None, "label")


def test_an_accepted_digest_is_bound_to_its_slot_on_the_board() -> None:
    first, second = event(FEDORA, 2), event(FEDORA, 3)
    release = b"firmware volume 1.3.0"
    devices = [
        device("d0", "fedora", with_digests(golden(FEDORA), first, release)),
        device("d1", "fedora", with_digests(golden(FEDORA), second, release)),
    ]
    fleet = Fleet.of([DeviceClass.from_log("fedora", golden(FEDORA))], devices, name="slots")
    with Attestation(fleet, chunk_size=1) as attestation:

        def accept(done: int, total: int) -> None:
            if done == 1:
                report = attestation.result("d0").report
                assert report is not None
                (candidate,) = report.allowlist_candidates()
                assert (candidate["event_type"], candidate["label"]) == (BLOB, first.label)
                attestation.accept_digest(
                    "fedora",
                    candidate["pcr"],
                    candidate["digest"],
                    by="human:alice",
                    event_type=candidate["event_type"],
                    label=candidate["label"],
                )

        report = attestation.run(accept)
        board = attestation.allowlist()["fedora"]
        assert board[Slot(0, BLOB, first.label)] == {hashlib.sha256(release).digest()}
        with pytest.raises(FleetError, match="slot cannot be used"):
            attestation.accept_digest("fedora", 0, "00" * 32, by="human:x", label="no type")
        control = attestation.blackboard.model.control
        junk = {"fedora": {"0:not a type": ["00" * 32]}}
        version = attestation.blackboard.model.reader.read_premise(ALLOWLIST).version
        refused = control.set_premise("human:m", ALLOWLIST, junk, expected_version=version)
        assert isinstance(refused, Rejected)
    # the same digest at the other blob is still a tampered component
    assert [(r.outcome, r.reason) for r in report.devices] == [
        (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT),
        (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT),
    ]
    assert parse_event_log(golden(FEDORA)).events[2].label == first.label


def test_a_relabelled_or_retyped_event_stands_in_its_manifest_place() -> None:
    """The type, and unverified data, are not vouched for: a log cannot move a digest."""
    first, second = event(FEDORA, 2), event(FEDORA, 3)
    update = hashlib.sha256(UPDATE).digest()
    fedora = DeviceClass.from_log(
        "fedora", golden(FEDORA), allowed={Slot(0, BLOB, first.label): [update]}
    )
    # the second blob claims the first blob's address (its data is not hashed) ...
    log = with_digests(golden(FEDORA), second, UPDATE)
    at = second.offset + 12 + 2 + 32 + 4
    relabelled = log[:at] + first.data + log[at + len(first.data) :]
    assert parse_event_log(relabelled).events[3].label == first.label
    assert landed(fedora, relabelled) == (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT)
    # ... and the S-CRTM version event claims to be a firmware blob (no data check then)
    crtm = event(FEDORA, 1)
    bound = DeviceClass.from_log("fedora", golden(FEDORA), allowed={Slot(0, BLOB): [update]})
    log = with_digests(golden(FEDORA), crtm, UPDATE)
    retyped = log[: crtm.offset + 4] + (0x80000008).to_bytes(4, "little") + log[crtm.offset + 8 :]
    assert parse_event_log(retyped).events[1].type_name == BLOB
    assert landed(bound, retyped) == (DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT)


def _firmware_blob(log: bytes) -> tuple[int, bytes]:
    for ev in parse_event_log(log).events:
        if ev.type_name == BLOB and "sha256" in ev.digests:
            return ev.pcr_index, ev.digests["sha256"]
    raise AssertionError("the golden log measures no firmware blob")


def test_a_deny_entry_names_its_place_and_refuses_the_digest_in_that_pcr() -> None:
    log = golden(FEDORA)
    pcr, digest = _firmware_blob(log)
    fedora = DeviceClass.from_log("fedora", log)
    there = Slot(pcr, BLOB)
    denied = fedora.with_policy(
        dataclasses.replace(fedora.policy, denied_at=Allowlist({there: [digest]}))
    )
    outcome, reason = landed(denied, log)
    assert (outcome, reason) == (DeviceOutcome.ESCALATED, Reason.DENIED_COMPONENT)
    elsewhere = fedora.with_policy(
        dataclasses.replace(fedora.policy, denied_at=Allowlist({Slot(pcr + 1): [digest]}))
    )
    assert landed(elsewhere, log)[0] is DeviceOutcome.PASSED, "a deny entry binds its PCR"
    assert landed(fedora, log)[0] is DeviceOutcome.PASSED


def test_deny_at_round_trips_and_old_class_files_keep_their_bytes(tmp_path: Path) -> None:
    log = golden(FEDORA)
    pcr, digest = _firmware_blob(log)
    fedora = DeviceClass.from_log("fedora", log)
    assert "deny_at" not in fedora.policy.to_json()  # a class without one: the old form
    slot = Slot(pcr, BLOB)
    policy = dataclasses.replace(fedora.policy, denied_at=Allowlist({slot: [digest]}))
    data = policy.to_json()
    assert data["deny_at"] == {slot.key: [digest.hex()]}
    again = type(policy).from_json(json.loads(json.dumps(data)))
    assert again == policy and again.denies(pcr, digest) and not again.denies(pcr + 1, digest)
    data["deny_at"] = {"99:EV_IPL": [digest.hex()]}
    with pytest.raises(PolicyError, match="deny_at"):
        type(policy).from_json(data)

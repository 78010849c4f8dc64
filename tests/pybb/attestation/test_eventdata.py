"""Event data checked against its digests: forged data fails the device, real firmware passes.

A PCR vouches for the digests a log records, never for the data beside them. These
tests forge data under untouched digests (the quote still matches: the TPM extended
the honest digests) and require ``event_data_mismatch``; and they require every real
log, quirks and all, to verify clean.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from types import ModuleType

import pytest
from attest_support import attest, device, golden

from pybb.attestation import (
    Attestation,
    DataStatus,
    DeviceClass,
    DeviceOutcome,
    Reason,
    builtin_logs,
    check_event,
    generate_fleet,
    parse_event_log,
)
from pybb.attestation._eventlog import Event, LogFormat

GCE = "gce-ubuntu"
SHIM_GUID = bytes.fromhex("50ab5d6046e00043abb63dd810dd8b23")


def data_offset(log: bytes, event: Event) -> int:
    """Where ``event``'s data starts in ``log``."""
    if parse_event_log(log).format is LogFormat.SHA1:
        return event.offset + 32
    return event.offset + 12 + sum(2 + len(d) for d in event.digests.values()) + 4


def with_data(log: bytes, event: Event, data: bytes) -> bytes:
    """``log`` with ``event``'s data replaced by ``data`` of the same length, digests untouched."""
    assert len(data) == len(event.data)
    at = data_offset(log, event)
    return log[:at] + data + log[at + len(data) :]


def secure_boot_variable(log: bytes) -> Event:
    return next(e for e in parse_event_log(log).events if e.label.startswith("SecureBoot "))


# -- real firmware verifies clean ---------------------------------------------------------------


def test_every_real_log_verifies_clean(any_log: Path) -> None:
    log = parse_event_log(any_log.read_bytes())
    bad = [(e.index, e.type_name) for e in log.events if check_event(e).mismatch]
    assert bad == []


@pytest.mark.parametrize("name", sorted(builtin_logs()))
def test_every_bundled_log_verifies_clean_and_checks_most_of_its_events(name: str) -> None:
    log = parse_event_log(builtin_logs()[name])
    checks = [check_event(e) for e in log.events]
    assert not any(c.mismatch for c in checks)
    verified = sum(c.verified for c in checks)
    assert verified >= 15, verified  # separators, variables, actions, GPT at least


@pytest.mark.parametrize(
    ("name", "index", "rule"),
    [
        ("event-gce-ubuntu-2104-log.bin", 10, "variable value only"),  # OVMF BootOrder
        ("event-arch-linux.bin", 18, "data"),  # whole UEFI_VARIABLE_DATA
        ("event-postcode.bin", 40, "shim extra byte"),  # shim's Shim certificate
        ("event-arch-linux.bin", 24, "systemd-boot short eventSize"),  # PCR 8 command line
        ("event-sd-boot-fedora37.bin", 23, "data"),  # PCR 12 command line
        ("event-gce-ubuntu-2104-log.bin", 29, "GRUB command without its NUL"),
    ],
)
def test_known_firmware_quirks_are_accepted_and_named(
    eventlogs: Path, name: str, index: int, rule: str
) -> None:
    event = parse_event_log((eventlogs / name).read_bytes()).events[index]
    assert check_event(event).status is DataStatus.VERIFIED
    assert check_event(event).rule == rule


def test_digests_of_what_the_log_does_not_carry_are_not_checked(eventlogs: Path) -> None:
    log = parse_event_log((eventlogs / "event-moklisttrusted.bin").read_bytes())
    kinds = {
        (e.pcr_index, e.type_name)
        for e in log.events
        if check_event(e).status is DataStatus.NOT_APPLICABLE
    }
    assert (0, "EV_EFI_PLATFORM_FIRMWARE_BLOB") in kinds
    assert (4, "EV_EFI_BOOT_SERVICES_APPLICATION") in kinds
    assert (9, "EV_IPL") in kinds  # GRUB's files: the digest is of the file
    assert (14, "EV_IPL") in kinds  # shim's MokList: the digest is of the variable
    assert (0, "EV_NO_ACTION") in kinds


# -- forged data is caught ----------------------------------------------------------------------


def test_forged_secure_boot_on_under_its_digest_fails_the_device() -> None:
    """Negative control of issue 16: passed a class requiring Secure Boot before."""
    honest = golden(GCE)
    variable = secure_boot_variable(honest)
    assert variable.data[-1:] == b"\x00"  # this GCE VM booted with Secure Boot off
    forged = with_data(honest, variable, variable.data[:-1] + b"\x01")
    assert parse_event_log(forged).secure_boot is None  # forged data decides nothing
    strict = DeviceClass.from_log("strict", honest, secure_boot_required=True)
    report, _ = attest(
        [strict], [device("honest", "strict", honest), device("forged", "strict", forged)]
    )
    landed = {r.device: (r.outcome, r.reason) for r in report.devices}
    assert landed == {
        "honest": (DeviceOutcome.ESCALATED, Reason.SECURE_BOOT_OFF),
        "forged": (DeviceOutcome.ESCALATED, Reason.EVENT_DATA_MISMATCH),
    }
    finding = report.devices[1].report.findings[0]  # type: ignore[union-attr]
    assert (finding.pcr, finding.event, finding.event_type) == (
        7,
        variable.index,
        "EV_EFI_VARIABLE_DRIVER_CONFIG",
    )
    assert finding.expected == variable.digests["sha256"].hex()
    assert finding.found == hashlib.sha256(variable.data[:-1] + b"\x01").hexdigest()
    assert "event_data_mismatch" not in report.devices[0].report.to_json()["reason"]  # type: ignore[union-attr]


def boot_option_events(log: bytes) -> list[Event]:
    return [
        e
        for e in parse_event_log(log).events
        if e.type_name == "EV_EFI_VARIABLE_BOOT" and e.label.startswith("Boot0")
    ]


@pytest.mark.parametrize(
    "name", [n for n in sorted(builtin_logs()) if boot_option_events(builtin_logs()[n])]
)
def test_an_edited_boot_option_description_is_caught(name: str) -> None:
    honest = golden(name)
    option = boot_option_events(honest)[0]
    # the EFI_LOAD_OPTION's description starts after the variable's header and name and
    # the option's Attributes (4) and FilePathListLength (2): change its first letter
    name_length = struct.unpack_from("<Q", option.data, 16)[0]
    at = 32 + 2 * name_length + 6
    edited = bytearray(option.data)
    edited[at] = ord("X") if edited[at] != ord("X") else ord("Y")
    forged = with_data(honest, option, bytes(edited))
    assert parse_event_log(forged).events[option.index].description != option.description
    plain = DeviceClass.from_log(name, honest)
    report, _ = attest([plain], [device("clean", name, honest), device("edited", name, forged)])
    landed = {r.device: (r.outcome, r.reason) for r in report.devices}
    assert landed["clean"] == (DeviceOutcome.PASSED, None)
    assert landed["edited"] == (DeviceOutcome.ESCALATED, Reason.EVENT_DATA_MISMATCH)
    finding = report.devices[1].report.findings[0]  # type: ignore[union-attr]
    assert (finding.pcr, finding.event) == (1, option.index)


def test_a_changed_grub_command_is_caught() -> None:
    honest = golden(GCE)
    command = next(e for e in parse_event_log(honest).events if e.data.startswith(b"grub_cmd: "))
    edited = command.data[:10] + bytes([command.data[10] ^ 0x20]) + command.data[11:]
    check = check_event(parse_event_log(with_data(honest, command, edited)).events[command.index])
    assert check.mismatch and check.rule == "GRUB command without its NUL"


def test_a_secure_boot_variable_outside_pcr7_decides_nothing(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    on = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x01")
    off = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x00")
    log = builder.build(
        builder.event(8, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, on),
        builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, off),
    )
    assert parse_event_log(log).secure_boot is False


def test_a_secure_boot_variable_after_the_pcr7_separator_decides_nothing(
    kit: ModuleType,
) -> None:
    # a firmware that measured no SecureBoot, then software extending PCR 7 with one
    builder = kit.LogBuilder()
    on = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x01")
    log = builder.build(
        builder.event(7, 0x04, bytes(4)),
        builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, on),
    )
    assert parse_event_log(log).secure_boot is None
    assert parse_event_log(builder.build(builder.event(7, 0x80000001, on))).secure_boot is True


def test_the_first_pcr7_secure_boot_variable_decides_even_when_forged(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    on = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x01")
    off = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x00")
    forged = builder.event(
        7,
        kit.EV_EFI_VARIABLE_DRIVER_CONFIG,
        on,
        digests=[(alg, kit.digest_of(alg, off)) for alg in builder.algorithms],
    )
    later = builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, on)
    assert parse_event_log(builder.build(forged, later)).secure_boot is None


@pytest.mark.parametrize(
    ("event_type", "pcr", "data", "digest_of", "status"),
    [
        (0x04, 0, b"\xff\xff\xff\xff", b"\xff\xff\xff\xff", DataStatus.VERIFIED),  # error separator
        (0x04, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x01", DataStatus.MISMATCH),
        (0x80000007, 4, b"Calling EFI Application from Boot Option", b"x", DataStatus.MISMATCH),
        (0x08, 0, b"1.0\x00", b"1.0\x00", DataStatus.VERIFIED),  # EV_S_CRTM_VERSION
        (0x08, 0, b"1.0\x00", b"2.0\x00", DataStatus.MISMATCH),
        (0x0D, 9, b"/boot/vmlinuz", b"the kernel file", DataStatus.NOT_APPLICABLE),
        (0x80000008, 0, bytes(16), b"a firmware volume", DataStatus.NOT_APPLICABLE),
        (0x80000009, 1, bytes(8), b"ACPI tables", DataStatus.NOT_APPLICABLE),
        (0x03, 0, b"StartupLocality\x00\x03", b"anything", DataStatus.NOT_APPLICABLE),
    ],
)
def test_each_rule(
    kit: ModuleType, event_type: int, pcr: int, data: bytes, digest_of: bytes, status: DataStatus
) -> None:
    builder = kit.LogBuilder()
    digests = [(alg, kit.digest_of(alg, digest_of)) for alg in builder.algorithms]
    log = builder.build(builder.event(pcr, event_type, data, digests=digests))
    assert check_event(parse_event_log(log).events[1]).status is status


def test_the_shim_quirk_is_only_accepted_for_shims_bare_certificate(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    certificate = b"\x30\x82\x00\x04abcd"
    for guid, status in (
        (SHIM_GUID, DataStatus.VERIFIED),
        (kit.EFI_GLOBAL_GUID, DataStatus.MISMATCH),
    ):
        data = kit.variable_data(guid, "Shim", certificate) + b"\x00"
        digests = [(alg, kit.digest_of(alg, data[:-1])) for alg in builder.algorithms]
        log = builder.build(builder.event(7, 0x800000E0, data, digests=digests))
        assert check_event(parse_event_log(log).events[1]).status is status


def test_the_check_of_a_legacy_sha1_log(eventlogs: Path) -> None:
    log = parse_event_log((eventlogs / "event-uefi-sha1-log.bin").read_bytes())
    separator = next(e for e in log.events if e.type_name == "EV_SEPARATOR")
    assert check_event(separator).verified
    forged = bytearray((eventlogs / "event-uefi-sha1-log.bin").read_bytes())
    struct.pack_into("<I", forged, separator.offset + 32, 1)
    assert check_event(parse_event_log(bytes(forged)).events[separator.index]).mismatch


# -- the generator's ground truth ---------------------------------------------------------------


def test_the_demo_forges_secure_boot_and_lands_it_as_event_data_mismatch() -> None:
    fleet = generate_fleet(12, seed=4, mix={"forged_secure_boot": 1.0})
    with Attestation(fleet) as attestation:
        report = attestation.run()
    assert report.accuracy == 1.0
    assert {(r.outcome, r.reason) for r in report.devices} == {
        (DeviceOutcome.ESCALATED, Reason.EVENT_DATA_MISMATCH)
    }

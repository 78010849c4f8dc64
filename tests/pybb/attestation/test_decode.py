from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest

import pybb.attestation as att

SHIM_BOOT = (
    r"PciRoot(0x0)/Pci(0x6,0x0)/HD(15,GPT,C359E798-596A-42B6-B6F6-ECA290429D99,0x2800,0x35000)"
    r"/\EFI\BOOT\BOOTX64.EFI"
)
SYSTEMD_BOOT = (
    r"PciRoot(0x0)/Pci(0x17,0x0)/Sata(0x1,0xffff,0x0)"
    r"/HD(1,GPT,1A504613-19B5-4B44-A83D-D926D40DAA1C,0x800,0x80000)"
    r"/\EFI\SYSTEMD\SYSTEMD-BOOTX64.EFI"
)


def _log(eventlogs: Path, name: str) -> att.EventLog:
    return att.read_event_log(eventlogs / name)


# --- the structure of the real logs ------------------------------------------------------


def test_formats_banks_and_spec_ids(eventlogs: Path) -> None:
    legacy = _log(eventlogs, "event-uefi-sha1-log.bin")
    assert legacy.format is att.LogFormat.SHA1
    assert (legacy.banks, legacy.spec_id, len(legacy.events)) == (("sha1",), None, 17)

    gce = _log(eventlogs, "event-gce-ubuntu-2104-log.bin")
    assert gce.format is att.LogFormat.CRYPTO_AGILE
    assert gce.banks == ("sha1", "sha256", "sha384")
    assert gce.spec_id is not None and gce.spec_id.spec_version == (2, 0, 0)
    assert gce.spec_id.uintn_size == 2

    four = _log(eventlogs, "event.bin")
    assert [(a.algorithm_id, a.digest_size) for a in four.algorithms] == [
        (0x0004, 20),
        (0x000B, 32),
        (0x000C, 48),
        (0x000D, 64),
    ]


def test_spec_id_vendor_info_that_overruns_event_size_is_read(eventlogs: Path) -> None:
    # specid-vendordata.bin declares eventSize 37 but 4 vendor bytes follow: like
    # tpm2_eventlog, the Spec ID event ends after vendorInfo.
    log = _log(eventlogs, "specid-vendordata.bin")
    assert log.spec_id is not None and log.spec_id.vendor_info == bytes.fromhex("deadbeef")
    assert len(log.events) == 1 and log.events[0].data.endswith(bytes.fromhex("deadbeef"))
    assert att.replay(log) == {}


def test_events_carry_index_offset_pcr_type_and_digests(eventlogs: Path) -> None:
    log = _log(eventlogs, "event-bootorder.bin")
    spec, crtm = log.events[0], log.events[1]
    assert (spec.index, spec.offset, spec.type_name, dict(spec.digests)) == (
        0,
        0,
        "EV_NO_ACTION",
        {},
    )
    assert (crtm.index, crtm.offset, crtm.pcr_index, crtm.type_name) == (
        1,
        69,
        0,
        "EV_S_CRTM_VERSION",
    )
    assert crtm.digests["sha1"].hex() == "1489f923c4dca729178b3e3233458550d8dddf29"
    assert crtm.description == '""'


# --- secure boot ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "index", "state", "text"),
    [
        ("event-bootorder.bin", 4, False, "SecureBoot = 0 (disabled)"),
        ("event-moklisttrusted.bin", 4, True, "SecureBoot = 1 (enabled)"),
        ("event-postcode.bin", 3, True, "SecureBoot = 1 (enabled)"),
        ("event-uefivar.bin", 1, True, "SecureBoot = 1 (enabled)"),
        ("event-arch-linux.bin", 3, False, "SecureBoot is empty (Secure Boot not enabled)"),
        ("event-uefi-sha1-log.bin", 1, False, "SecureBoot is empty (Secure Boot not enabled)"),
    ],
)
def test_secure_boot_comes_from_the_securebootvariable(
    eventlogs: Path, name: str, index: int, state: bool, text: str
) -> None:
    log = _log(eventlogs, name)
    event = log.events[index]
    assert (event.pcr_index, event.type_name) == (7, "EV_EFI_VARIABLE_DRIVER_CONFIG")
    assert event.description == f"{text} [EFI global variable]"
    assert event.label == "SecureBoot (8be4df61-93ca-11d2-aa0d-00e098032b8c)"
    assert log.secure_boot is state


@pytest.mark.parametrize("name", ["event.bin", "event-uefiaction.bin", "specid-vendordata.bin"])
def test_secure_boot_is_unknown_without_the_variable(eventlogs: Path, name: str) -> None:
    assert _log(eventlogs, name).secure_boot is None


# --- EFI descriptions of known events --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "index", "type_name", "description"),
    [
        ("event-bootorder.bin", 2, "EV_EFI_PLATFORM_FIRMWARE_BLOB",
         "firmware blob at 0x820000, length 0xe0000"),
        ("event-bootorder.bin", 5, "EV_EFI_VARIABLE_DRIVER_CONFIG",
         "PK is empty [EFI global variable]"),
        ("event-bootorder.bin", 9, "EV_SEPARATOR", "separator"),
        ("event-bootorder.bin", 12, "EV_EFI_VARIABLE_BOOT",
         "BootOrder: Boot0001, Boot0000, Boot0002 [EFI global variable]"),
        ("event-bootorder.bin", 13, "EV_EFI_VARIABLE_BOOT",
         'Boot0001: "UEFI Misc Device" PciRoot(0x0)/Pci(0x6,0x0) [EFI global variable]'),
        ("event-bootorder.bin", 14, "EV_EFI_VARIABLE_BOOT",
         'Boot0000: "UiApp" FvFile(7CB8BDC9-F8EB-4F34-AAEA-3EE4AF6516A1)'
         "/Fv(462CAA21-7614-4503-836E-8AB6F4662331) [EFI global variable]"),
        ("event-bootorder.bin", 16, "EV_EFI_ACTION",
         '"Calling EFI Application from Boot Option"'),
        ("event-bootorder.bin", 24, "EV_EFI_GPT_EVENT",
         'GPT disk 07081ba2-7cc9-4663-8ecf-4692ccb7e3ec, 3 partition(s): "", "", ""'),
        ("event-bootorder.bin", 25, "EV_EFI_BOOT_SERVICES_APPLICATION",
         f"{SHIM_BOOT} (image at 0xbec2b018, 1334816 bytes)"),
        ("event-bootorder.bin", 26, "EV_EFI_BOOT_SERVICES_APPLICATION",
         "(no device path) (image at 0x0, 0 bytes), 9 unexpected trailing bytes"),
        ("event-bootorder.bin", 92, "EV_IPL",
         '"grub_cmd: linux /boot/vmlinuz-5.4.0-45-generic root=PARTUUID=78a91070-7746-4396-'
         '82b8-ffc7ba90d889 ro biosdevname=0 net.ifnames=0 console=tty1 console=ttyS0"'),
        ("event-bootorder.bin", 102, "EV_EFI_ACTION", '"Exit Boot Services Invocation"'),
        ("event-arch-linux.bin", 2, "EV_POST_CODE", "firmware blob at 0xffa90000, length 0x350000"),
        ("event-arch-linux.bin", 6, "EV_EFI_VARIABLE_DRIVER_CONFIG",
         "db: 12 signature(s) in 12 list(s), 4655 bytes [EFI image security database]"),
        ("event-arch-linux.bin", 9, "EV_EFI_BOOT_SERVICES_DRIVER",
         "PciRoot(0x0)/Pci(0x1,0x0)/Pci(0x0,0x0)/Offset(0xf250,0x201ff)"
         " (image at 0xb6bf9018, 133728 bytes)"),
        ("event-arch-linux.bin", 22, "EV_EFI_BOOT_SERVICES_APPLICATION",
         f"{SYSTEMD_BOOT} (image at 0xb616b018, 96725 bytes)"),
        ("event-gce-ubuntu-2104-log.bin", 1, "EV_S_CRTM_VERSION", '"GCE Virtual Firmware v1"'),
        ("event-gce-ubuntu-2104-log.bin", 2, "EV_NONHOST_INFO", '"GCE NonHostInfo"'),
        ("event-gce-ubuntu-2104-log.bin", 13, "EV_EFI_VARIABLE_BOOT",
         'Boot0002: "VirtScsi(0,3,0) Disk" BBS(0x2,VirtScsi(0,3,0) Disk,0x0) '
         "[EFI global variable]"),
        ("event-gce-ubuntu-2104-log.bin", 24, "EV_IPL", '"MokList"'),
        ("event-gce-ubuntu-2104-log.bin", 26, "EV_EFI_VARIABLE_AUTHORITY",
         'SbatLevel = "sbat,1,2021030218\\n" [shim]'),
        ("event-gce-ubuntu-2104-log.bin", 27, "EV_EFI_BOOT_SERVICES_APPLICATION",
         r"\EFI\ubuntu\grubx64.efi (image at 0xbd23a018, 1718144 bytes)"),
        ("event-moklisttrusted.bin", 23, "EV_EFI_VARIABLE_AUTHORITY",
         'db entry: certificate CN="Microsoft Corporation UEFI CA 2011" (1556 bytes), owner '
         "77fa9abd-0359-4d32-bd60-28f4e78f784b [EFI image security database]"),
        ("event-moklisttrusted.bin", 29, "EV_EFI_VARIABLE_AUTHORITY", "MokListTrusted = 1 [shim]"),
        ("event-moklisttrusted.bin", 31, "EV_EFI_VARIABLE_AUTHORITY",
         'Shim: certificate CN="Red Hat Secure Boot CA 5" (920 bytes) [shim]'),
        ("event-postcode.bin", 21, "EV_EFI_VARIABLE_BOOT",
         'Boot0003: "UEFI: PXE IP4 Intel(R) I350 Gigabit Network Connection - 0CC47AFF601C" '
         "PciRoot(0x3)/Pci(0x0,0x0)/Pci(0x0,0x0)/MAC(0cc47aff601c,0x1)"
         "/IPv4(0.0.0.0,0x0,DHCP,0.0.0.0) [EFI global variable]"),
        ("event-sd-boot-fedora37.bin", 23, "EV_IPL", '" console=ttyS0 console=tty0 efi=debug "'),
        ("event-sd-boot-fedora37.bin", 25, "EV_EVENT_TAG", 'tag 0x8f3b22ec: "Linux initrd"'),
        ("event-uefi-sha1-log.bin", 14, "EV_EFI_GPT_EVENT",
         "GPT disk 87a9f0c7-ed2a-47fe-862e-f307c4175841, 2 partition(s): "
         '"EFI System Partition", ""'),
        ("event.bin", 0, "EV_NO_ACTION",
         "Spec ID Event03, banks: sha1 (20 bytes), sha256 (32 bytes), sha384 (48 bytes), "
         "sha512 (64 bytes)"),
    ],
)  # fmt: skip
def test_known_events_decode_to_these_descriptions(
    eventlogs: Path, name: str, index: int, type_name: str, description: str
) -> None:
    event = _log(eventlogs, name).events[index]
    assert (event.index, event.type_name, event.description) == (index, type_name, description)


def test_odd_length_utf16_command_line_still_reads_as_text(eventlogs: Path) -> None:
    # systemd-boot measured the kernel command line as UTF-16 with one byte too many.
    event = _log(eventlogs, "event-arch-linux.bin").events[24]
    assert len(event.data) % 2 == 1
    assert event.description.startswith(r'"initrd=\intel-ucode.img initrd=\initramfs-linux-lts.img')
    assert event.description.endswith('iommu=pt l1tf=off"')


def test_no_description_of_a_real_log_falls_back(any_log: Path) -> None:
    for event in att.read_event_log(any_log).events:
        assert "undecodable" not in event.description, (event.index, event.description)


# --- boot components ---------------------------------------------------------------------


def test_boot_components_give_a_stable_identity_and_digests(eventlogs: Path) -> None:
    log = _log(eventlogs, "event-bootorder.bin")
    components = log.boot_components()
    assert len(components) == sum(1 for e in log.events if e.measured) == len(log.events) - 1
    by_event = {c.event_index: c for c in components}
    loader = by_event[25]
    assert loader.identity == (4, "EV_EFI_BOOT_SERVICES_APPLICATION", SHIM_BOOT)
    assert loader.digests == log.events[25].digests
    assert loader.digests["sha256"].hex() == (
        "007f4c95125713b112093e21663e2d23e3c1ae9ce4b5de0d58a297332336a2d8"
    )
    assert "0xbec2b018" not in loader.label  # load addresses change from boot to boot
    assert by_event[4].identity == (
        7,
        "EV_EFI_VARIABLE_DRIVER_CONFIG",
        "SecureBoot (8be4df61-93ca-11d2-aa0d-00e098032b8c)",
    )
    assert all(c.type_name != "EV_NO_ACTION" for c in components)


def test_the_same_component_in_two_logs_has_the_same_identity(eventlogs: Path) -> None:
    first = _log(eventlogs, "event-bootorder.bin").boot_components()
    second = _log(eventlogs, "event-gce-ubuntu-2104-log.bin").boot_components()
    shared = {c.identity for c in first} & {c.identity for c in second}
    assert (4, "EV_EFI_ACTION", '"Calling EFI Application from Boot Option"') in shared
    assert (5, "EV_EFI_ACTION", '"Exit Boot Services Invocation"') in shared


# --- event type names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (0x00000000, "EV_PREBOOT_CERT"),
        (0x00000003, "EV_NO_ACTION"),
        (0x0000000C, "EV_COMPACT_HASH"),
        (0x00000012, "EV_OMIT_BOOT_DEVICE_EVENTS"),
        (0x80000001, "EV_EFI_VARIABLE_DRIVER_CONFIG"),
        (0x80000009, "EV_EFI_HANDOFF_TABLES"),
        (0x80000010, "EV_EFI_HCRTM_EVENT"),
        (0x800000E0, "EV_EFI_VARIABLE_AUTHORITY"),
        (0x800000E4, "EV_EFI_SPDM_DEVICE_AUTHORITY"),
        (0x00000042, "EV_UNKNOWN_0x00000042"),
    ],
)
def test_event_type_names(value: int, name: str) -> None:
    assert att.event_type_name(value) == name


# --- device paths ----------------------------------------------------------------------------


def _node(node_type: int, subtype: int, body: bytes) -> bytes:
    return struct.pack("<BBH", node_type, subtype, 4 + len(body)) + body


END = _node(0x7F, 0xFF, b"")


@pytest.mark.parametrize(
    ("nodes", "text"),
    [
        ([], ""),
        ([_node(2, 1, struct.pack("<II", 0x050141D0, 0))], "Acpi(PNP0501,0x0)"),
        ([_node(2, 1, struct.pack("<II", 0x0A0841D0, 1))], "PcieRoot(0x1)"),
        ([_node(3, 0x17, struct.pack("<I", 1) + bytes(range(8)))],
         "NVMe(0x1,07-06-05-04-03-02-01-00)"),
        ([_node(3, 5, bytes([2, 0]))], "USB(0x2,0x0)"),
        ([_node(4, 1, struct.pack("<IQQ", 1, 63, 1000) + bytes.fromhex("78563412") + bytes(12)
                + bytes([1, 1]))], "HD(1,MBR,0x12345678,0x3f,0x3e8)"),
        ([_node(4, 4, "\\EFI\\BOOT\\BOOTX64.EFI\x00".encode("utf-16-le"))],
         r"\EFI\BOOT\BOOTX64.EFI"),
        ([_node(3, 0x99, b"\xab\xcd")], "Path(0x03,0x99,abcd)"),
        ([_node(1, 1, b"\x00")], "Path(0x01,0x01,00)"),
        ([_node(1, 1, b"\x01\x02"), _node(0x7F, 0x01, b""), _node(1, 1, b"\x00\x03")],
         "Pci(0x2,0x1),Pci(0x3,0x0)"),
        ([_node(1, 1, b"\x00\x01"), b"\x04\x04\x02\x00"],
         "Pci(0x1,0x0)/Malformed(040402007fff0400)"),
        ([_node(1, 1, b"\x00\x01"), b"\x04\x04"], "Pci(0x1,0x0)/Malformed(04047fff0400)"),
        ([b"\x04\x04\xff\x00abc"], "Malformed(0404ff006162637fff0400)"),
    ],
)  # fmt: skip
def test_device_path_text(nodes: list[bytes], text: str) -> None:
    # A node whose length does not fit swallows the rest, END node included.
    assert att.device_path_to_text(b"".join(nodes) + END) == text


def test_device_path_stops_at_the_end_node_and_reads_a_short_tail() -> None:
    pci = _node(1, 1, b"\x00\x01")
    assert att.device_path_to_text(pci + END + pci) == "Pci(0x1,0x0)"
    assert att.device_path_to_text(pci + b"\x7f") == "Pci(0x1,0x0)/Malformed(7f)"


# --- malformed EFI data inside a valid event ------------------------------------------------


def test_a_malformed_variable_falls_back_without_failing_the_log(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    broken = kit.EFI_GLOBAL_GUID + struct.pack("<QQ", 2**62, 1) + "SecureBoot".encode("utf-16-le")
    good = kit.variable_data(kit.EFI_GLOBAL_GUID, "SecureBoot", b"\x01")
    log = att.parse_event_log(
        builder.build(builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, broken))
    )
    event = log.events[1]
    assert event.description.startswith("undecodable EV_EFI_VARIABLE_DRIVER_CONFIG data (")
    assert "UnicodeNameLength 4611686018427387904 runs past the event data" in event.description
    assert event.label.startswith(broken[:32].hex())
    assert log.secure_boot is None
    assert set(att.replay(log)) == {"sha1", "sha256"}
    # and the well-formed variable after it still decides Secure Boot
    both = builder.build(
        builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, broken),
        builder.event(7, kit.EV_EFI_VARIABLE_DRIVER_CONFIG, good),
    )
    assert att.parse_event_log(both).secure_boot is True


@pytest.mark.parametrize(
    ("event_type", "data", "fragment"),
    [
        (0x80000003, struct.pack("<QQQQ", 0, 0, 0, 2**40), "DevicePath needs 1099511627776 bytes"),
        (0x80000003, b"\x00" * 7, "ImageLocationInMemory needs 8 bytes"),
        (0x80000006, b"NOT PART" + bytes(84) + bytes(8), "GPT header signature"),
        (0x80000006, b"EFI PART" + bytes(76) + struct.pack("<I", 128) + bytes(4)
         + struct.pack("<Q", 2**63), "partition entries"),
        (0x80000008, b"\x01\x02", "a firmware blob is 16 bytes"),
        (0x80000009, struct.pack("<Q", 2**60), "NumberOfTables"),
        (0x00000006, struct.pack("<II", 1, 99), "taggedEventData needs 99 bytes"),
        (0x80000002, bytes(16) + struct.pack("<QQ", 8, 3) + "Boot0001".encode("utf-16-le")
         + b"\x01\x00\x00", "Boot0001: 010000 (3 bytes)"),
    ],
)  # fmt: skip
def test_malformed_efi_structures_get_a_fallback(
    kit: ModuleType, event_type: int, data: bytes, fragment: str
) -> None:
    builder = kit.LogBuilder()
    log = att.parse_event_log(builder.build(builder.event(4, event_type, data)))
    event = log.events[1]
    assert fragment in event.description
    assert isinstance(event.label, str)
    assert att.replay(log)["sha256"][4]


def test_handoff_tables_and_blob2_decode(kit: ModuleType) -> None:
    smbios3 = bytes.fromhex("4415fdf29497 2c4a992ee5bbcf20e394".replace(" ", ""))
    tables = struct.pack("<Q", 1) + smbios3 + struct.pack("<Q", 0x7F000000)
    blob2 = b"\x0bFirmwareFv" + b"\x00" + struct.pack("<QQ", 0x820000, 0x1000)
    builder = kit.LogBuilder()
    log = att.parse_event_log(
        builder.build(builder.event(1, 0x80000009, tables), builder.event(0, 0x8000000A, blob2))
    )
    assert log.events[1].description == "1 configuration table(s): SMBIOS3 at 0x7f000000"
    assert log.events[1].label == "1 configuration table(s): SMBIOS3"
    assert log.events[2].description == 'firmware blob "FirmwareFv" at 0x820000, length 0x1000'

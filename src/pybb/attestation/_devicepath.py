r"""UEFI device paths to text, in the notation of the UEFI specification §10.6.

``PciRoot(0x0)/Pci(0x1,0x1)/HD(1,GPT,<GUID>,0x800,0x100000)/\EFI\BOOT\BOOTX64.EFI``.
Nodes this module does not know are shown as ``Path(0xTT,0xSS,<hex>)`` (type, subtype,
body), and a node that does not fit its bytes ends the text with ``Malformed(<hex>)``:
turning a device path into text never raises.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pybb.attestation._efi import Reader, StructureError, guid_text

__all__ = ["device_path_to_text"]

_NODE_HEADER = struct.Struct("<BBH")
_END_TYPE = 0x7F
_END_ENTIRE = 0xFF
_END_INSTANCE = 0x01

_NodeDecoder = Callable[[Reader], str]


def device_path_to_text(data: bytes) -> str:
    """Return the text form of a binary UEFI device path.

    Args:
        data: A packed ``EFI_DEVICE_PATH_PROTOCOL`` node sequence, as found in
            ``UEFI_IMAGE_LOAD_EVENT`` or ``EFI_LOAD_OPTION``.

    Returns:
        The nodes joined with ``/`` (instances joined with ``,``); an empty path
        gives ``""``. Unknown nodes appear as ``Path(type,subtype,hex)`` and bytes
        that do not form a node as ``Malformed(hex)``.
    """
    parts: list[str] = []
    pos = 0
    size = len(data)
    while pos < size:
        if size - pos < 4:
            parts.append(f"/Malformed({data[pos:].hex()})")
            break
        node_type, subtype, length = _NODE_HEADER.unpack_from(data, pos)
        if length < 4 or pos + length > size:
            parts.append(f"/Malformed({data[pos:].hex()})")
            break
        body = data[pos + 4 : pos + length]
        pos += length
        if node_type == _END_TYPE and subtype == _END_ENTIRE:
            break
        if node_type == _END_TYPE and subtype == _END_INSTANCE:
            parts.append(",")
            continue
        parts.append("/" + _node_text(node_type, subtype, body))
    return _join(parts)


def _join(parts: list[str]) -> str:
    text = "".join(parts)
    text = text.replace(",/", ",")
    return text[1:] if text.startswith("/") else text


def _node_text(node_type: int, subtype: int, body: bytes) -> str:
    decoder = _DECODERS.get((node_type, subtype))
    if decoder is not None:
        reader = Reader(body)
        try:
            return decoder(reader)
        except StructureError:
            pass
    return f"Path(0x{node_type:02x},0x{subtype:02x},{body.hex()})"


def _guid(reader: Reader) -> str:
    return guid_text(reader.take(16, "GUID")).upper()


def _vendor(prefix: str) -> _NodeDecoder:
    def decode(reader: Reader) -> str:
        guid = _guid(reader)
        extra = reader.rest()
        return f"{prefix}({guid},{extra.hex()})" if extra else f"{prefix}({guid})"

    return decode


def _pci(reader: Reader) -> str:
    function = reader.u8("Function")
    device = reader.u8("Device")
    return f"Pci(0x{device:x},0x{function:x})"


def _memory_mapped(reader: Reader) -> str:
    kind = reader.u32("MemoryType")
    start = reader.u64("StartingAddress")
    end = reader.u64("EndingAddress")
    return f"MemoryMapped(0x{kind:x},0x{start:x},0x{end:x})"


def _eisa_id(value: int) -> str:
    vendor = value & 0xFFFF
    letters = "".join(chr(((vendor >> shift) & 0x1F) + 0x40) for shift in (10, 5, 0))
    return f"{letters}{value >> 16:04X}"


_PCI_ROOT_HID = 0x0A0341D0
_PCIE_ROOT_HID = 0x0A0841D0


def _acpi(reader: Reader) -> str:
    hid = reader.u32("HID")
    uid = reader.u32("UID")
    if hid == _PCI_ROOT_HID:
        return f"PciRoot(0x{uid:x})"
    if hid == _PCIE_ROOT_HID:
        return f"PcieRoot(0x{uid:x})"
    return f"Acpi({_eisa_id(hid)},0x{uid:x})"


def _acpi_expanded(reader: Reader) -> str:
    hid = reader.u32("HID")
    uid = reader.u32("UID")
    cid = reader.u32("CID")
    strings = [s.decode("ascii", errors="replace") for s in reader.rest().split(b"\x00")[:3]]
    hid_str, uid_str, cid_str = [*strings, "", "", ""][:3]
    return f"AcpiEx({hid_str or _eisa_id(hid)},{cid_str or _eisa_id(cid)},0x{uid:x},{uid_str})"


def _acpi_adr(reader: Reader) -> str:
    return f"AcpiAdr(0x{reader.u32('ADR'):x})"


def _ata(reader: Reader) -> str:
    channel = "Secondary" if reader.u8("PrimarySecondary") else "Primary"
    drive = "Slave" if reader.u8("SlaveMaster") else "Master"
    return f"Ata({channel},{drive},0x{reader.u16('Lun'):x})"


def _scsi(reader: Reader) -> str:
    return f"Scsi(0x{reader.u16('Pun'):x},0x{reader.u16('Lun'):x})"


def _fibre(reader: Reader) -> str:
    reader.u32("Reserved")
    return f"Fibre(0x{reader.u64('WWN'):x},0x{reader.u64('Lun'):x})"


def _usb(reader: Reader) -> str:
    return f"USB(0x{reader.u8('ParentPortNumber'):x},0x{reader.u8('InterfaceNumber'):x})"


def _usb_class(reader: Reader) -> str:
    fields = (reader.u16("VendorId"), reader.u16("ProductId"))
    classes = (reader.u8("Class"), reader.u8("SubClass"), reader.u8("Protocol"))
    return "UsbClass(" + ",".join(f"0x{value:x}" for value in fields + classes) + ")"


def _mac(reader: Reader) -> str:
    address = reader.take(32, "MacAddress")
    if_type = reader.u8("IfType")
    width = 6 if if_type in (0, 1) else 32
    return f"MAC({address[:width].hex()},0x{if_type:x})"


def _ipv4(reader: Reader) -> str:
    local = ".".join(str(b) for b in reader.take(4, "LocalIpAddress"))
    remote = ".".join(str(b) for b in reader.take(4, "RemoteIpAddress"))
    reader.take(4, "ports")
    number = reader.u16("Protocol")
    protocol = {6: "TCP", 17: "UDP"}.get(number, f"0x{number:x}")
    origin = "Static" if reader.u8("StaticIpAddress") else "DHCP"
    return f"IPv4({remote},{protocol},{origin},{local})"


def _ipv6(reader: Reader) -> str:
    local = reader.take(16, "LocalIpAddress").hex()
    remote = reader.take(16, "RemoteIpAddress").hex()
    return f"IPv6({remote},{local})"


def _sata(reader: Reader) -> str:
    hba = reader.u16("HBAPortNumber")
    multiplier = reader.u16("PortMultiplierPortNumber")
    return f"Sata(0x{hba:x},0x{multiplier:x},0x{reader.u16('Lun'):x})"


def _nvme(reader: Reader) -> str:
    namespace = reader.u32("NamespaceId")
    eui = reader.take(8, "EUI-64")
    return f"NVMe(0x{namespace:x},{'-'.join(f'{b:02X}' for b in reversed(eui))})"


def _uri(reader: Reader) -> str:
    return f"Uri({reader.rest().decode('ascii', errors='replace')})"


def _hard_drive(reader: Reader) -> str:
    number = reader.u32("PartitionNumber")
    start = reader.u64("PartitionStart")
    size = reader.u64("PartitionSize")
    signature = reader.take(16, "PartitionSignature")
    reader.u8("MBRType")
    signature_type = reader.u8("SignatureType")
    if signature_type == 2:
        kind, ident = "GPT", guid_text(signature).upper()
    elif signature_type == 1:
        kind, ident = "MBR", f"0x{int.from_bytes(signature[:4], 'little'):08X}"
    else:
        kind, ident = str(signature_type), "0"
    return f"HD({number},{kind},{ident},0x{start:x},0x{size:x})"


def _cdrom(reader: Reader) -> str:
    entry = reader.u32("BootEntry")
    return f"CDROM(0x{entry:x},0x{reader.u64('PartitionStart'):x},0x{reader.u64('Size'):x})"


def _file_path(reader: Reader) -> str:
    raw = reader.rest()
    if len(raw) % 2:
        raise StructureError("file path has an odd length")
    return raw.decode("utf-16-le", errors="replace").split("\x00", 1)[0]


def _offset(reader: Reader) -> str:
    reader.u32("Reserved")
    return f"Offset(0x{reader.u64('StartingOffset'):x},0x{reader.u64('EndingOffset'):x})"


def _bbs(reader: Reader) -> str:
    device_type = reader.u16("DeviceType")
    flags = reader.u16("StatusFlag")
    name = reader.rest().split(b"\x00", 1)[0].decode("ascii", errors="replace")
    return f"BBS(0x{device_type:x},{name},0x{flags:x})"


def _simple(name: str, reader_method: str) -> _NodeDecoder:
    def decode(reader: Reader) -> str:
        value: int = getattr(reader, reader_method)(name)
        return f"{name}(0x{value:x})"

    return decode


def _guid_node(name: str) -> _NodeDecoder:
    def decode(reader: Reader) -> str:
        return f"{name}({_guid(reader)})"

    return decode


_DECODERS: dict[tuple[int, int], _NodeDecoder] = {
    (0x01, 0x01): _pci,
    (0x01, 0x02): _simple("PcCard", "u8"),
    (0x01, 0x03): _memory_mapped,
    (0x01, 0x04): _vendor("VenHw"),
    (0x01, 0x05): _simple("Ctrl", "u32"),
    (0x02, 0x01): _acpi,
    (0x02, 0x02): _acpi_expanded,
    (0x02, 0x03): _acpi_adr,
    (0x03, 0x01): _ata,
    (0x03, 0x02): _scsi,
    (0x03, 0x03): _fibre,
    (0x03, 0x05): _usb,
    (0x03, 0x0A): _vendor("VenMsg"),
    (0x03, 0x0B): _mac,
    (0x03, 0x0C): _ipv4,
    (0x03, 0x0D): _ipv6,
    (0x03, 0x0F): _usb_class,
    (0x03, 0x12): _sata,
    (0x03, 0x17): _nvme,
    (0x03, 0x18): _uri,
    (0x03, 0x1A): _simple("SD", "u8"),
    (0x03, 0x1D): _simple("eMMC", "u8"),
    (0x04, 0x01): _hard_drive,
    (0x04, 0x02): _cdrom,
    (0x04, 0x03): _vendor("VenMedia"),
    (0x04, 0x04): _file_path,
    (0x04, 0x05): _guid_node("Media"),
    (0x04, 0x06): _guid_node("Fv"),
    (0x04, 0x07): _guid_node("FvFile"),
    (0x04, 0x08): _offset,
    (0x05, 0x01): _bbs,
}

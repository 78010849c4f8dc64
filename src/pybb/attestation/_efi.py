"""Decoding of the UEFI structures that firmware puts inside event data.

Every decoder reads through a bounds-checked :class:`Reader` and raises
:class:`StructureError` (private to this package) on anything that does not fit;
the describing layer turns that into a fallback description, so a malformed EFI
structure never fails the parse of an otherwise valid log.

Layouts follow the TCG PC Client PFP 1.06 §10.2 (``UEFI_VARIABLE_DATA``,
``UEFI_IMAGE_LOAD_EVENT``, ``UEFI_GPT_DATA``, ``UEFI_PLATFORM_FIRMWARE_BLOB(2)``,
``UEFI_HANDOFF_TABLE_POINTERS(2)``) and the UEFI 2.10 specification
(``EFI_LOAD_OPTION`` §3.1.3, ``EFI_SIGNATURE_LIST`` §32.4.1).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

__all__ = [
    "EFI_GLOBAL_VARIABLE",
    "Blob",
    "Gpt",
    "GptPartition",
    "HandoffTables",
    "ImageLoad",
    "LoadOption",
    "Reader",
    "StructureError",
    "TaggedEvent",
    "Variable",
    "guid_text",
    "parse_blob",
    "parse_blob2",
    "parse_gpt",
    "parse_handoff_tables",
    "parse_image_load",
    "parse_load_option",
    "parse_tagged_event",
    "parse_variable",
    "signature_counts",
]

EFI_GLOBAL_VARIABLE = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
"""The vendor GUID of SecureBoot, PK, KEK, BootOrder, Boot####."""

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class StructureError(ValueError):
    """An EFI structure inside event data does not fit its bytes (private)."""


def guid_text(raw: bytes) -> str:
    """Return the canonical lower-case text of a 16-byte mixed-endian EFI GUID."""
    return str(uuid.UUID(bytes_le=raw))


class Reader:
    """A bounds-checked little-endian cursor over event data."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        """How many bytes are left after the cursor."""
        return len(self.data) - self.pos

    def take(self, size: int, what: str) -> bytes:
        """Return the next ``size`` bytes, or raise if fewer remain."""
        if size < 0 or size > self.remaining:
            raise StructureError(
                f"{what} needs {size} bytes at offset {self.pos} but {self.remaining} remain"
            )
        start = self.pos
        self.pos = start + size
        return self.data[start : self.pos]

    def u8(self, what: str) -> int:
        """Read one unsigned byte."""
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        """Read a little-endian UINT16."""
        value: int = _U16.unpack(self.take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        """Read a little-endian UINT32."""
        value: int = _U32.unpack(self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        """Read a little-endian UINT64."""
        value: int = _U64.unpack(self.take(8, what))[0]
        return value

    def guid(self, what: str) -> str:
        """Read an EFI GUID and return its text."""
        return guid_text(self.take(16, what))

    def rest(self) -> bytes:
        """Return every remaining byte."""
        return self.take(self.remaining, "rest")


def utf16_text(raw: bytes, what: str) -> str:
    """Decode UTF-16LE text, dropping a trailing NUL terminator."""
    if len(raw) % 2:
        raise StructureError(f"{what} has an odd byte length {len(raw)}")
    text = raw.decode("utf-16-le", errors="replace")
    return text.rstrip("\x00")


def read_utf16z(reader: Reader, what: str) -> str:
    """Read a NUL-terminated UTF-16LE string (the terminator is consumed)."""
    data = reader.data
    pos = reader.pos
    while True:
        end = data.find(b"\x00\x00", pos, len(data))
        if end < 0:
            raise StructureError(f"{what} has no NUL terminator")
        if (end - reader.pos) % 2 == 0:
            break
        pos = end + 1
    text = reader.take(end - reader.pos, what).decode("utf-16-le", errors="replace")
    reader.take(2, what)
    return text


@dataclass(frozen=True, slots=True)
class Variable:
    """A decoded ``UEFI_VARIABLE_DATA``."""

    guid: str
    name: str
    value: bytes


def parse_variable(data: bytes) -> Variable:
    """Decode ``UEFI_VARIABLE_DATA``: GUID, name length, data length, name, data."""
    reader = Reader(data)
    guid = reader.guid("VariableName")
    name_length = reader.u64("UnicodeNameLength")
    data_length = reader.u64("VariableDataLength")
    if name_length > reader.remaining // 2:
        raise StructureError(f"UnicodeNameLength {name_length} runs past the event data")
    name = utf16_text(reader.take(2 * name_length, "UnicodeName"), "UnicodeName")
    value = reader.take(data_length, "VariableData")
    return Variable(guid=guid, name=name, value=value)


@dataclass(frozen=True, slots=True)
class LoadOption:
    """A decoded ``EFI_LOAD_OPTION`` (the value of a ``Boot####`` variable)."""

    attributes: int
    description: str
    device_path: bytes
    optional_data: bytes


def parse_load_option(data: bytes) -> LoadOption:
    """Decode ``EFI_LOAD_OPTION``: attributes, path length, description, paths, data."""
    reader = Reader(data)
    attributes = reader.u32("Attributes")
    path_length = reader.u16("FilePathListLength")
    description = read_utf16z(reader, "Description")
    device_path = reader.take(path_length, "FilePathList")
    return LoadOption(attributes, description, device_path, reader.rest())


def signature_counts(data: bytes) -> tuple[int, int]:
    """Count the ``EFI_SIGNATURE_LIST`` entries and signatures in a db-style value.

    Returns:
        ``(lists, signatures)``.
    """
    reader = Reader(data)
    lists = signatures = 0
    while reader.remaining:
        reader.take(16, "SignatureType")
        list_size = reader.u32("SignatureListSize")
        header_size = reader.u32("SignatureHeaderSize")
        signature_size = reader.u32("SignatureSize")
        body = list_size - 28 - header_size
        if body < 0 or signature_size < 16 or body % signature_size:
            raise StructureError(f"EFI_SIGNATURE_LIST of size {list_size} is inconsistent")
        reader.take(header_size + body, "EFI_SIGNATURE_LIST body")
        lists += 1
        signatures += body // signature_size
    return lists, signatures


@dataclass(frozen=True, slots=True)
class ImageLoad:
    """A decoded ``UEFI_IMAGE_LOAD_EVENT``."""

    location: int
    length: int
    link_time_address: int
    device_path: bytes
    trailing: bytes


def parse_image_load(data: bytes) -> ImageLoad:
    """Decode ``UEFI_IMAGE_LOAD_EVENT``: location, length, link address, device path."""
    reader = Reader(data)
    location = reader.u64("ImageLocationInMemory")
    length = reader.u64("ImageLengthInMemory")
    link_time = reader.u64("ImageLinkTimeAddress")
    path_length = reader.u64("LengthOfDevicePath")
    device_path = reader.take(path_length, "DevicePath")
    return ImageLoad(location, length, link_time, device_path, reader.rest())


@dataclass(frozen=True, slots=True)
class GptPartition:
    """One ``UEFI_PARTITION_ENTRY``."""

    type_guid: str
    unique_guid: str
    first_lba: int
    last_lba: int
    name: str


@dataclass(frozen=True, slots=True)
class Gpt:
    """A decoded ``UEFI_GPT_DATA``: the disk GUID and the used partition entries."""

    disk_guid: str
    partitions: tuple[GptPartition, ...]


_GPT_HEADER_SIZE = 92
_GPT_SIGNATURE = b"EFI PART"


def parse_gpt(data: bytes) -> Gpt:
    """Decode ``UEFI_GPT_DATA``: partition table header, count, partition entries."""
    reader = Reader(data)
    header = reader.take(_GPT_HEADER_SIZE, "UEFI_PARTITION_TABLE_HEADER")
    if header[:8] != _GPT_SIGNATURE:
        raise StructureError(f"GPT header signature is {header[:8]!r}, not 'EFI PART'")
    disk_guid = guid_text(header[56:72])
    entry_size: int = _U32.unpack_from(header, 84)[0]
    count = reader.u64("NumberOfPartitions")
    if entry_size < 128 or count > reader.remaining // entry_size:
        raise StructureError(f"{count} partition entries of {entry_size} bytes do not fit")
    partitions = tuple(_gpt_entry(reader.take(entry_size, "entry")) for _ in range(count))
    return Gpt(disk_guid, partitions)


def _gpt_entry(raw: bytes) -> GptPartition:
    first, last = struct.unpack_from("<QQ", raw, 32)
    name = raw[56:128].decode("utf-16-le", errors="replace").split("\x00", 1)[0]
    return GptPartition(guid_text(raw[0:16]), guid_text(raw[16:32]), first, last, name)


@dataclass(frozen=True, slots=True)
class Blob:
    """A decoded ``UEFI_PLATFORM_FIRMWARE_BLOB`` or ``..._BLOB2``."""

    base: int
    length: int
    description: str | None = None


def parse_blob(data: bytes) -> Blob:
    """Decode ``UEFI_PLATFORM_FIRMWARE_BLOB``: base address and length."""
    if len(data) != 16:
        raise StructureError(f"a firmware blob is 16 bytes, this one is {len(data)}")
    base, length = struct.unpack("<QQ", data)
    return Blob(base, length)


def parse_blob2(data: bytes) -> Blob:
    """Decode ``UEFI_PLATFORM_FIRMWARE_BLOB2``: description, base and length."""
    reader = Reader(data)
    description = reader.take(reader.u8("BlobDescriptionSize"), "BlobDescription")
    base = reader.u64("BlobBase")
    length = reader.u64("BlobLength")
    return Blob(base, length, description.rstrip(b"\x00").decode("ascii", errors="replace"))


@dataclass(frozen=True, slots=True)
class HandoffTables:
    """A decoded ``UEFI_HANDOFF_TABLE_POINTERS(2)``: (vendor GUID, address) pairs."""

    tables: tuple[tuple[str, int], ...]
    description: str | None = None


def parse_handoff_tables(data: bytes, *, with_description: bool) -> HandoffTables:
    """Decode ``UEFI_HANDOFF_TABLE_POINTERS`` (or the ``2`` form with a description)."""
    reader = Reader(data)
    description = None
    if with_description:
        raw = reader.take(reader.u8("TableDescriptionSize"), "TableDescription")
        description = raw.rstrip(b"\x00").decode("ascii", errors="replace")
    count = reader.u64("NumberOfTables")
    if count > reader.remaining // 24:
        raise StructureError(f"NumberOfTables {count} runs past the event data")
    tables = tuple((reader.guid("VendorGuid"), reader.u64("VendorTable")) for _ in range(count))
    return HandoffTables(tables, description)


@dataclass(frozen=True, slots=True)
class TaggedEvent:
    """A decoded ``TCG_PCClientTaggedEvent``."""

    tag: int
    payload: bytes


def parse_tagged_event(data: bytes) -> TaggedEvent:
    """Decode ``TCG_PCClientTaggedEvent``: tag id, size, payload."""
    reader = Reader(data)
    tag = reader.u32("taggedEventID")
    payload = reader.take(reader.u32("taggedEventDataSize"), "taggedEventData")
    return TaggedEvent(tag, payload)

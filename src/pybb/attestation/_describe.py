"""Human descriptions of event data, one decoder per event type.

Each decoder returns a :class:`Decoded` pair: a ``description`` for a person reading a
report (it may hold load addresses and other per-boot detail) and a ``label`` that
names the measured component stably across boots (no memory addresses), which is
what a policy keys its allowlist on. :func:`decode` never raises: an EFI structure
that does not fit its bytes yields a fallback with a hex preview of the data.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from pybb.attestation import _efi
from pybb.attestation._devicepath import device_path_to_text
from pybb.attestation._tcg import KNOWN_ALGORITHMS, EventType, event_type_name

__all__ = ["Decoded", "decode", "hex_preview"]

_PREVIEW_BYTES = 32
_MAX_DESCRIPTION = 512

_VENDOR_NAMES = {
    _efi.EFI_GLOBAL_VARIABLE: "EFI global variable",
    "d719b2cb-3d3a-4596-a3bc-dad00e67656f": "EFI image security database",
    "605dab50-e046-4300-abb6-3dd810dd8b23": "shim",
}
_TABLE_NAMES = {
    "eb9d2d30-2d88-11d3-9a16-0090273fc14d": "ACPI 1.0",
    "8868e871-e4f1-11d3-bc22-0080c73c8881": "ACPI 2.0",
    "eb9d2d31-2d88-11d3-9a16-0090273fc14d": "SMBIOS",
    "f2fd1544-9794-4a2c-992e-e5bbcf20e394": "SMBIOS3",
}
_SIGNATURE_DATABASES = frozenset({"PK", "KEK", "db", "dbx", "dbt", "dbr", "PKDefault"})


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a person reads about an event, and the stable name of what it measured."""

    description: str
    label: str


def hex_preview(data: bytes) -> str:
    """Return the first bytes of ``data`` in hex, with the total length."""
    head = data[:_PREVIEW_BYTES].hex()
    more = "…" if len(data) > _PREVIEW_BYTES else ""
    return f"{head}{more} ({len(data)} bytes)" if data else "(0 bytes)"


def decode(event_type: int, data: bytes) -> Decoded:
    """Describe event data of the given type; never raises.

    Args:
        event_type: The raw ``eventType``.
        data: The event data bytes.

    Returns:
        The description and stable label, or a hex-preview fallback when the data
        does not decode as its type says.
    """
    decoder = _DECODERS.get(event_type, _text_or_hex)
    try:
        decoded = decoder(data)
    except (ValueError, struct.error) as exc:
        preview = hex_preview(data)
        name = event_type_name(event_type)
        return Decoded(f"undecodable {name} data ({exc}): {preview}", preview)
    if len(decoded.description) > _MAX_DESCRIPTION:
        cut = decoded.description[:_MAX_DESCRIPTION]
        return Decoded(f"{cut}… ({len(decoded.description)} characters)", decoded.label)
    return decoded


def _same(text: str) -> Decoded:
    return Decoded(text, text)


def as_text(data: bytes) -> str | None:
    """Return ``data`` as text if it is printable ASCII, or ASCII in UTF-16LE, else ``None``.

    Non-ASCII UTF-16 is refused on purpose: random binary (a GUID, a digest) decodes
    to printable CJK characters often enough to mislead a reader.
    """
    stripped = data.rstrip(b"\x00")
    if not stripped:
        return ""
    if stripped.isascii():
        text = stripped.decode("ascii")
        if _printable(text):
            return text
    # UTF-16LE: stripping the NULs took the high byte of the last character too,
    # so pad back to even (this also reads systemd-boot's odd-length strings).
    if len(stripped) % 2:
        stripped += b"\x00"
    try:
        text = stripped.decode("utf-16-le")
    except UnicodeDecodeError:
        return None
    return text if text.isascii() and _printable(text) else None


def _printable(text: str) -> bool:
    return text.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable()


def _quote(text: str) -> str:
    return '"' + text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t") + '"'


def _text_or_hex(data: bytes) -> Decoded:
    text = as_text(data)
    if text is None:
        return _same(hex_preview(data))
    return _same(_quote(text))


_SPEC_ID_SIGNATURE = b"Spec ID Event03\x00"
_LOCALITY_SIGNATURE = b"StartupLocality\x00"


def _no_action(data: bytes) -> Decoded:
    if data.startswith(_SPEC_ID_SIGNATURE):
        return _same(_spec_id_text(data))
    if data.startswith(_LOCALITY_SIGNATURE) and len(data) >= 17:
        return _same(f"StartupLocality: locality {data[16]}")
    # Other EV_NO_ACTION payloads (SP800-155 Event, NvIndexInstance, ...) open with
    # a 16-byte NUL-padded ASCII signature.
    signature = data[:16].split(b"\x00", 1)[0]
    if len(data) >= 16 and len(signature) >= 4 and signature.isascii():
        text = signature.decode("ascii")
        if text.isprintable():
            return _same(f"{text} ({len(data)} bytes)")
    return _text_or_hex(data)


def _spec_id_text(data: bytes) -> str:
    reader = _efi.Reader(data, 24)
    count = reader.u32("numberOfAlgorithms")
    names = []
    for _ in range(min(count, 16)):
        alg_id = reader.u16("algorithmId")
        size = reader.u16("digestSize")
        known = KNOWN_ALGORITHMS.get(alg_id)
        names.append(f"{known.name if known else f'0x{alg_id:04x}'} ({size} bytes)")
    return f"Spec ID Event03, banks: {', '.join(names)}"


def _separator(data: bytes) -> Decoded:
    if len(data) != 4:
        return Decoded(f"separator with unusual data {hex_preview(data)}", "separator")
    value = int.from_bytes(data, "little")
    if value == 0:
        return Decoded("separator", "separator")
    if value == 0xFFFFFFFF:
        return Decoded("separator signalling a firmware error (0xffffffff)", "error separator")
    return Decoded(f"separator with value 0x{value:08x}", "separator")


def _blob_text(blob: _efi.Blob) -> str:
    name = f" {_quote(blob.description)}" if blob.description is not None else ""
    return f"firmware blob{name} at 0x{blob.base:x}, length 0x{blob.length:x}"


def _blob(data: bytes) -> Decoded:
    return _same(_blob_text(_efi.parse_blob(data)))


def _blob2(data: bytes) -> Decoded:
    return _same(_blob_text(_efi.parse_blob2(data)))


def _blob_or_text(data: bytes) -> Decoded:
    # PFP §10.4: EV_POST_CODE and EV_S_CRTM_CONTENTS carry either a firmware blob
    # (16 bytes: base, length) or a string such as "ACPI DATA".
    if len(data) == 16 and as_text(data) is None:
        return _blob(data)
    return _text_or_hex(data)


def _vendor(guid: str) -> str:
    return _VENDOR_NAMES.get(guid, guid)


def _variable(data: bytes) -> Decoded:
    variable = _efi.parse_variable(data)
    value_text = _variable_value(variable)
    description = f"{value_text} [{_vendor(variable.guid)}]"
    return Decoded(description, f"{variable.name} ({variable.guid})")


def _variable_value(variable: _efi.Variable) -> str:
    name, value = variable.name, variable.value
    if name == "SecureBoot" and variable.guid == _efi.EFI_GLOBAL_VARIABLE:
        return _secure_boot_text(value)
    if name in _SIGNATURE_DATABASES or name.startswith("MokList"):
        return _database_text(name, value)
    if name == "BootOrder" and len(value) % 2 == 0:
        order = ", ".join(f"Boot{value[i + 1]:02X}{value[i]:02X}" for i in range(0, len(value), 2))
        return f"BootOrder: {order or '(empty)'}"
    if _is_boot_option(name):
        return _boot_option_text(name, value)
    return _plain_value_text(name, value)


def _secure_boot_text(value: bytes) -> str:
    if not value:
        return "SecureBoot is empty (Secure Boot not enabled)"
    state = {0: "disabled", 1: "enabled"}.get(value[0], "unexpected value")
    return f"SecureBoot = {value[0]} ({state})"


def _database_text(name: str, value: bytes) -> str:
    if not value:
        return f"{name} is empty"
    try:
        lists, signatures = _efi.signature_counts(value)
    except _efi.StructureError:
        return _plain_value_text(name, value)
    return f"{name}: {signatures} signature(s) in {lists} list(s), {len(value)} bytes"


def _is_boot_option(name: str) -> bool:
    prefixes = ("Boot", "Driver", "SysPrep", "PlatformRecovery")
    return any(
        name.startswith(p) and len(name) == len(p) + 4 and _is_hex(name[len(p) :]) for p in prefixes
    )


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _boot_option_text(name: str, value: bytes) -> str:
    try:
        option = _efi.parse_load_option(value)
    except _efi.StructureError:
        return _plain_value_text(name, value)
    path = device_path_to_text(option.device_path) or "(no device path)"
    return f"{name}: {_quote(option.description)} {path}"


def _plain_value_text(name: str, value: bytes) -> str:
    if len(value) == 1:
        return f"{name} = {value[0]}"
    text = as_text(value)
    if text:
        return f"{name} = {_quote(text)}"
    return f"{name}: {hex_preview(value)}" if value else f"{name} is empty"


def _authority(data: bytes) -> Decoded:
    variable = _efi.parse_variable(data)
    label = f"{variable.name} ({variable.guid})"
    value = variable.value
    vendor = f"[{_vendor(variable.guid)}]"
    if value.startswith(_DER_SEQUENCE):
        return Decoded(f"{variable.name}: {_certificate_text(value)} {vendor}", label)
    if len(value) > 16 and value[16:].startswith(_DER_SEQUENCE):
        owner = _efi.guid_text(value[:16])
        text = f"{variable.name} entry: {_certificate_text(value[16:])}, owner {owner}"
        return Decoded(f"{text} {vendor}", label)
    return Decoded(f"{_plain_value_text(variable.name, value)} {vendor}", label)


_DER_SEQUENCE = b"\x30\x82"
_COMMON_NAME_OID = b"\x06\x03\x55\x04\x03"
_DER_STRING_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1E})


def _certificate_text(der: bytes) -> str:
    """Name an X.509 certificate by its subject common name, found without a parser.

    The issuer's CN comes before the subject's in a certificate, so the second CN
    is the subject's (the first one when the certificate is self-signed and only
    one is found). Any surprise falls back to the size alone.
    """
    names: list[str] = []
    start = der.find(_COMMON_NAME_OID)
    while start >= 0 and len(names) < 2:
        at = start + len(_COMMON_NAME_OID)
        if len(der) >= at + 2 and der[at] in _DER_STRING_TAGS and der[at + 1] < 0x80:
            raw = der[at + 2 : at + 2 + der[at + 1]]
            encoding = "utf-16-be" if der[at] == 0x1E else "utf-8"
            names.append(raw.decode(encoding, errors="replace"))
        start = der.find(_COMMON_NAME_OID, at)
    if not names:
        return f"certificate ({len(der)} bytes)"
    return f"certificate CN={_quote(names[-1])} ({len(der)} bytes)"


def _image_load(data: bytes) -> Decoded:
    image = _efi.parse_image_load(data)
    path = device_path_to_text(image.device_path) or "(no device path)"
    description = f"{path} (image at 0x{image.location:x}, {image.length} bytes)"
    if image.trailing:
        description += f", {len(image.trailing)} unexpected trailing bytes"
    return Decoded(description, path)


def _gpt(data: bytes) -> Decoded:
    gpt = _efi.parse_gpt(data)
    names = ", ".join(_quote(p.name) for p in gpt.partitions)
    label = f"GPT disk {gpt.disk_guid}, {len(gpt.partitions)} partition(s)"
    return Decoded(f"{label}: {names}" if names else label, label)


def _handoff(with_description: bool) -> Callable[[bytes], Decoded]:
    def decode_tables(data: bytes) -> Decoded:
        tables = _efi.parse_handoff_tables(data, with_description=with_description)
        names = [_TABLE_NAMES.get(guid, guid) for guid, _ in tables.tables]
        where = [
            f"{name} at 0x{address:x}"
            for name, (_, address) in zip(names, tables.tables, strict=True)
        ]
        prefix = f"{_quote(tables.description)}: " if tables.description is not None else ""
        count = f"{len(names)} configuration table(s)"
        return Decoded(
            f"{prefix}{count}: {', '.join(where)}", f"{prefix}{count}: {', '.join(names)}"
        )

    return decode_tables


def _tagged(data: bytes) -> Decoded:
    tagged = _efi.parse_tagged_event(data)
    inner = _text_or_hex(tagged.payload).description
    return _same(f"tag 0x{tagged.tag:08x}: {inner}")


_DECODERS: dict[int, Callable[[bytes], Decoded]] = {
    EventType.EV_NO_ACTION: _no_action,
    EventType.EV_SEPARATOR: _separator,
    EventType.EV_POST_CODE: _blob_or_text,
    EventType.EV_S_CRTM_CONTENTS: _blob_or_text,
    EventType.EV_EVENT_TAG: _tagged,
    EventType.EV_EFI_VARIABLE_DRIVER_CONFIG: _variable,
    EventType.EV_EFI_VARIABLE_BOOT: _variable,
    EventType.EV_EFI_VARIABLE_BOOT2: _variable,
    EventType.EV_EFI_VARIABLE_AUTHORITY: _authority,
    EventType.EV_EFI_BOOT_SERVICES_APPLICATION: _image_load,
    EventType.EV_EFI_BOOT_SERVICES_DRIVER: _image_load,
    EventType.EV_EFI_RUNTIME_SERVICES_DRIVER: _image_load,
    EventType.EV_EFI_GPT_EVENT: _gpt,
    EventType.EV_EFI_GPT_EVENT2: _gpt,
    EventType.EV_EFI_PLATFORM_FIRMWARE_BLOB: _blob,
    EventType.EV_EFI_PLATFORM_FIRMWARE_BLOB2: _blob2,
    EventType.EV_EFI_HANDOFF_TABLES: _handoff(with_description=False),
    EventType.EV_EFI_HANDOFF_TABLES2: _handoff(with_description=True),
}

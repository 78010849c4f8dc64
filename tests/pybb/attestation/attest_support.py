"""Building devices from the bundled real logs, for the attestation tree's tests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from pybb.attestation import (
    Attestation,
    DeviceClass,
    Event,
    Evidence,
    Fleet,
    FleetReport,
    LogFormat,
    builtin_logs,
    parse_event_log,
    replay,
)

FEDORA = "fedora37-sdboot"  # sha256 only, Secure Boot off, 2.6 KB
SHIM = "rhel9-shim"  # sha256 only, Secure Boot on
LEGACY = "uefi-sha1"  # the legacy SHA-1 layout
MULTI = "postcode"  # sha1 + sha256, Secure Boot on


def golden(name: str) -> bytes:
    return builtin_logs()[name]


def event(name: str, index: int) -> Event:
    return parse_event_log(golden(name)).events[index]


def digest_offsets(log: bytes, target: Event) -> dict[str, int]:
    """Where each digest of ``target`` lies in ``log``."""
    if parse_event_log(log).format is LogFormat.SHA1:
        return {"sha1": target.offset + 8}
    offsets, position = {}, target.offset + 12
    for bank, digest in target.digests.items():
        offsets[bank] = position + 2
        position += 2 + len(digest)
    return offsets


def with_digests(log: bytes, target: Event, payload: bytes) -> bytes:
    """``log`` with every digest of ``target`` replaced by the bank's hash of ``payload``."""
    data = bytearray(log)
    for bank, offset in digest_offsets(log, target).items():
        value = hashlib.new(bank, payload).digest()
        data[offset : offset + len(value)] = value
    return bytes(data)


def bank_digest(bank: str, payload: bytes) -> bytes:
    return hashlib.new(bank, payload).digest()


def secure_boot_off(log: bytes) -> tuple[bytes, Event]:
    """``log`` with its SecureBoot variable measured as 0 (data and digests)."""
    parsed = parse_event_log(log)
    variable = next(e for e in parsed.events if e.label.startswith("SecureBoot "))
    data = bytearray(log)
    offsets = digest_offsets(log, variable)
    last = list(offsets)[-1]
    end = offsets[last] + len(variable.digests[last]) + 4
    data[end + len(variable.data) - 1] = 0
    flipped = variable.data[:-1] + b"\x00"
    for bank, offset in offsets.items():
        value = hashlib.new(bank, flipped).digest()
        data[offset : offset + len(value)] = value
    return bytes(data), variable


def device(
    name: str, device_class: str, log: bytes, quote: dict[str, dict[int, bytes]] | None = None
) -> Evidence:
    return Evidence(name, device_class, log, replay(log) if quote is None else quote)


def attest(
    classes: Iterable[DeviceClass], devices: Iterable[Evidence], **options: object
) -> tuple[FleetReport, Attestation]:
    """Run a fleet on a memory board; return its report and the attestation (to read its board)."""
    attestation = Attestation(Fleet.of(classes, devices), **options)  # type: ignore[arg-type]
    return attestation.run(), attestation

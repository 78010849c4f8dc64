"""TCG vocabulary: event types and digest algorithms.

Event types come from the TCG PC Client Platform Firmware Profile (PFP) 1.06,
table "Event Types"; algorithm ids from the TCG Algorithm Registry. Bank names are
the ones ``tpm2_eventlog`` prints, so replay results compare key for key.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "KNOWN_ALGORITHMS",
    "DigestAlgorithm",
    "EventType",
    "HashFunction",
    "event_type_name",
    "hash_constructor",
]


class EventType(enum.IntEnum):
    """The TCG PC Client event types (``eventType`` of a log entry)."""

    EV_PREBOOT_CERT = 0x00000000
    EV_POST_CODE = 0x00000001
    EV_UNUSED = 0x00000002
    EV_NO_ACTION = 0x00000003
    EV_SEPARATOR = 0x00000004
    EV_ACTION = 0x00000005
    EV_EVENT_TAG = 0x00000006
    EV_S_CRTM_CONTENTS = 0x00000007
    EV_S_CRTM_VERSION = 0x00000008
    EV_CPU_MICROCODE = 0x00000009
    EV_PLATFORM_CONFIG_FLAGS = 0x0000000A
    EV_TABLE_OF_DEVICES = 0x0000000B
    EV_COMPACT_HASH = 0x0000000C
    EV_IPL = 0x0000000D
    EV_IPL_PARTITION_DATA = 0x0000000E
    EV_NONHOST_CODE = 0x0000000F
    EV_NONHOST_CONFIG = 0x00000010
    EV_NONHOST_INFO = 0x00000011
    EV_OMIT_BOOT_DEVICE_EVENTS = 0x00000012
    EV_POST_CODE2 = 0x00000013
    EV_EFI_EVENT_BASE = 0x80000000
    EV_EFI_VARIABLE_DRIVER_CONFIG = 0x80000001
    EV_EFI_VARIABLE_BOOT = 0x80000002
    EV_EFI_BOOT_SERVICES_APPLICATION = 0x80000003
    EV_EFI_BOOT_SERVICES_DRIVER = 0x80000004
    EV_EFI_RUNTIME_SERVICES_DRIVER = 0x80000005
    EV_EFI_GPT_EVENT = 0x80000006
    EV_EFI_ACTION = 0x80000007
    EV_EFI_PLATFORM_FIRMWARE_BLOB = 0x80000008
    EV_EFI_HANDOFF_TABLES = 0x80000009
    EV_EFI_PLATFORM_FIRMWARE_BLOB2 = 0x8000000A
    EV_EFI_HANDOFF_TABLES2 = 0x8000000B
    EV_EFI_VARIABLE_BOOT2 = 0x8000000C
    EV_EFI_GPT_EVENT2 = 0x8000000D
    EV_EFI_HCRTM_EVENT = 0x80000010
    EV_EFI_VARIABLE_AUTHORITY = 0x800000E0
    EV_EFI_SPDM_FIRMWARE_BLOB = 0x800000E1
    EV_EFI_SPDM_FIRMWARE_CONFIG = 0x800000E2
    EV_EFI_SPDM_DEVICE_POLICY = 0x800000E3
    EV_EFI_SPDM_DEVICE_AUTHORITY = 0x800000E4


_TYPE_NAMES: dict[int, str] = {member.value: member.name for member in EventType}


def event_type_name(event_type: int) -> str:
    """Return the TCG name of an event type, or a hex label for an unknown one.

    Args:
        event_type: The raw ``eventType`` value.

    Returns:
        For example ``"EV_SEPARATOR"``, or ``"EV_UNKNOWN_0x00000042"``.
    """
    name = _TYPE_NAMES.get(event_type)
    return name if name is not None else f"EV_UNKNOWN_0x{event_type:08x}"


@dataclass(frozen=True, slots=True)
class DigestAlgorithm:
    """A digest algorithm as a log declares it: one PCR bank.

    Attributes:
        algorithm_id: The TCG ``TPM_ALG_ID`` (``0x000B`` for SHA-256).
        name: The bank name as ``tpm2_eventlog`` prints it (``"sha256"``).
        digest_size: The digest length in bytes.
    """

    algorithm_id: int
    name: str
    digest_size: int


KNOWN_ALGORITHMS: dict[int, DigestAlgorithm] = {
    alg.algorithm_id: alg
    for alg in (
        DigestAlgorithm(0x0004, "sha1", 20),
        DigestAlgorithm(0x000B, "sha256", 32),
        DigestAlgorithm(0x000C, "sha384", 48),
        DigestAlgorithm(0x000D, "sha512", 64),
        DigestAlgorithm(0x0012, "sm3_256", 32),
        DigestAlgorithm(0x0027, "sha3_256", 32),
        DigestAlgorithm(0x0028, "sha3_384", 48),
        DigestAlgorithm(0x0029, "sha3_512", 64),
    )
}
"""The algorithms this package can parse and replay, by TCG algorithm id."""


class _Hash(Protocol):
    def digest(self) -> bytes: ...


HashFunction = Callable[[bytes], _Hash]
"""A one-shot hash constructor such as ``hashlib.sha256``."""

_HASHLIB_NAMES = {"sm3_256": "sm3"}


def hash_constructor(bank: str) -> HashFunction | None:
    """Return a one-shot hash constructor for a bank, or ``None`` if hashlib lacks it.

    Args:
        bank: A bank name from :data:`KNOWN_ALGORITHMS` (``"sha256"``).

    Returns:
        A callable taking the bytes to hash, like ``hashlib.sha256``.
    """
    name = _HASHLIB_NAMES.get(bank, bank)
    direct = getattr(hashlib, name, None)
    if callable(direct):
        constructor: HashFunction = direct
        return constructor
    try:
        hashlib.new(name)
    except ValueError:
        return None

    def build(data: bytes) -> _Hash:
        return hashlib.new(name, data)

    return build

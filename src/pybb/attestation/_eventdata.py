"""Checking event data against the digests that were extended for it.

A PCR vouches for digests, never for the event data beside them: a log whose
``SecureBoot`` data says 1 over the digest of a 0 replays to the very same PCRs. So
wherever the TCG PC Client Platform Firmware Profile (PFP 1.06, its event types) makes
an event's digest the hash of its event data, this module hashes the data in every bank
the event carries and compares. An event is then one of:

* ``verified``: the digest is the hash of the data, under the rule named in
  :attr:`DataCheck.rule` (a documented firmware quirk counts, see below);
* ``mismatch``: the rule applies and no accepted form of the data hashes to the digest;
  the verifier fails the device (``event_data_mismatch``);
* ``not_applicable``: the digest is of something the log does not carry (a firmware
  volume, a PE image, a file, an ACPI table), or the event is never extended
  (``EV_NO_ACTION``). Such data is a description only; no fact is read from it.

What is checked, and the alternatives accepted (each seen on real firmware):

================================  ==========================================================
event type                        the digest is the hash of
================================  ==========================================================
EV_SEPARATOR, EV_ACTION,          the event data (a separator's 00000000 or its error
EV_EFI_ACTION, EV_S_CRTM_VERSION, value FFFFFFFF alike)
EV_OMIT_BOOT_DEVICE_EVENTS,
EV_NONHOST_INFO,
EV_EFI_VARIABLE_DRIVER_CONFIG,
EV_EFI_GPT_EVENT
EV_EFI_VARIABLE_BOOT(2)           the whole ``UEFI_VARIABLE_DATA`` (PFP), or only its
                                  VariableData (EDK2/OVMF firmware does this)
EV_EFI_VARIABLE_AUTHORITY         the event data; for shim's ``Shim`` certificate also the
                                  data without its last byte (shim before commit 8a27a48
                                  logged one byte too many; go-attestation issue 157)
EV_IPL in PCR 8, GRUB             the command after its ``grub_cmd: ``/``kernel_cmdline: ``/
                                  ``module_cmdline: `` prefix (or the older ``grub_cmd ``,
                                  ``grub_kernel_cmdline ``), without or with its NUL
EV_IPL in PCR 8 or 12, UTF-16     the UTF-16 command line systemd-boot measured: the data,
                                  or the data with the NUL that older systemd-boot (the one
                                  measuring into PCR 8) left out of the event: its
                                  eventSize is one byte short
================================  ==========================================================

Not checked, because the digest is not of the data: EV_POST_CODE(2), EV_S_CRTM_CONTENTS,
firmware blobs, boot services and runtime images, EV_EFI_HANDOFF_TABLES(2) (the digest
is of the tables, the data only points to them), EV_EFI_HCRTM_EVENT, EV_CPU_MICROCODE,
EV_NONHOST_CODE/CONFIG, EV_EVENT_TAG (systemd-boot's initrd, the Linux stub's load
options), EV_IPL outside the forms above (GRUB's files in PCR 9, shim's MokList in PCR
14), the SPDM events, and EV_EFI_GPT_EVENT2 (its digest is over a form of the table
this package does not rebuild). An event type this package does not know is not
checked either; the policy's manifest still pins its digest.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

from pybb.attestation import _efi
from pybb.attestation._event import Event
from pybb.attestation._tcg import EventType, hash_constructor

__all__ = ["DataCheck", "DataStatus", "check_event", "data_mismatches", "secure_boot_event"]

SHIM_LOCK_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
"""The vendor GUID of shim's variables (MokList, SbatLevel, its ``Shim`` certificate)."""

_GRUB_PREFIXES = (
    b"grub_cmd: ",
    b"kernel_cmdline: ",
    b"module_cmdline: ",
    b"grub_kernel_cmdline ",
    b"grub_cmd ",
)
_DER_SEQUENCE = b"\x30\x82"
_CACHE_SIZE = 8192
_NONE: Mapping[str, bytes] = MappingProxyType({})


class DataStatus(enum.StrEnum):
    """How an event's data stands against its digests."""

    VERIFIED = "verified"
    """The digest (in every bank) is the hash of the data under a rule this module knows."""
    MISMATCH = "mismatch"
    """The digest should be the hash of the data, and no accepted form of it matches."""
    NOT_APPLICABLE = "not_applicable"
    """The digest is of something the log does not carry, or the event is not extended."""


@dataclass(frozen=True, slots=True)
class DataCheck:
    """The result of checking one event's data against its digests.

    Attributes:
        status: Verified, mismatch or not applicable.
        rule: The rule that decided: ``"data"`` (the digest is the hash of the data) or
            the quirk accepted (``"variable value only"``, ``"shim extra byte"``, ...);
            for a mismatch the rule that should have held; why it does not apply otherwise.
        computed: For a mismatch, per bank, what the digest should have been under the
            rule (the hash of the data, or for GRUB of the command it logs); else empty.
    """

    status: DataStatus
    rule: str
    computed: Mapping[str, bytes] = field(default_factory=lambda: _NONE, hash=False)

    @property
    def verified(self) -> bool:
        """Whether the data is vouched for by the digest."""
        return self.status is DataStatus.VERIFIED

    @property
    def mismatch(self) -> bool:
        """Whether the data contradicts the digest."""
        return self.status is DataStatus.MISMATCH


_NOT_EXTENDED = DataCheck(DataStatus.NOT_APPLICABLE, "not extended (EV_NO_ACTION)")


def check_event(event: Event) -> DataCheck:
    """Check one event's data against its digests; never raises.

    Args:
        event: A parsed event.

    Returns:
        The verdict, naming the rule that decided it.
    """
    if not event.measured:
        return _NOT_EXTENDED
    return _check(event.pcr_index, event.event_type, event.data, tuple(event.digests.items()))


def data_mismatches(events: Iterable[Event]) -> Iterator[tuple[Event, DataCheck]]:
    """The events whose data contradicts their digests, with their checks, in order."""
    for event in events:
        check = check_event(event)
        if check.mismatch:
            yield event, check


def secure_boot_event(events: Iterable[Event]) -> tuple[Event, _efi.Variable] | None:
    """The event that decides Secure Boot: the first ``SecureBoot`` variable in PCR 7.

    The PFP measures ``SecureBoot`` (EFI global GUID) as ``EV_EFI_VARIABLE_DRIVER_CONFIG``
    into PCR 7 before PCR 7's separator. One found in another PCR, or after that
    separator, is ignored: software after the firmware can extend PCRs with whatever it
    likes (go-attestation refuses variables after the separator too). Whether its data
    may be believed is :func:`check_event`'s answer.
    """
    for event in events:
        if event.pcr_index != 7:
            continue
        if event.event_type == EventType.EV_SEPARATOR:
            return None
        if event.event_type != EventType.EV_EFI_VARIABLE_DRIVER_CONFIG:
            continue
        try:
            variable = _efi.parse_variable(event.data)
        except _efi.StructureError:
            continue
        if variable.name == "SecureBoot" and variable.guid == _efi.EFI_GLOBAL_VARIABLE:
            return event, variable
    return None


# -- the rules --------------------------------------------------------------------------------

_Digests = tuple[tuple[str, bytes], ...]
_Rule = Callable[[int, bytes], "list[tuple[str, bytes]] | str"]
"""A rule: ``(pcr, data) -> [(name, candidate bytes), ...]`` or why it does not apply."""


@lru_cache(maxsize=_CACHE_SIZE)
def _check(pcr: int, event_type: int, data: bytes, digests: _Digests) -> DataCheck:
    """The check of one event, cached: a fleet's devices share most of their events."""
    rule = _RULES.get(event_type)
    if rule is None:
        return DataCheck(DataStatus.NOT_APPLICABLE, "its digest is not of the event data")
    candidates = rule(pcr, data)
    if isinstance(candidates, str):
        return DataCheck(DataStatus.NOT_APPLICABLE, candidates)
    usable = []
    for bank, digest in digests:
        hasher = hash_constructor(bank)
        if hasher is not None:
            usable.append((bank, hasher, digest))
    if not usable:
        return DataCheck(DataStatus.NOT_APPLICABLE, "no bank this Python can hash")
    for name, candidate in candidates:
        if all(hasher(candidate).digest() == digest for _, hasher, digest in usable):
            return DataCheck(DataStatus.VERIFIED, name)
    rule_name, primary = candidates[0]
    computed = {bank: hasher(primary).digest() for bank, hasher, _ in usable}
    return DataCheck(DataStatus.MISMATCH, rule_name, MappingProxyType(computed))


def _data(pcr: int, data: bytes) -> list[tuple[str, bytes]] | str:
    return [("data", data)]


def _boot_variable(pcr: int, data: bytes) -> list[tuple[str, bytes]] | str:
    candidates = [("data", data)]
    try:
        variable = _efi.parse_variable(data)
    except _efi.StructureError:
        return candidates
    return [*candidates, ("variable value only", variable.value)]


def _authority(pcr: int, data: bytes) -> list[tuple[str, bytes]] | str:
    candidates = [("data", data)]
    try:
        variable = _efi.parse_variable(data)
    except _efi.StructureError:
        return candidates
    # The shim quirk go-attestation accepts: a bare certificate (no owner GUID) under
    # shim's GUID, logged with one byte too many.
    if variable.guid == SHIM_LOCK_GUID and variable.value.startswith(_DER_SEQUENCE) and data:
        candidates.append(("shim extra byte", data[:-1]))
    return candidates


def _ipl(pcr: int, data: bytes) -> list[tuple[str, bytes]] | str:
    if pcr == 8:
        for prefix in _GRUB_PREFIXES:
            if data.startswith(prefix):
                command = data[len(prefix) :]
                forms = [("GRUB command without its NUL", command[:-1])] if command else []
                return [*forms, ("GRUB command", command)]
    if pcr in (8, 12) and _utf16_text(data):
        return [("data", data), ("systemd-boot short eventSize", data + b"\x00")]
    return "its digest is of what the bootloader loaded, not of the event data"


def _utf16_text(data: bytes) -> bool:
    """Whether ``data`` looks like a UTF-16LE ASCII string (possibly one byte short)."""
    if len(data) < 4:
        return False
    even = data if len(data) % 2 == 0 else data + b"\x00"
    high = even[1::2]
    low = even[0::2].rstrip(b"\x00")
    return high.count(0) == len(high) and bool(low) and low.isascii() and 0 not in low


_RULES: Mapping[int, _Rule] = MappingProxyType(
    {
        int(EventType.EV_SEPARATOR): _data,
        int(EventType.EV_ACTION): _data,
        int(EventType.EV_EFI_ACTION): _data,
        int(EventType.EV_S_CRTM_VERSION): _data,
        int(EventType.EV_OMIT_BOOT_DEVICE_EVENTS): _data,
        int(EventType.EV_NONHOST_INFO): _data,
        int(EventType.EV_EFI_VARIABLE_DRIVER_CONFIG): _data,
        int(EventType.EV_EFI_GPT_EVENT): _data,
        int(EventType.EV_EFI_VARIABLE_BOOT): _boot_variable,
        int(EventType.EV_EFI_VARIABLE_BOOT2): _boot_variable,
        int(EventType.EV_EFI_VARIABLE_AUTHORITY): _authority,
        int(EventType.EV_IPL): _ipl,
    }
)

"""Where an allowlisted digest may appear: a :class:`Slot`, and a class's :class:`Allowlist`.

A digest sanctioned as a new firmware volume is not thereby sanctioned as an S-CRTM
version, a boot loader or a Secure Boot variable. So every allowlist entry names its
place: the PCR, the event type, and where that is meaningful the component's stable
label (the UEFI variable's name and GUID, a boot image's device path, a firmware
blob's address): ``Slot(0, "EV_EFI_PLATFORM_FIRMWARE_BLOB", "firmware blob at 0x820000,
length 0xe0000")``. The text form of a slot (:attr:`Slot.key`, the key of a policy's
``allow`` object and of the board's allowlist premise) is ``"PCR"``,
``"PCR:EVENT_TYPE"`` or ``"PCR:EVENT_TYPE:LABEL"``.

An entry written before slots existed names only its PCR (``"0"``). It keeps working
and means: that PCR, at any event of a type that PCR's reference manifest holds. So an
old PCR 0 firmware entry still sanctions a new firmware blob, but not a digest in a
kind of event the golden machine never measured into PCR 0; and wherever the digest
is the hash of the event data (an S-CRTM version, a variable), the data check
(``event_data_mismatch``) refuses a digest that is not the hash of the data, whatever
the allowlist says.

Judging an event, the tiers take its place from the manifest position it aligns with
(``_analysis._place``): a log can rewrite an event's type, and any data its digest does
not cover, so those say nothing about where the event stands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_LABEL", "Allowlist", "Slot"]

MAX_LABEL = 4096
"""The longest label a slot may name (labels are device paths and variable names)."""

_MAX_PCR = 31
_TYPE_NAME = re.compile(r"EV_[A-Z0-9_]{1,60}|EV_UNKNOWN_0x[0-9a-f]{8}")


@dataclass(frozen=True, slots=True)
class Slot:
    """A place in a boot: the PCR, and optionally the event type and the component's label.

    Attributes:
        pcr: The PCR (0-31).
        event_type: The TCG event type name (``"EV_EFI_PLATFORM_FIRMWARE_BLOB"``), or
            ``None`` for an entry written before slots: any type the PCR's manifest holds.
        label: The component's stable label (``BootComponent.label``), or ``None`` for
            any component of that type in that PCR.

    Raises:
        ValueError: A field that cannot be used, naming it.
    """

    pcr: int
    event_type: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.pcr, bool) or not isinstance(self.pcr, int):
            raise ValueError(f"a slot's PCR must be an integer 0..{_MAX_PCR}, not {self.pcr!r}")
        if not 0 <= self.pcr <= _MAX_PCR:
            raise ValueError(f"PCR {self.pcr} is out of range 0..{_MAX_PCR}")
        if self.event_type is not None and (
            not isinstance(self.event_type, str) or not _TYPE_NAME.fullmatch(self.event_type)
        ):
            raise ValueError(
                f"{self.event_type!r} is not a TCG event type name such as "
                "'EV_EFI_PLATFORM_FIRMWARE_BLOB'"
            )
        if self.label is not None:
            if self.event_type is None:
                raise ValueError("a slot that names a label must name its event type too")
            if not isinstance(self.label, str) or not self.label or len(self.label) > MAX_LABEL:
                raise ValueError(f"a slot's label must be text of 1..{MAX_LABEL} characters")

    @property
    def key(self) -> str:
        """The slot's text form: ``"0"``, ``"0:EV_..."`` or ``"0:EV_...:label"``."""
        parts = [str(self.pcr)]
        if self.event_type is not None:
            parts.append(self.event_type)
        if self.label is not None:
            parts.append(self.label)
        return ":".join(parts)

    @classmethod
    def from_key(cls, key: str) -> Slot:
        """Read a slot's text form (the label may itself hold colons).

        Raises:
            ValueError: The text is not a slot, naming what is wrong.
        """
        if not isinstance(key, str):
            raise ValueError(f'{key!r} is not a slot ("PCR", "PCR:TYPE" or "PCR:TYPE:LABEL")')
        pcr, _, rest = key.partition(":")
        if not pcr.isdigit() or len(pcr) > 2:
            raise ValueError(
                f"{key[:80]!r} does not start with a PCR index "
                '(write "PCR", "PCR:TYPE" or "PCR:TYPE:LABEL", e.g. "0:EV_POST_CODE")'
            )
        if not rest:
            return cls(int(pcr))
        event_type, _, label = rest.partition(":")
        return cls(int(pcr), event_type, label or None)

    @classmethod
    def of(cls, value: Slot | int | str) -> Slot:
        """A slot from a slot, a bare PCR index (an entry written before slots), or a key."""
        if isinstance(value, Slot):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            return cls.from_key(value)
        raise ValueError(f"{value!r} is not a slot, a PCR index or a slot key")

    def admits(
        self, pcr: int, event_type: str, label: str, manifest_types: Iterable[str] = ()
    ) -> bool:
        """Whether an event at ``(pcr, event_type, label)`` is in this slot.

        Args:
            pcr: The event's PCR.
            event_type: Its type name.
            label: Its stable label.
            manifest_types: The types the class's manifest holds in ``pcr``: what a
                slot without an event type (written before slots) stands for.
        """
        if pcr != self.pcr:
            return False
        if self.event_type is None:
            return event_type in set(manifest_types)
        return event_type == self.event_type and (self.label is None or label == self.label)


class Allowlist(Mapping[Slot, frozenset[bytes]]):
    """One class's sanctioned digests, each bound to its :class:`Slot`.

    Indexing with a bare PCR index (``allowlist[0]``) gives every digest allowed
    somewhere in that PCR, as the allowlist read before slots did; judging an event
    uses :meth:`allowed_at`, which honours the slots.

    Args:
        entries: Digests per slot; a key may be a :class:`Slot`, a PCR index (an entry
            written before slots) or a slot key.

    Raises:
        ValueError: A key that is not a slot.
    """

    __slots__ = ("_by_pcr", "_entries")

    def __init__(self, entries: Mapping[Any, Iterable[bytes]] | None = None) -> None:
        merged: dict[Slot, frozenset[bytes]] = {}
        for key, digests in (entries or {}).items():
            slot = Slot.of(key)
            merged[slot] = merged.get(slot, frozenset()) | frozenset(digests)
        self._entries = dict(sorted(merged.items(), key=lambda item: (item[0].pcr, item[0].key)))
        by_pcr: dict[int, list[tuple[Slot, frozenset[bytes]]]] = {}
        for slot, digests in self._entries.items():
            by_pcr.setdefault(slot.pcr, []).append((slot, digests))
        self._by_pcr = by_pcr

    def __getitem__(self, key: Slot | int) -> frozenset[bytes]:
        if isinstance(key, Slot):
            return self._entries[key]
        if isinstance(key, int) and key in self._by_pcr:
            return frozenset().union(*(digests for _, digests in self._by_pcr[key]))
        raise KeyError(key)

    def __iter__(self) -> Iterator[Slot]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, Slot):
            return key in self._entries
        return isinstance(key, int) and key in self._by_pcr

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Allowlist):
            return self._entries == other._entries
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._entries.items()))

    def __repr__(self) -> str:
        return f"Allowlist({ {s.key: len(d) for s, d in self._entries.items()} })"

    def in_pcr(self, pcr: int) -> frozenset[bytes]:
        """Every digest allowed somewhere in ``pcr``, whatever its slot."""
        return self[pcr] if pcr in self._by_pcr else frozenset()

    @property
    def pcrs(self) -> tuple[int, ...]:
        """The PCRs with an entry."""
        return tuple(sorted(self._by_pcr))

    def allowed_at(
        self, pcr: int, event_type: str, label: str, manifest_types: Iterable[str] = ()
    ) -> frozenset[bytes]:
        """The digests sanctioned for an event at ``(pcr, event_type, label)``.

        Args:
            pcr: The event's PCR.
            event_type: Its type name.
            label: Its stable label.
            manifest_types: The types the class's manifest holds in ``pcr`` (what an
                entry written before slots stands for).
        """
        types = frozenset(manifest_types)
        found: frozenset[bytes] = frozenset()
        for slot, digests in self._by_pcr.get(pcr, ()):
            if slot.admits(pcr, event_type, label, types):
                found |= digests
        return found

    def with_digest(self, slot: Slot, digest: bytes) -> Allowlist:
        """This allowlist with ``digest`` sanctioned in ``slot`` too."""
        return Allowlist({**self._entries, slot: self._entries.get(slot, frozenset()) | {digest}})

    def to_json(self) -> dict[str, list[str]]:
        """``{slot key: [hex digest, ...]}``, digests sorted."""
        return {slot.key: sorted(d.hex() for d in ds) for slot, ds in self._entries.items()}

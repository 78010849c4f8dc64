"""One entry of a TCG event log, as the parser (``_eventlog``) and the data checks share it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pybb.attestation._describe import decode
from pybb.attestation._tcg import EventType, event_type_name

__all__ = ["Event"]

_NO_ACTION = int(EventType.EV_NO_ACTION)


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of an event log.

    Attributes:
        index: The 0-based event number; in a crypto-agile log event 0 is the Spec ID
            event, matching ``tpm2_eventlog``'s ``EventNum``.
        offset: The byte offset of the entry from the start of the log.
        pcr_index: The PCR the event was measured into.
        event_type: The raw ``eventType`` (see :class:`EventType`).
        digests: The digest per bank name (``{"sha256": b"..."}``); empty for the
            Spec ID event, whose legacy digest field is all zeros and names no bank.
        data: The event data bytes.
    """

    index: int
    offset: int
    pcr_index: int
    event_type: int
    digests: Mapping[str, bytes] = field(hash=False)
    data: bytes = field(repr=False)

    @property
    def type_name(self) -> str:
        """The TCG name of the event type, e.g. ``"EV_EFI_ACTION"``."""
        return event_type_name(self.event_type)

    @property
    def measured(self) -> bool:
        """Whether the event was extended into its PCR (``EV_NO_ACTION`` is not)."""
        return self.event_type != _NO_ACTION

    @property
    def description(self) -> str:
        """A human description of the event data; never raises."""
        return decode(self.event_type, self.data).description

    @property
    def label(self) -> str:
        """A stable name of what the event measured (no per-boot addresses)."""
        return decode(self.event_type, self.data).label

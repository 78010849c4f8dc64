"""Parsing TCG PC Client firmware event logs into frozen :class:`EventLog` values.

Two layouts exist (TCG PC Client PFP 1.06 §10.2):

* the legacy SHA-1 log, a sequence of ``TCG_PCClientPCREvent`` (pcrIndex u32,
  eventType u32, 20-byte SHA-1 digest, eventSize u32, event data);
* the crypto-agile log, whose first entry is a legacy-layout ``EV_NO_ACTION`` event
  carrying ``TCG_EfiSpecIDEvent`` ("Spec ID Event03", the algorithm ids and digest
  sizes), followed by ``TCG_PCR_EVENT2`` entries (pcrIndex, eventType,
  ``TPML_DIGEST_VALUES`` = count and (algId u16, digest) pairs, eventSize, data).

Every size read from the log is checked against the bytes that remain before
anything is sliced, so a corrupt size can neither allocate nor loop beyond the input.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pybb.attestation import _eventdata
from pybb.attestation._errors import EventLogError, TruncatedLogError, UnknownAlgorithmError
from pybb.attestation._event import Event
from pybb.attestation._tcg import KNOWN_ALGORITHMS, DigestAlgorithm, EventType

__all__ = [
    "MAX_LOG_FILE_SIZE",
    "MAX_PCR_INDEX",
    "BootComponent",
    "Event",
    "EventLog",
    "EventLogSource",
    "LogFormat",
    "SpecIdEvent",
    "load_event_log",
    "parse_event_log",
    "read_event_log",
]

MAX_PCR_INDEX = 31
"""The highest PCR index a log may name (a TPM 2.0 has at most 32 PCRs)."""

MAX_LOG_FILE_SIZE = 64 * 1024 * 1024
"""The largest event-log file :func:`read_event_log` reads; real logs are < 1 MiB."""

_LEGACY_HEADER = struct.Struct("<II20sI")
_AGILE_HEADER = struct.Struct("<III")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_SPEC_ID_FIXED = struct.Struct("<16sIBBBBI")
_SPEC_ID_ALGORITHM = struct.Struct("<HH")
_SPEC_ID_SIGNATURE = b"Spec ID Event03\x00"
_NO_ACTION = int(EventType.EV_NO_ACTION)
_EMPTY: Mapping[str, bytes] = MappingProxyType({})


class LogFormat(enum.StrEnum):
    """The two layouts of a TCG PC Client event log."""

    CRYPTO_AGILE = "crypto-agile"
    SHA1 = "sha1"


@dataclass(frozen=True, slots=True)
class BootComponent:
    """A measured event seen as a component a policy can allowlist.

    Attributes:
        pcr_index: The PCR it was measured into.
        type_name: The TCG event type name.
        label: The stable description of what was measured.
        digests: Its digest per bank.
        event_index: The event number it came from (not part of the identity).
    """

    pcr_index: int
    type_name: str
    label: str
    digests: Mapping[str, bytes] = field(hash=False)
    event_index: int = field(compare=False)

    @property
    def identity(self) -> tuple[int, str, str]:
        """``(pcr_index, type_name, label)``: the key an allowlist uses."""
        return (self.pcr_index, self.type_name, self.label)


@dataclass(frozen=True, slots=True)
class SpecIdEvent:
    """The ``TCG_EfiSpecIDEvent`` that opens a crypto-agile log.

    Attributes:
        platform_class: 0 for client platforms, 1 for servers.
        spec_version: ``(major, minor, errata)``.
        uintn_size: 1 for 32-bit UINTN firmware, 2 for 64-bit.
        algorithms: The banks the log carries, in declaration order.
        vendor_info: The opaque vendor bytes.
    """

    platform_class: int
    spec_version: tuple[int, int, int]
    uintn_size: int
    algorithms: tuple[DigestAlgorithm, ...]
    vendor_info: bytes


@dataclass(frozen=True, slots=True)
class EventLog:
    """A parsed TCG event log.

    Attributes:
        format: Which layout the log uses.
        algorithms: The banks it carries (SHA-1 alone for a legacy log).
        events: Every entry, the Spec ID event included.
        spec_id: The Spec ID event of a crypto-agile log, ``None`` for a legacy log.
    """

    format: LogFormat
    algorithms: tuple[DigestAlgorithm, ...]
    events: tuple[Event, ...] = field(repr=False)
    spec_id: SpecIdEvent | None

    @property
    def banks(self) -> tuple[str, ...]:
        """The bank names, e.g. ``("sha1", "sha256")``."""
        return tuple(alg.name for alg in self.algorithms)

    @property
    def secure_boot(self) -> bool | None:
        """Whether the firmware measured Secure Boot as enabled, read from verified data only.

        Read from the first ``EV_EFI_VARIABLE_DRIVER_CONFIG`` event in PCR 7 for the
        ``SecureBoot`` variable of the EFI global GUID: ``True`` when its value is 1,
        ``False`` when it is another value or empty (the variable was absent), and
        ``None`` when the log holds no such (decodable) event, or when that event's
        data does not hash to its digest: a PCR vouches for the digest, not for the
        data beside it, so forged data decides nothing.
        """
        found = _eventdata.secure_boot_event(self.events)
        if found is None:
            return None
        event, variable = found
        if not _eventdata.check_event(event).verified:
            return None
        return variable.value[:1] == b"\x01"

    def boot_components(self) -> tuple[BootComponent, ...]:
        """Return every measured event as a :class:`BootComponent`, in log order.

        ``EV_NO_ACTION`` events are left out: they are never extended, so their
        digests attest nothing.
        """
        return tuple(
            BootComponent(e.pcr_index, e.type_name, e.label, e.digests, e.index)
            for e in self.events
            if e.measured
        )


EventLogSource = str | os.PathLike[str] | bytes | bytearray | memoryview | EventLog
"""What :func:`load_event_log` and the replay functions accept."""


def load_event_log(source: EventLogSource) -> EventLog:
    """Return ``source`` as a parsed log: a path is read, bytes are parsed.

    Args:
        source: An :class:`EventLog` (returned as is), raw log bytes, or a path.

    Returns:
        The parsed log.

    Raises:
        EventLogError: The file cannot be read or the log is malformed.
        TypeError: ``source`` is none of the accepted kinds.
    """
    if isinstance(source, EventLog):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        return parse_event_log(source)
    if isinstance(source, str | os.PathLike):
        return read_event_log(source)
    raise TypeError(
        f"cannot load an event log from {type(source).__name__} {source!r}; "
        "pass a path, the log's bytes, or an EventLog"
    )


def read_event_log(path: str | os.PathLike[str]) -> EventLog:
    """Read and parse the event log file at ``path``.

    Args:
        path: For example ``/sys/kernel/security/tpm0/binary_bios_measurements``.

    Returns:
        The parsed log.

    Raises:
        EventLogError: The file cannot be read, is larger than
            :data:`MAX_LOG_FILE_SIZE`, or holds a malformed log.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_LOG_FILE_SIZE + 1)
    except OSError as exc:
        raise EventLogError(
            f"cannot read the event log file {os.fspath(path)!r} ({exc.strerror or exc})",
            hint="check the path and that this process may read it",
        ) from exc
    if len(data) > MAX_LOG_FILE_SIZE:
        raise EventLogError(
            f"the file {os.fspath(path)!r} is larger than {MAX_LOG_FILE_SIZE} bytes",
            hint="pass a TCG event log (they are well under 1 MiB), not another file",
        )
    return parse_event_log(data)


def parse_event_log(data: bytes | bytearray | memoryview) -> EventLog:
    """Parse the bytes of a legacy SHA-1 or crypto-agile TCG event log.

    Args:
        data: The whole log.

    Returns:
        The parsed log.

    Raises:
        TruncatedLogError: The log is empty or ends inside an event.
        UnknownAlgorithmError: A digest algorithm is not declared by the Spec ID
            event, or the Spec ID event declares one this package cannot replay.
        EventLogError: Any other malformation (absurd counts, PCR index, sizes).
    """
    buf = bytes(data)
    if not buf:
        raise TruncatedLogError(
            "the log is empty (0 bytes)",
            event=0,
            offset=0,
            needed=_LEGACY_HEADER.size,
            available=0,
            hint="pass the bytes of a TCG event log; an empty file means none was captured",
        )
    if _is_crypto_agile(buf):
        return _parse_crypto_agile(buf)
    return _parse_legacy(buf)


def _is_crypto_agile(buf: bytes) -> bool:
    if len(buf) < _LEGACY_HEADER.size + len(_SPEC_ID_SIGNATURE):
        return False
    _, event_type, _, size = _LEGACY_HEADER.unpack_from(buf, 0)
    start = _LEGACY_HEADER.size
    return bool(
        event_type == _NO_ACTION
        and size >= len(_SPEC_ID_SIGNATURE)
        and buf[start : start + len(_SPEC_ID_SIGNATURE)] == _SPEC_ID_SIGNATURE
    )


def _need(buf: bytes, pos: int, size: int, what: str, event: int) -> None:
    available = len(buf) - pos
    if size > available:
        raise TruncatedLogError(
            f"the {what} needs {size} bytes but the log ends after {max(available, 0)}",
            event=event,
            offset=pos,
            needed=size,
            available=max(available, 0),
        )


def _check_pcr(pcr_index: int, event: int, offset: int) -> None:
    if pcr_index > MAX_PCR_INDEX:
        raise EventLogError(
            f"PCR index {pcr_index} (0x{pcr_index:08x}) is out of range 0..{MAX_PCR_INDEX}",
            event=event,
            offset=offset,
        )


def _parse_legacy(buf: bytes) -> EventLog:
    events: list[Event] = []
    offset = 0
    end = len(buf)
    sha1 = KNOWN_ALGORITHMS[0x0004]
    while offset < end:
        event, offset = _legacy_event(buf, offset, len(events))
        events.append(event)
    return EventLog(LogFormat.SHA1, (sha1,), tuple(events), None)


def _legacy_event(buf: bytes, offset: int, index: int) -> tuple[Event, int]:
    _need(buf, offset, _LEGACY_HEADER.size, "event header (32 bytes)", index)
    pcr_index, event_type, digest, size = _LEGACY_HEADER.unpack_from(buf, offset)
    _check_pcr(pcr_index, index, offset)
    start = offset + _LEGACY_HEADER.size
    _need(buf, start, size, f"event data (eventSize {size})", index)
    digests = MappingProxyType({"sha1": digest})
    event = Event(index, offset, pcr_index, event_type, digests, buf[start : start + size])
    return event, start + size


def _parse_crypto_agile(buf: bytes) -> EventLog:
    first, spec_id, offset = _spec_id_event(buf)
    layout = _DigestLayout(spec_id.algorithms)
    events = [first]
    end = len(buf)
    while offset < end:
        event, offset = _agile_event(buf, offset, len(events), layout)
        events.append(event)
    return EventLog(LogFormat.CRYPTO_AGILE, spec_id.algorithms, tuple(events), spec_id)


class _DigestLayout:
    """How the digests of an event lie when it carries every bank in declared order.

    Real logs do, so one ``unpack_from`` reads all digests and the event size; any
    other event goes through the field-by-field path that names what is wrong.
    """

    __slots__ = ("by_id", "ids", "names", "whole")

    def __init__(self, algorithms: tuple[DigestAlgorithm, ...]) -> None:
        self.by_id = {alg.algorithm_id: alg for alg in algorithms}
        self.ids = tuple(alg.algorithm_id for alg in algorithms)
        self.names = tuple(alg.name for alg in algorithms)
        self.whole = struct.Struct("<" + "".join(f"H{a.digest_size}s" for a in algorithms) + "I")


def _spec_id_event(buf: bytes) -> tuple[Event, SpecIdEvent, int]:
    pcr_index, event_type, _, size = _LEGACY_HEADER.unpack_from(buf, 0)
    start = _LEGACY_HEADER.size
    _need(buf, start, size, f"Spec ID event data (eventSize {size})", 0)
    minimum = _SPEC_ID_FIXED.size + 1
    if size < minimum:
        raise EventLogError(
            f"the Spec ID event is {size} bytes; it needs at least {minimum}", event=0, offset=start
        )
    fixed = _SPEC_ID_FIXED.unpack_from(buf, start)
    algorithms, vendor_at = _spec_id_algorithms(buf, start, start + size, fixed[-1])
    vendor_size = buf[vendor_at]
    _need(buf, vendor_at + 1, vendor_size, f"Spec ID vendorInfo (vendorInfoSize {vendor_size})", 0)
    # tpm2-tools ends the Spec ID event after vendorInfo even when eventSize is
    # smaller (specid-vendordata.bin); honour whichever end is further.
    end = max(start + size, vendor_at + 1 + vendor_size)
    spec = SpecIdEvent(
        platform_class=fixed[1],
        spec_version=(fixed[3], fixed[2], fixed[4]),
        uintn_size=fixed[5],
        algorithms=algorithms,
        vendor_info=buf[vendor_at + 1 : vendor_at + 1 + vendor_size],
    )
    event = Event(0, 0, pcr_index, event_type, _EMPTY, buf[start:end])
    return event, spec, end


def _spec_id_algorithms(
    buf: bytes, start: int, end: int, count: int
) -> tuple[tuple[DigestAlgorithm, ...], int]:
    count_at = start + _SPEC_ID_FIXED.size - 4
    room = (end - start - _SPEC_ID_FIXED.size - 1) // _SPEC_ID_ALGORITHM.size
    if count == 0 or count > room:
        raise EventLogError(
            f"the Spec ID event declares numberOfAlgorithms {count}; "
            f"it must be between 1 and the {room} that fit in its eventSize",
            event=0,
            offset=count_at,
        )
    algorithms: list[DigestAlgorithm] = []
    pos = start + _SPEC_ID_FIXED.size
    for _ in range(count):
        algorithms.append(_declared_algorithm(buf, pos, algorithms))
        pos += _SPEC_ID_ALGORITHM.size
    return tuple(algorithms), pos


def _declared_algorithm(buf: bytes, pos: int, seen: list[DigestAlgorithm]) -> DigestAlgorithm:
    algorithm_id, digest_size = _SPEC_ID_ALGORITHM.unpack_from(buf, pos)
    known = KNOWN_ALGORITHMS.get(algorithm_id)
    if known is None:
        names = ", ".join(f"0x{a:04x} {k.name}" for a, k in KNOWN_ALGORITHMS.items())
        raise UnknownAlgorithmError(
            f"the Spec ID event declares algorithm id 0x{algorithm_id:04x}, "
            f"which this package cannot replay (it knows {names})",
            event=0,
            offset=pos,
            algorithm_id=algorithm_id,
        )
    if digest_size != known.digest_size:
        raise EventLogError(
            f"the Spec ID event declares {known.name} with digest size {digest_size}; "
            f"{known.name} digests are {known.digest_size} bytes",
            event=0,
            offset=pos,
        )
    if known in seen:
        raise EventLogError(
            f"the Spec ID event declares {known.name} (0x{algorithm_id:04x}) twice",
            event=0,
            offset=pos,
        )
    return known


def _agile_event(buf: bytes, offset: int, index: int, layout: _DigestLayout) -> tuple[Event, int]:
    _need(buf, offset, _AGILE_HEADER.size, "event header (pcrIndex, eventType, count)", index)
    pcr_index, event_type, count = _AGILE_HEADER.unpack_from(buf, offset)
    _check_pcr(pcr_index, index, offset)
    pos = offset + _AGILE_HEADER.size
    if count == len(layout.ids) and pos + layout.whole.size <= len(buf):
        values = layout.whole.unpack_from(buf, pos)
        if values[0:-1:2] == layout.ids:
            every = MappingProxyType(dict(zip(layout.names, values[1:-1:2], strict=True)))
            start = pos + layout.whole.size
            return _with_data(buf, offset, index, pcr_index, event_type, every, start)
    if count > len(layout.ids):
        raise EventLogError(
            f"the digest count {count} exceeds the {len(layout.ids)} algorithm(s) "
            "the Spec ID event declares",
            event=index,
            offset=offset + 8,
        )
    digests, pos = _digests(buf, pos, count, index, layout.by_id)
    _need(buf, pos, 4, "eventSize field", index)
    return _with_data(buf, offset, index, pcr_index, event_type, digests, pos + 4)


def _with_data(
    buf: bytes,
    offset: int,
    index: int,
    pcr_index: int,
    event_type: int,
    digests: Mapping[str, bytes],
    start: int,
) -> tuple[Event, int]:
    """Finish an event whose eventSize field ends at ``start``."""
    (size,) = _U32.unpack_from(buf, start - 4)
    end = start + size
    if end > len(buf):
        _need(buf, start, size, f"event data (eventSize {size})", index)
    event = Event(index, offset, pcr_index, event_type, digests, buf[start:end])
    return event, end


def _digests(
    buf: bytes, pos: int, count: int, index: int, algorithms: dict[int, DigestAlgorithm]
) -> tuple[Mapping[str, bytes], int]:
    digests: dict[str, bytes] = {}
    for _ in range(count):
        _need(buf, pos, 2, "digest algorithm id", index)
        (algorithm_id,) = _U16.unpack_from(buf, pos)
        algorithm = algorithms.get(algorithm_id)
        if algorithm is None:
            raise _undeclared(algorithm_id, index, pos, algorithms)
        if algorithm.name in digests:
            raise EventLogError(
                f"the {algorithm.name} digest (0x{algorithm_id:04x}) appears twice",
                event=index,
                offset=pos,
            )
        pos += 2
        size = algorithm.digest_size
        _need(buf, pos, size, f"{algorithm.name} digest", index)
        digests[algorithm.name] = buf[pos : pos + size]
        pos += size
    return MappingProxyType(digests), pos


def _undeclared(
    algorithm_id: int, index: int, pos: int, algorithms: dict[int, DigestAlgorithm]
) -> UnknownAlgorithmError:
    declared = ", ".join(f"0x{a:04x} {alg.name}" for a, alg in algorithms.items())
    return UnknownAlgorithmError(
        f"digest algorithm id 0x{algorithm_id:04x} is not declared by the Spec ID event "
        f"(it declares {declared})",
        event=index,
        offset=pos,
        algorithm_id=algorithm_id,
    )

"""Replaying the PCR extends an event log records, whole or event by event.

A PCR starts at all zeros and each measured event extends it:
``PCR_new = H(PCR_old || digest)``, separately in every bank. The rules
``tpm2_eventlog`` applies on top of that, and so this module:

* ``EV_NO_ACTION`` events are never extended;
* an ``EV_NO_ACTION`` "StartupLocality" event for PCR 0 sets PCR 0's starting value
  to ``00..00 LL`` (last byte = the locality the TPM was started from, e.g. 3), as
  long as PCR 0 has not been extended yet and no H-CRTM event came first;
* an ``EV_EFI_HCRTM_EVENT`` for PCR 0 means the H-CRTM sequence started PCR 0 at
  ``00..04`` (TPM 2.0 Library Part 1 §34.3), and then extends it as usual.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pybb.attestation._errors import EventLogError, UnknownAlgorithmError
from pybb.attestation._eventlog import Event, EventLog, EventLogSource, load_event_log
from pybb.attestation._tcg import DigestAlgorithm, EventType, HashFunction, hash_constructor

__all__ = ["PcrValues", "ReplayStep", "Replayer", "iter_replay", "replay"]

PcrValues = dict[str, dict[int, bytes]]
"""``{bank: {pcr_index: value}}``, banks named as ``tpm2_eventlog`` names them."""

_LOCALITY_SIGNATURE = b"StartupLocality\x00"
_NO_ACTION = int(EventType.EV_NO_ACTION)
_HCRTM = int(EventType.EV_EFI_HCRTM_EVENT)
_HCRTM_LOCALITY = 4


def _extend(hasher: HashFunction, old: bytes, digest: bytes) -> bytes:
    """One PCR extend: ``H(old || digest)``."""
    return hasher(old + digest).digest()


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """The state of one PCR right after one event was replayed.

    Attributes:
        event: The event just replayed.
        extended: Whether the event extended its PCR (``False`` for ``EV_NO_ACTION``).
        values: The value of ``event.pcr_index`` per bank after the event, for each
            bank in which that PCR has a value yet.
    """

    event: Event
    extended: bool
    values: Mapping[str, bytes] = field(hash=False)


class Replayer:
    """Replays events one at a time and keeps the PCR values of every bank.

    Feed it the events of a log in order; after each :meth:`feed` the returned
    :class:`ReplayStep` and :meth:`pcrs` tell the state, so a caller can name the
    first event after which a PCR stops matching a reference.

    Args:
        algorithms: The banks to replay, e.g. ``EventLog.algorithms``.

    Raises:
        UnknownAlgorithmError: This Python's ``hashlib`` cannot compute a bank's hash.
    """

    def __init__(self, algorithms: Iterable[DigestAlgorithm]) -> None:
        self._algorithms = {alg.name: alg for alg in algorithms}
        self._hashers = {name: _hasher_for(alg) for name, alg in self._algorithms.items()}
        self._values: PcrValues = {name: {} for name in self._algorithms}
        self._pcr0_extended = False
        self._hcrtm_seen = False

    @classmethod
    def for_log(cls, log: EventLog) -> Replayer:
        """Return a replayer for the banks ``log`` declares."""
        return cls(log.algorithms)

    @property
    def banks(self) -> tuple[str, ...]:
        """The bank names this replayer keeps."""
        return tuple(self._algorithms)

    def feed(self, event: Event) -> ReplayStep:
        """Replay one event and return the state of its PCR afterwards.

        Raises:
            EventLogError: The event carries a digest for a bank this replayer lacks.
        """
        extended = self.extend(event)
        pcr = event.pcr_index
        values = {bank: v[pcr] for bank, v in self._values.items() if pcr in v}
        return ReplayStep(event, extended, MappingProxyType(values))

    def pcrs(self) -> PcrValues:
        """Return a copy of the PCR values, PCRs in ascending order.

        A bank appears once one of its PCRs has a value, as in ``tpm2_eventlog``'s
        output: a bank the log declares but no event carries a digest for is left out.
        """
        return {
            bank: dict(sorted(values.items())) for bank, values in self._values.items() if values
        }

    def extend(self, event: Event) -> bool:
        """Fold one event into the PCRs; False for an event that extends none (EV_NO_ACTION)."""
        pcr = event.pcr_index
        if event.event_type == _NO_ACTION:
            if pcr == 0 and event.data.startswith(_LOCALITY_SIGNATURE):
                self._start_locality(event.data)
            return False
        if pcr == 0:
            if event.event_type == _HCRTM:
                self._hcrtm_seen = True
                self._start_pcr0(_HCRTM_LOCALITY)
            self._pcr0_extended = True
        for bank, digest in event.digests.items():
            values = self._bank(bank, event)
            old = values.get(pcr)
            if old is None:
                old = bytes(len(digest))
            values[pcr] = _extend(self._hashers[bank], old, digest)
        return True

    def _bank(self, bank: str, event: Event) -> dict[int, bytes]:
        values = self._values.get(bank)
        if values is None:
            raise EventLogError(
                f"the event carries a {bank} digest but this replayer keeps only "
                f"{', '.join(self._values) or 'no banks'}",
                event=event.index,
                offset=event.offset,
                hint="build the Replayer from the log the event came from (Replayer.for_log)",
            )
        return values

    def _start_locality(self, data: bytes) -> None:
        if len(data) > len(_LOCALITY_SIGNATURE) and not self._hcrtm_seen:
            self._start_pcr0(data[len(_LOCALITY_SIGNATURE)])

    def _start_pcr0(self, locality: int) -> None:
        if self._pcr0_extended:
            return
        for bank, alg in self._algorithms.items():
            self._values[bank][0] = bytes(alg.digest_size - 1) + bytes((locality,))


def _hasher_for(alg: DigestAlgorithm) -> HashFunction:
    constructor = hash_constructor(alg.name)
    if constructor is None:
        raise UnknownAlgorithmError(
            f"this Python's hashlib cannot compute {alg.name} "
            f"(algorithm id 0x{alg.algorithm_id:04x}), so that bank cannot be replayed",
            event=None,
            offset=None,
            algorithm_id=alg.algorithm_id,
            hint="use a Python built against an OpenSSL that provides it",
        )
    return constructor


def replay(log: EventLogSource) -> PcrValues:
    """Replay a whole event log and return the final PCR values of every bank.

    Args:
        log: A path, the log's bytes, or an already parsed :class:`EventLog`.

    Returns:
        ``{bank: {pcr_index: value}}``; a PCR appears once an event extended it or
        a StartupLocality event set it, and a bank once one of its PCRs appears.

    Raises:
        EventLogError: The log cannot be read or parsed, or a bank cannot be hashed.
    """
    parsed = load_event_log(log)
    replayer = Replayer.for_log(parsed)
    apply = replayer.extend
    for event in parsed.events:
        apply(event)
    return replayer.pcrs()


def iter_replay(log: EventLogSource) -> Iterator[ReplayStep]:
    """Replay a log event by event, yielding the state after each event.

    The log is loaded and the banks checked before this returns, so a bad source
    raises here rather than at the first ``next()``.

    Args:
        log: A path, the log's bytes, or an already parsed :class:`EventLog`.

    Returns:
        An iterator of one :class:`ReplayStep` per event, the Spec ID event
        included, in log order.

    Raises:
        EventLogError: The log cannot be read or parsed, or a bank cannot be hashed.
    """
    parsed = load_event_log(log)
    replayer = Replayer.for_log(parsed)
    return map(replayer.feed, parsed.events)

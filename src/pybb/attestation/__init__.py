"""Evidence from TCG event logs: parse, decode and replay measured-boot logs.

The layer the attestation tiers build on::

    from pybb.attestation import read_event_log, replay

    log = read_event_log("/sys/kernel/security/tpm0/binary_bios_measurements")
    pcrs = replay(log)              # {"sha256": {0: b"...", 7: b"..."}, ...}
    log.secure_boot                 # True / False / None (not measured)
    for event in log.events:
        print(event.index, event.pcr_index, event.type_name, event.description)

Both layouts are read: the legacy SHA-1 log and the crypto-agile log (Spec ID
Event03) with any of sha1, sha256, sha384, sha512, sm3_256 (and sha3) banks.
Replay follows ``tpm2_eventlog``: ``EV_NO_ACTION`` is not extended and a
StartupLocality event starts PCR 0 at the locality. :class:`Replayer` and
:func:`iter_replay` replay event by event. A malformed log raises
:class:`EventLogError` naming the event number and byte offset; descriptions of
EFI structures never raise.
"""

from pybb.attestation._devicepath import device_path_to_text
from pybb.attestation._errors import EventLogError, TruncatedLogError, UnknownAlgorithmError
from pybb.attestation._eventlog import (
    MAX_LOG_FILE_SIZE,
    MAX_PCR_INDEX,
    BootComponent,
    Event,
    EventLog,
    EventLogSource,
    LogFormat,
    SpecIdEvent,
    load_event_log,
    parse_event_log,
    read_event_log,
)
from pybb.attestation._replay import PcrValues, Replayer, ReplayStep, iter_replay, replay
from pybb.attestation._types import KNOWN_ALGORITHMS, DigestAlgorithm, EventType, event_type_name

__all__ = [
    "KNOWN_ALGORITHMS",
    "MAX_LOG_FILE_SIZE",
    "MAX_PCR_INDEX",
    "BootComponent",
    "DigestAlgorithm",
    "Event",
    "EventLog",
    "EventLogError",
    "EventLogSource",
    "EventType",
    "LogFormat",
    "PcrValues",
    "ReplayStep",
    "Replayer",
    "SpecIdEvent",
    "TruncatedLogError",
    "UnknownAlgorithmError",
    "device_path_to_text",
    "event_type_name",
    "iter_replay",
    "load_event_log",
    "parse_event_log",
    "read_event_log",
    "replay",
]

"""Remote attestation on pybb: TCG event logs, evidence, policy, and the decision tree.

The decision tree (an application of ``pybb``; see ``README.md`` beside this file)::

    from pybb.attestation import Attestation, generate_fleet, load_fleet

    fleet = generate_fleet(200, seed=0)          # or load_fleet("fleet/")
    with Attestation(fleet, store="sqlite:///attest.db") as attestation:
        report = attestation.run()               # resumes an interrupted run
    report.counts(), report.escalations(), report.accuracy

Each device is an entry with one component per PCR its class's policy covers, the
cheap check "quoted value equals the reference value" its condition; ``on_fail`` goes
to :class:`AttributionTier`, ``on_pass`` to :class:`VerificationTier`; what neither can
pass is escalated with a :class:`TierReport`.

The event-log layer the tiers build on::

    from pybb.attestation import read_event_log, replay

    log = read_event_log("/sys/kernel/security/tpm0/binary_bios_measurements")
    pcrs = replay(log)              # {"sha256": {0: b"...", 7: b"..."}, ...}
    log.secure_boot                 # True / False / None (not measured, or forged)
    check_event(log.events[5])      # does the data hash to the digest? (DataCheck)
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
from pybb.attestation._eventdata import DataCheck, DataStatus, check_event
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
from pybb.attestation._evidence import (
    MAX_EVIDENCE_FILE_SIZE,
    Evidence,
    load_evidence,
    parse_evidence,
)
from pybb.attestation._evidence_dir import EVENT_LOG_CAP, Caps, load_evidence_dir, verify_device
from pybb.attestation._fleet import Fleet, load_fleet, save_fleet
from pybb.attestation._fleet_errors import EvidenceError, FleetError, PolicyError
from pybb.attestation._generate import TRUTH_KINDS, builtin_classes, builtin_logs, generate_fleet
from pybb.attestation._policy import DeviceClass, Policy, load_class
from pybb.attestation._quote import (
    MAX_AK_FILE_SIZE,
    AttestationKey,
    QuoteError,
    load_attestation_key,
)
from pybb.attestation._registry import NONCE_TTL, REGISTRY_BOARD, EnrolledAk, Registry
from pybb.attestation._replay import PcrValues, Replayer, ReplayStep, iter_replay, replay
from pybb.attestation._report import (
    DeviceOutcome,
    DeviceResult,
    Finding,
    FleetReport,
    GroundTruth,
    Reason,
    Tier,
    TierReport,
)
from pybb.attestation._slots import Allowlist, Slot
from pybb.attestation._tcg import KNOWN_ALGORITHMS, DigestAlgorithm, EventType, event_type_name
from pybb.attestation._tpm import (
    TpmFormatError,
    TpmsAttest,
    TpmtSignature,
    parse_tpm_public,
    parse_tpms_attest,
    parse_tpmt_signature,
)
from pybb.attestation._tree import (
    ALLOWLIST,
    FLEET,
    Attestation,
    AttributionTier,
    VerificationTier,
    accept_digest,
    read_allowlist,
)

__all__ = [
    "ALLOWLIST",
    "EVENT_LOG_CAP",
    "FLEET",
    "KNOWN_ALGORITHMS",
    "MAX_AK_FILE_SIZE",
    "MAX_EVIDENCE_FILE_SIZE",
    "MAX_LOG_FILE_SIZE",
    "MAX_PCR_INDEX",
    "NONCE_TTL",
    "REGISTRY_BOARD",
    "TRUTH_KINDS",
    "Allowlist",
    "Attestation",
    "AttestationKey",
    "AttributionTier",
    "BootComponent",
    "Caps",
    "DataCheck",
    "DataStatus",
    "DeviceClass",
    "DeviceOutcome",
    "DeviceResult",
    "DigestAlgorithm",
    "EnrolledAk",
    "Event",
    "EventLog",
    "EventLogError",
    "EventLogSource",
    "EventType",
    "Evidence",
    "EvidenceError",
    "Finding",
    "Fleet",
    "FleetError",
    "FleetReport",
    "GroundTruth",
    "LogFormat",
    "PcrValues",
    "Policy",
    "PolicyError",
    "QuoteError",
    "Reason",
    "Registry",
    "ReplayStep",
    "Replayer",
    "Slot",
    "SpecIdEvent",
    "Tier",
    "TierReport",
    "TpmFormatError",
    "TpmsAttest",
    "TpmtSignature",
    "TruncatedLogError",
    "UnknownAlgorithmError",
    "VerificationTier",
    "accept_digest",
    "builtin_classes",
    "builtin_logs",
    "check_event",
    "device_path_to_text",
    "event_type_name",
    "generate_fleet",
    "iter_replay",
    "load_attestation_key",
    "load_class",
    "load_event_log",
    "load_evidence",
    "load_evidence_dir",
    "load_fleet",
    "parse_event_log",
    "parse_evidence",
    "parse_tpm_public",
    "parse_tpms_attest",
    "parse_tpmt_signature",
    "read_allowlist",
    "read_event_log",
    "replay",
    "save_fleet",
    "verify_device",
]

from __future__ import annotations

import subprocess
import sys

import pybb.attestation as attestation
from pybb.errors import PybbError

EXPECTED_EXPORTS = [
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


def test_public_names_are_exactly_the_curated_list() -> None:
    assert attestation.__all__ == EXPECTED_EXPORTS
    for name in attestation.__all__:
        assert getattr(attestation, name) is not None


def test_errors_hang_under_the_pybb_root() -> None:
    assert issubclass(attestation.EventLogError, PybbError)
    assert issubclass(attestation.TruncatedLogError, attestation.EventLogError)
    assert issubclass(attestation.UnknownAlgorithmError, attestation.EventLogError)


def test_importing_attestation_loads_no_supervisor() -> None:
    # pybb.attestation is an application of pybb (and so of blackboard); the supervisor
    # is wired in by the human loop, never by the attestation package itself.
    probe = (
        "import sys, pybb.attestation\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'buddhi'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

"""Real evidence for the re-measure tests: EVIDENCE_DIR folders whose quotes a real key signs.

A device's folder holds ``eventlog.bin``, and ``quote.msg`` / ``quote.sig`` over the
log's replay and a nonce, signed with an RSA key (``sign_quote``) that the registry
enrols; ``pybb attest verify`` and ``load_evidence_dir`` verify them as they would a
TPM's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pybb.attestation import DeviceClass, builtin_logs, parse_event_log, replay
from pybb.attestation._quote import sign_quote
from pybb.attestation._tpm import ClockInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attestation"))
from attest_support import with_digests  # the attestation tests' tamperer

GCE = builtin_logs()["gce-ubuntu"]
TAMPERED = with_digests(GCE, parse_event_log(GCE).events[2], b"implant")  # a firmware implant
GOLDEN = DeviceClass.from_log("gce", GCE)
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey = KEY) -> bytes:
    """The public half of ``key``, as ``tpm2_createak -f pem`` writes an AK."""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def quoted(
    folder: Path, log: bytes, nonce: bytes, clock: int, key: rsa.RSAPrivateKey = KEY
) -> tuple[bytes, bytes]:
    """Write the device's evidence: ``log`` and a quote over its replay and ``nonce``."""
    values = replay(log)[GOLDEN.policy.bank]
    selected = {GOLDEN.policy.bank: {p: values[p] for p in GOLDEN.policy.pcrs}}
    message, signature = sign_quote(key, selected, nonce, clock=ClockInfo(clock, 1, 0, True))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eventlog.bin").write_bytes(log)
    (folder / "quote.msg").write_bytes(message)
    (folder / "quote.sig").write_bytes(signature)
    return message, signature

"""Quote verification on made quotes: every scheme, every refusal, and parsers that never crash.

Quotes are made with ``sign_quote`` (and by hand for RSAPSS) over a real log's replay,
so each case differs from a good quote in exactly one thing.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybb.attestation import Reason, builtin_logs, replay
from pybb.attestation._quote import (
    AttestationKey,
    QuoteError,
    check_pcr_digest,
    parse_quote,
    sign_quote,
    verify_signature,
)
from pybb.attestation._tpm import (
    ALG_RSAPSS,
    ALG_RSASSA,
    TpmFormatError,
    TpmtSignature,
    encode_tpmt_signature,
    parse_pcrs_file,
    parse_tpm_public,
    parse_tpms_attest,
    parse_tpmt_signature,
)
from pybb.cli import main

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
P384 = ec.generate_private_key(ec.SECP384R1())
REPLAYED = replay(builtin_logs()["gce-ubuntu"])
SELECTED = {"sha256": {p: REPLAYED["sha256"][p] for p in (0, 1, 2, 3, 4, 5, 6, 7)}}
NONCE = b"\x07" * 32


def test_rsassa_rsapss_and_ecdsa_p384_verify_and_check_the_digest() -> None:
    message, raw = sign_quote(RSA_KEY, SELECTED, NONCE)
    attest, signature = parse_quote(message, raw)
    verify_signature(message, signature, AttestationKey(RSA_KEY.public_key()))
    assert check_pcr_digest(attest, "sha256", REPLAYED) == SELECTED
    pss = RSA_KEY.sign(
        message,
        padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32),
        hashes.SHA256(),
    )
    signed = parse_tpmt_signature(encode_tpmt_signature(TpmtSignature(ALG_RSAPSS, "sha256", pss)))
    verify_signature(message, signed, AttestationKey(RSA_KEY.public_key()))
    message, raw = sign_quote(P384, SELECTED, NONCE, hash_name="sha384")
    attest, signature = parse_quote(message, raw)
    assert (signature.algorithm_name, signature.hash) == ("ECDSA", "sha384")
    verify_signature(message, signature, AttestationKey(P384.public_key()))
    assert check_pcr_digest(attest, "sha384", REPLAYED) == SELECTED


def test_a_signature_that_does_not_fit_the_key_is_refused() -> None:
    message, raw = sign_quote(RSA_KEY, SELECTED, NONCE)
    _, signature = parse_quote(message, raw)
    cases = [
        (AttestationKey(P384.public_key()), "RSA"),  # an RSA signature, an EC key
        (AttestationKey(RSA_KEY.public_key(), ALG_RSAPSS, "sha256"), "restricted to RSAPSS"),
        (AttestationKey(RSA_KEY.public_key(), ALG_RSASSA, "sha384"), "restricted to RSASSA"),
        (AttestationKey(rsa.generate_private_key(65537, 3072).public_key()), "bytes"),
    ]
    for key, words in cases:
        with pytest.raises(QuoteError, match=words) as caught:
            verify_signature(message, signature, key)
        assert caught.value.reason is Reason.BAD_SIGNATURE


def test_a_log_that_does_not_give_the_digest_names_the_pcr_with_quote_pcrs() -> None:
    message, raw = sign_quote(RSA_KEY, SELECTED, NONCE)
    attest, _ = parse_quote(message, raw)
    other = replay(builtin_logs()["arch-linux"])
    with pytest.raises(QuoteError) as caught:
        check_pcr_digest(attest, "sha256", other, pcrs=SELECTED)
    problem = caught.value.problem
    assert caught.value.reason is Reason.PCR_DIGEST_MISMATCH
    assert "PCR 0 (sha256)" in problem and "PCR 7 (sha256)" in problem
    with pytest.raises(QuoteError, match=r"give quote\.pcrs"):
        check_pcr_digest(attest, "sha256", other)
    forged = {"sha256": {**SELECTED["sha256"], 4: bytes(32)}}
    with pytest.raises(QuoteError, match="does not give the signed pcrDigest either"):
        check_pcr_digest(attest, "sha256", other, pcrs=forged)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_the_parsers_raise_only_their_own_error_on_any_bytes(data: bytes) -> None:
    for parse in (parse_tpms_attest, parse_tpmt_signature, parse_tpm_public, parse_pcrs_file):
        with contextlib.suppress(TpmFormatError):
            parse(data)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=132), st.integers(min_value=0, max_value=255))
def test_a_corrupted_quote_is_refused_as_unreadable_or_unsigned(at: int, value: int) -> None:
    message, raw = sign_quote(RSA_KEY, SELECTED, NONCE)
    corrupted = bytearray(message)
    corrupted[at % len(message)] = value
    if bytes(corrupted) == message:
        return
    key = AttestationKey(RSA_KEY.public_key())

    def check() -> None:
        _, signature = parse_quote(bytes(corrupted), raw)
        verify_signature(bytes(corrupted), signature, key)

    with pytest.raises(QuoteError) as caught:
        check()
    assert caught.value.reason in (Reason.BAD_QUOTE, Reason.BAD_SIGNATURE)


# -- the command line, without a TPM ------------------------------------------------------


def _pem(path: Path, key: rsa.RSAPrivateKey) -> Path:
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def test_enroll_revoke_challenge_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'r.db'}"]
    pem = _pem(tmp_path / "AK.pem", RSA_KEY)
    assert main(["attest", "enroll", "d1", "--ak", str(pem), "--class", "c", *store]) == 0
    assert "version 1" in capsys.readouterr().out
    assert main(["attest", "enroll", "d1", "--ak", str(pem), "--class", "c", *store]) == 2
    assert "already enrolled" in capsys.readouterr().err
    args = ["attest", "enroll", "d1", "--ak", str(pem), "--class", "c", "--replace", *store]
    assert main(args) == 0
    assert "version 2" in capsys.readouterr().out
    assert main(["attest", "revoke", "d1", *store]) == 0
    assert main(["attest", "revoke", "d1", *store]) == 2
    capsys.readouterr()
    assert main(["attest", "challenge", "d1", *store]) == 0
    nonce = capsys.readouterr().out.strip()
    assert len(bytes.fromhex(nonce)) == 32
    assert main(["attest", "challenge", "d1", "--ttl", "0", *store]) == 2


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (
            RSA_KEY.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            "not a private key",
        ),
        (b"hello", "neither a PEM public key nor a TPMT_PUBLIC"),
        (b"", "neither a PEM"),
    ],
)
def test_enroll_refuses_a_file_that_is_not_a_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, words: str
) -> None:
    path = tmp_path / "AK.pem"
    path.write_bytes(content)
    store = ["--store", f"sqlite:///{tmp_path / 'r.db'}"]
    assert main(["attest", "enroll", "d1", "--ak", str(path), "--class", "c", *store]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and words in err


def test_verify_refuses_what_is_not_an_evidence_dir_and_the_old_forms_still_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'r.db'}"]
    assert main(["attest", "verify", str(tmp_path / "missing"), *store]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["attest", "verify", str(tmp_path / "empty"), *store]) == 2
    assert "no device folders" in capsys.readouterr().err
    from pybb.cli import build_parser

    parsed: argparse.Namespace = build_parser().parse_args(["attest", "--demo", "3"])
    assert parsed.demo == 3 and parsed.folder is None
    parsed = build_parser().parse_args(["attest", "./verify"])  # a fleet folder named verify
    assert parsed.folder == Path("verify")
    parsed = build_parser().parse_args(["attest", "verify", "ev"])
    assert parsed.evidence_dir == Path("ev")

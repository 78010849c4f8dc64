"""Real-hardware quotes (GCE Shielded-VM vTPMs): parse, verify the signature, check pcrDigest.

The files (``quotes/``, copied unchanged from go-attestation and go-tpm-tools with
their licences; ``quotes/README.md`` says what each field is) carry the AK's
TPMT_PUBLIC, TPMS_ATTEST, TPMT_SIGNATURE, the PCR values and the event log. The
protobuf files are read with a few lines of wire-format parsing here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pybb.attestation import Reason, parse_event_log, replay
from pybb.attestation._quote import (
    AttestationKey,
    QuoteError,
    check_pcr_digest,
    load_attestation_key,
    parse_quote,
    verify_signature,
)
from pybb.attestation._tpm import TpmFormatError, parse_tpm_public, pcr_digest

QUOTES = Path(__file__).resolve().parent / "quotes"


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """A protobuf message's (field number, value) pairs: varints as int, the rest as bytes."""
    out: list[tuple[int, Any]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((number, value))
    return out


_PB_BANKS = {4: "sha1", 11: "sha256", 12: "sha384"}


def _cos(name: str) -> tuple[bytes, list[tuple[bytes, bytes, str, dict[int, bytes]]], bytes]:
    """(ak_pub, [(quote, raw_sig, bank, pcrs)], event_log) of a go-tpm-tools attestation."""
    fields = _fields((QUOTES / name).read_bytes())
    ak = next(v for n, v in fields if n == 1)
    log = next(v for n, v in fields if n == 3)
    quotes = []
    for quote in (v for n, v in fields if n == 2):
        parts = dict(_fields(quote))
        pcr_fields = _fields(parts[3])
        bank = _PB_BANKS[next(v for n, v in pcr_fields if n == 1)]
        values = {}
        for entry in (v for n, v in pcr_fields if n == 2):
            kv = dict(_fields(entry))
            values[kv.get(1, 0)] = kv[2]
        quotes.append((parts[1], parts[2], bank, values))
    return ak, quotes, log


def _windows() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((QUOTES / "windows_gcp_shielded_vm.json").read_text())
    return data


@pytest.mark.parametrize(
    ("name", "nonce"), [("gce-cos-85-nonce9009.pb", b"\x90\x09"), ("gce-cos-85-no-nonce.pb", b"")]
)
def test_cos_quotes_verify_in_every_bank(name: str, nonce: bytes) -> None:
    ak_pub, quotes, log = _cos(name)
    public = parse_tpm_public(ak_pub)
    assert (public.scheme_hash, public.key.key_size) == ("sha256", 2048)
    ak = AttestationKey(public.key, public.scheme, public.scheme_hash)
    replayed = replay(parse_event_log(log))
    assert sorted(bank for *_, bank, _ in quotes) == ["sha1", "sha256", "sha384"]
    for message, raw_sig, bank, values in quotes:
        attest, signature = parse_quote(message, raw_sig)
        assert attest.extra_data == nonce
        assert signature.hash == "sha256" and signature.algorithm_name == "RSASSA"
        verify_signature(message, signature, ak)
        assert [s.bank for s in attest.selection] == [bank]
        assert attest.selection[0].pcrs == tuple(range(24))
        assert pcr_digest(attest.selection, {bank: values}, "sha256") == attest.pcr_digest
        # The firmware log gives every PCR it measures; PCR 10 is IMA's (not in it).
        for pcr in (*range(10), *range(11, 17), 23):
            assert replayed[bank].get(pcr, bytes(len(values[pcr]))) == values[pcr], pcr
        with_ima = {bank: {**replayed[bank], 10: values[10]}}
        assert check_pcr_digest(attest, "sha256", with_ima)[bank] == values
        # Without IMA's value the log does not give the digest, and quote.pcrs names PCR 10.
        with pytest.raises(QuoteError) as caught:
            check_pcr_digest(attest, "sha256", replayed, pcrs={bank: values})
        assert caught.value.reason is Reason.PCR_DIGEST_MISMATCH
        assert "PCR 10 (" in caught.value.problem and "PCR 0 (" not in caught.value.problem


def test_a_flipped_byte_in_a_real_quote_fails_the_signature() -> None:
    ak_pub, quotes, _ = _cos("gce-cos-85-nonce9009.pb")
    public = parse_tpm_public(ak_pub)
    ak = AttestationKey(public.key, public.scheme, public.scheme_hash)
    message, raw_sig, *_ = quotes[0]
    flipped = message[:-1] + bytes([message[-1] ^ 1])
    _, signature = parse_quote(flipped, raw_sig)
    with pytest.raises(QuoteError) as caught:
        verify_signature(flipped, signature, ak)
    assert caught.value.reason is Reason.BAD_SIGNATURE
    # The same bytes with the AK from the other real file: another key, refused too.
    windows = parse_tpm_public(base64.b64decode(_windows()["AK"]["Public"]))
    with pytest.raises(QuoteError):
        verify_signature(message, signature, AttestationKey(windows.key, 0x0014, "sha256"))


def test_windows_sha1_quote_verifies_only_with_the_key_that_fixes_sha1() -> None:
    data = _windows()
    ak_bytes = base64.b64decode(data["AK"]["Public"])
    message = base64.b64decode(data["Quote"]["Quote"])
    raw_sig = base64.b64decode(data["Quote"]["Signature"])
    ak = load_attestation_key(ak_bytes, "AK.Public")
    assert ak.scheme_hash == "sha1"
    attest, signature = parse_quote(message, raw_sig)
    assert signature.hash == "sha1" and attest.extra_data == b""
    verify_signature(message, signature, ak)
    values = {p["Index"]: base64.b64decode(p["Digest"]) for p in data["Log"]["PCRs"]}
    assert pcr_digest(attest.selection, {"sha1": values}, "sha1") == attest.pcr_digest
    replayed = replay(parse_event_log(base64.b64decode(data["Log"]["Raw"])))["sha1"]
    for pcr in (*range(17), 23):
        assert replayed.get(pcr, bytes(20)) == values[pcr], pcr
    # The log accounts for the whole quote: PCRs 17-22 are at their initial all-ones.
    assert check_pcr_digest(attest, "sha1", {"sha1": replayed})["sha1"] == values
    # The same key as a PEM does not say it is bound to SHA-1: a SHA-1 quote is refused.
    pem = load_attestation_key(ak.pem.encode())
    with pytest.raises(QuoteError, match="SHA-1"):
        verify_signature(message, signature, pem)


@pytest.mark.parametrize(
    ("mutate", "file", "words"),
    [
        (lambda m, s: (m[:10], s), "quote.msg", "truncated"),
        (lambda m, s: (b"\x00" + m[1:], s), "quote.msg", "magic"),
        (lambda m, s: (m[:4] + b"\x80\x17" + m[6:], s), "quote.msg", "not a quote"),
        (lambda m, s: (m + b"\x00", s), "quote.msg", "follow the end"),
        (lambda m, s: (m, s[:40]), "quote.sig", "truncated"),
        (lambda m, s: (m, b"\x00\x05" + s[2:]), "quote.sig", "unsupported algorithm"),
        (lambda m, s: (m, s[:2] + b"\x00\x99" + s[4:]), "quote.sig", "not a supported hash"),
        (lambda m, s: (b"garbage" * 3, s), "quote.msg", "magic"),
    ],
)
def test_bad_quote_files_name_the_file_and_problem(mutate: Any, file: str, words: str) -> None:
    data = _windows()
    message = base64.b64decode(data["Quote"]["Quote"])
    raw_sig = base64.b64decode(data["Quote"]["Signature"])
    bad_message, bad_sig = mutate(message, raw_sig)
    with pytest.raises(QuoteError) as caught:
        parse_quote(bad_message, bad_sig, device="dev-1")
    error = caught.value
    assert (error.reason, error.path, error.device) == (Reason.BAD_QUOTE, file, "dev-1")
    assert words in str(error)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n", "not a private key"),
        (b"-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n", "not a PEM"),
        (b"\x00\x01garbage", "neither a PEM"),
        (b"x" * 70_000, "more than"),
    ],
)
def test_an_ak_file_that_is_not_a_public_key_is_refused(data: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        load_attestation_key(data, "AK.pem")


def test_tpm_public_parser_refuses_garbage() -> None:
    ak_pub, *_ = _cos("gce-cos-85-no-nonce.pb")
    with pytest.raises(TpmFormatError, match="truncated"):
        parse_tpm_public(ak_pub[:100])
    public = parse_tpm_public(ak_pub)
    assert public.name is not None
    assert public.name[2:] == hashlib.sha256(ak_pub).digest()


def test_the_quote_files_are_the_unchanged_copies_their_readme_lists() -> None:
    # quotes/README.md's table gives each file's sha256 as copied from its repository
    # (and from shared/attestation/quotes, beside the repository, when it is there).
    listed = dict(re.findall(r"^\| `([^`]+)`.*\| ([0-9a-f]{64}) \|$", _readme(), re.MULTILINE))
    assert len(listed) == 5
    for name, digest in listed.items():
        assert hashlib.sha256((QUOTES / name).read_bytes()).hexdigest() == digest, name
    shared = Path(__file__).resolve().parents[3].parent / "shared" / "attestation" / "quotes"
    for name in listed if shared.is_dir() else ():
        assert (shared / name).read_bytes() == (QUOTES / name).read_bytes(), name


def _readme() -> str:
    return (QUOTES / "README.md").read_text(encoding="utf-8")

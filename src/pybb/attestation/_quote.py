"""Quote verification: an AK's signature over TPMS_ATTEST, and its pcrDigest against a log.

What a verified quote proves (TPM 2.0 Library Part 3, TPM2_Quote): the TPM holding the
AK's private key signed ``TPMS_ATTEST``; its ``extraData`` is the nonce the verifier
gave (freshness, checked by :mod:`pybb.attestation._registry`), and its ``pcrDigest``
is ``H(selected PCR values)`` with H the signature's hash. The event log is then
believed for exactly the PCRs whose replayed values give that digest.

:class:`QuoteError` (an :class:`EvidenceError` carrying a :class:`Reason`) is what each
check raises; the device is escalated for that reason and the fleet runs on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from pybb.attestation._fleet_errors import EvidenceError
from pybb.attestation._report import Reason
from pybb.attestation._tpm import (
    ALG_ECDSA,
    ALG_RSAPSS,
    ALG_RSASSA,
    ClockInfo,
    PcrSelection,
    TpmFormatError,
    TpmsAttest,
    TpmtSignature,
    encode_tpms_attest,
    encode_tpmt_signature,
    parse_tpm_public,
    parse_tpms_attest,
    parse_tpmt_signature,
    pcr_digest,
)

__all__ = [
    "MAX_AK_FILE_SIZE",
    "AttestationKey",
    "QuoteError",
    "check_pcr_digest",
    "load_attestation_key",
    "parse_quote",
    "sign_quote",
    "verify_signature",
]

MAX_AK_FILE_SIZE: Final = 64 * 1024
"""The largest AK file read (a PEM public key is under 1 KiB)."""

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha1": hashes.SHA1,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
_SCHEME_NAMES = {ALG_RSASSA: "RSASSA", ALG_RSAPSS: "RSAPSS", ALG_ECDSA: "ECDSA"}
_DRTM = range(17, 23)


class QuoteError(EvidenceError):
    """A quote the verifier refuses, and why (its :attr:`reason`)."""

    def __init__(
        self,
        reason: Reason,
        problem: str,
        *,
        path: str | None = None,
        field: str | None = None,
        device: str | None = None,
        hint: str = "collect the evidence again with a fresh nonce (pybb attest challenge)",
    ) -> None:
        super().__init__(problem, path=path, field=field, device=device, hint=hint, reason=reason)


@dataclass(frozen=True, slots=True)
class AttestationKey:
    """A device's enrolled attestation key: its public key and the scheme it is bound to.

    Attributes:
        key: The public key (RSA or NIST-curve EC).
        scheme: The signing scheme its TPMT_PUBLIC restricts it to, when known
            (``None`` for a PEM, which does not say).
        scheme_hash: That scheme's hash. SHA-1 signatures are accepted only from a key
            whose public area fixes SHA-1: a PEM key never accepts them.
    """

    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    scheme: int | None = None
    scheme_hash: str | None = None

    @property
    def pem(self) -> str:
        """The key as a PEM SubjectPublicKeyInfo (as ``tpm2_createak -f pem`` writes it)."""
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the DER SubjectPublicKeyInfo, in hex: the AK's identity on the board."""
        der = self.key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return hashlib.sha256(der).hexdigest()

    def to_json(self) -> dict[str, object]:
        """The key as JSON for the board."""
        return {"pem": self.pem, "scheme": self.scheme, "scheme_hash": self.scheme_hash}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> AttestationKey:
        """Read what :meth:`to_json` wrote."""
        key = load_attestation_key(str(data["pem"]).encode(), "the board's AK")
        scheme = data.get("scheme")
        scheme_hash = data.get("scheme_hash")
        return cls(
            key.key,
            scheme if isinstance(scheme, int) else None,
            scheme_hash if isinstance(scheme_hash, str) else None,
        )


def load_attestation_key(data: bytes, source: str = "AK.pem") -> AttestationKey:
    """Read an AK: a PEM public key (``tpm2_createak -f pem``) or a TPM2B/TPMT_PUBLIC.

    Raises:
        ValueError: Naming ``source`` and what is wrong (a private key, a certificate,
            an unsupported key type, garbage).
    """
    if len(data) > MAX_AK_FILE_SIZE:
        raise ValueError(f"{source}: {len(data)} bytes, more than {MAX_AK_FILE_SIZE}")
    if data.lstrip().startswith(b"-----BEGIN"):
        head = data.lstrip().split(b"\n", 1)[0].decode("ascii", "replace").strip()
        if head != "-----BEGIN PUBLIC KEY-----":
            raise ValueError(
                f"{source}: starts with {head!r}, not '-----BEGIN PUBLIC KEY-----'; give the "
                "AK's public key (tpm2_createak -f pem -u AK.pem), not a private key or a "
                "certificate"
            )
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise ValueError(f"{source}: not a PEM public key ({exc})") from None
        if isinstance(key, rsa.RSAPublicKey):
            if key.key_size < 2048:
                raise ValueError(f"{source}: an RSA key of {key.key_size} bits; 2048 or more")
            return AttestationKey(key)
        if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in (
            "secp256r1",
            "secp384r1",
            "secp521r1",
        ):
            return AttestationKey(key)
        raise ValueError(
            f"{source}: a {type(key).__name__} key; an AK is RSA (2048 bits or more) or "
            "ECC on NIST P-256/P-384/P-521"
        )
    try:
        public = parse_tpm_public(data)
    except TpmFormatError as exc:
        raise ValueError(f"{source}: neither a PEM public key nor a TPMT_PUBLIC ({exc})") from None
    return AttestationKey(public.key, public.scheme, public.scheme_hash)


def parse_quote(
    message: bytes, signature: bytes, *, device: str | None = None
) -> tuple[TpmsAttest, TpmtSignature]:
    """Parse ``quote.msg`` and ``quote.sig``.

    Raises:
        QuoteError: ``bad_quote``, naming the file, the field and the byte offset.
    """
    parsed: list[object] = []
    for name, data, parse in (
        ("quote.msg", message, parse_tpms_attest),
        ("quote.sig", signature, parse_tpmt_signature),
    ):
        try:
            parsed.append(parse(data))
        except TpmFormatError as exc:
            kind = "uses an unsupported algorithm" if exc.unsupported else "cannot be read"
            raise QuoteError(
                Reason.BAD_QUOTE,
                f"{kind}: {exc}",
                path=name,
                device=device,
                hint=f"give {name} as tpm2_quote writes it (-m quote.msg -s quote.sig, "
                "RSASSA/RSAPSS/ECDSA over SHA-256 or SHA-384)",
            ) from None
    attest, sig = parsed
    assert isinstance(attest, TpmsAttest)
    assert isinstance(sig, TpmtSignature)
    return attest, sig


def verify_signature(
    message: bytes, signature: TpmtSignature, ak: AttestationKey, *, device: str | None = None
) -> None:
    """Check that ``ak`` signed ``message`` (the TPMS_ATTEST bytes) with ``signature``.

    Raises:
        QuoteError: ``bad_signature``: the scheme does not fit the key, SHA-1 from a key
            that does not fix it, or the signature does not verify.
    """

    def refuse(problem: str) -> QuoteError:
        return QuoteError(
            Reason.BAD_SIGNATURE,
            problem,
            path="quote.sig",
            device=device,
            hint="the quote was not signed by this device's enrolled AK: quarantine the "
            "device, or re-enrol its AK if it was legitimately replaced",
        )

    name = _SCHEME_NAMES[signature.algorithm]
    if ak.scheme is not None and (ak.scheme, ak.scheme_hash) != (
        signature.algorithm,
        signature.hash,
    ):
        raise refuse(
            f"signed with {name}-{signature.hash}, but the AK is restricted to "
            f"{_SCHEME_NAMES.get(ak.scheme, hex(ak.scheme))}-{ak.scheme_hash}"
        )
    if signature.hash == "sha1" and ak.scheme_hash != "sha1":
        raise refuse(
            "signed with SHA-1, which is accepted only from an AK whose public area "
            "restricts it to SHA-1 (enrol its TPMT_PUBLIC); quote with -g sha256"
        )
    chosen = _HASHES[signature.hash]()
    try:
        if signature.algorithm == ALG_ECDSA:
            if not isinstance(ak.key, ec.EllipticCurvePublicKey):
                raise refuse("an ECDSA signature, but the enrolled AK is an RSA key")
            der = encode_dss_signature(signature.r, signature.s)
            ak.key.verify(der, message, ec.ECDSA(chosen))
            return
        if not isinstance(ak.key, rsa.RSAPublicKey):
            raise refuse(f"an {name} signature, but the enrolled AK is an EC key")
        if len(signature.signature) != ak.key.key_size // 8:
            raise refuse(
                f"the signature has {len(signature.signature)} bytes; the "
                f"{ak.key.key_size}-bit AK signs {ak.key.key_size // 8}"
            )
        pad: padding.AsymmetricPadding = (
            padding.PKCS1v15()
            if signature.algorithm == ALG_RSASSA
            else padding.PSS(mgf=padding.MGF1(chosen), salt_length=padding.PSS.AUTO)
        )
        ak.key.verify(signature.signature, message, pad, chosen)
    except InvalidSignature:
        raise refuse(
            f"the {name}-{signature.hash} signature does not verify with the enrolled AK "
            f"(the quote was altered, or another key signed it)"
        ) from None


def initial_value(bank: str, pcr: int) -> bytes:
    """A PCR's value before anything is extended: zeros, or ones for the DRTM PCRs 17-22."""
    size = hashlib.new(bank).digest_size
    return (b"\xff" if pcr in _DRTM else b"\x00") * size


def check_pcr_digest(
    attest: TpmsAttest,
    hash_name: str,
    replayed: dict[str, dict[int, bytes]],
    *,
    pcrs: dict[str, dict[int, bytes]] | None = None,
    device: str | None = None,
) -> dict[str, dict[int, bytes]]:
    """Check the quote's pcrDigest against the log's replay; return the quoted PCR values.

    A selected PCR the log never extends counts at its initial value.

    Args:
        attest: The parsed, signature-checked quote.
        hash_name: The signature's hash (the TPM computes pcrDigest with it).
        replayed: What the event log replays to.
        pcrs: ``quote.pcrs``, when given: used only to name the PCR that differs.
        device: The device, for the error.

    Raises:
        QuoteError: ``pcr_digest_mismatch``, naming the PCRs when ``pcrs`` can tell.
    """
    selected = {
        s.bank: {
            pcr: replayed.get(s.bank, {}).get(pcr) or initial_value(s.bank, pcr) for pcr in s.pcrs
        }
        for s in attest.selection
    }
    if pcr_digest(attest.selection, selected, hash_name) == attest.pcr_digest:
        return selected
    where = _differing(attest.selection, selected, pcrs, hash_name, attest.pcr_digest)
    raise QuoteError(
        Reason.PCR_DIGEST_MISMATCH,
        f"the quote's pcrDigest {attest.pcr_digest.hex()} is not the {hash_name} of the selected "
        f"PCRs as the event log replays them ({_describe(attest.selection)}){where}",
        path="eventlog.bin",
        device=device,
        hint="the event log is not the one this TPM measured: quarantine the device, or "
        "collect eventlog.bin and the quote again from the same boot",
    )


def _describe(selection: tuple[PcrSelection, ...]) -> str:
    return "; ".join(f"{s.bank} {','.join(map(str, s.pcrs))}" for s in selection)


def _differing(
    selection: tuple[PcrSelection, ...],
    replayed: dict[str, dict[int, bytes]],
    pcrs: dict[str, dict[int, bytes]] | None,
    hash_name: str,
    signed: bytes,
) -> str:
    if pcrs is None:
        return "; give quote.pcrs (tpm2_quote -o) to name the PCR that differs"
    if pcr_digest(selection, pcrs, hash_name) != signed:
        return "; quote.pcrs does not give the signed pcrDigest either, so it cannot name the PCR"
    parts = [
        f"PCR {pcr} ({s.bank}): log {replayed[s.bank][pcr].hex()}, quoted {pcrs[s.bank][pcr].hex()}"
        for s in selection
        for pcr in s.pcrs
        if replayed[s.bank][pcr] != pcrs[s.bank][pcr]
    ]
    return "; " + "; ".join(parts)


def sign_quote(
    private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    values: dict[str, dict[int, bytes]],
    nonce: bytes,
    *,
    clock: ClockInfo | None = None,
    hash_name: str = "sha256",
) -> tuple[bytes, bytes]:
    """What a TPM's TPM2_Quote returns for ``values``: ``(quote.msg, quote.sig)``.

    For the demo fleet, tests and benchmarks: RSASSA with an RSA key, ECDSA with an EC
    key, over ``hash_name``; every bank of ``values`` selected, PCRs ascending.
    """
    selection = tuple(PcrSelection(bank, tuple(sorted(pcrs))) for bank, pcrs in values.items())
    digest = pcr_digest(selection, values, hash_name)
    assert digest is not None
    attest = TpmsAttest(
        b"\x00\x0b" + bytes(32),
        nonce,
        clock or ClockInfo(1000, 1, 0, True),
        0x2019102300163636,
        selection,
        digest,
    )
    message = encode_tpms_attest(attest)
    chosen = _HASHES[hash_name]()
    if isinstance(private_key, rsa.RSAPrivateKey):
        raw = private_key.sign(message, padding.PKCS1v15(), chosen)
        return message, encode_tpmt_signature(TpmtSignature(ALG_RSASSA, hash_name, raw))
    r, s = decode_dss_signature(private_key.sign(message, ec.ECDSA(chosen)))
    return message, encode_tpmt_signature(TpmtSignature(ALG_ECDSA, hash_name, r=r, s=s))

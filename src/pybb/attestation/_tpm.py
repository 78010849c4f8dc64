"""TPM 2.0 structures a verifier reads: TPMS_ATTEST, TPMT_SIGNATURE, TPMT_PUBLIC, PCR files.

Layouts from TPM 2.0 Library Part 2 (Structures), all big-endian on the wire:

* ``TPMS_ATTEST`` (what ``tpm2_quote -m`` writes): magic ``0xff544347`` (0xff then "TCG"),
  type (``TPM_ST_ATTEST_QUOTE`` = ``0x8018``), qualifiedSigner (TPM2B_NAME), extraData
  (TPM2B_DATA: the verifier's nonce), clockInfo (clock u64, resetCount u32,
  restartCount u32, safe u8), firmwareVersion u64, then for a quote TPMS_QUOTE_INFO:
  the PCR selection (TPML_PCR_SELECTION) and pcrDigest (TPM2B_DIGEST).
* ``TPMT_SIGNATURE`` (``tpm2_quote -s``, tpm2-tools' default "tss" format): sigAlg,
  then for RSASSA/RSAPSS hash + TPM2B signature, for ECDSA hash + r + s.
* ``TPMT_PUBLIC``: an AK's public area (RSA or ECC) as TPMs and go-attestation give it.
* ``quote.pcrs`` (``tpm2_quote -o``, "serialized" format): tpm2-tools writes the C
  structures as they lie in memory, little-endian with padding: a TPML_PCR_SELECTION
  (u32 count, 16 x {u16 hash, u8 sizeofSelect, u8[4] pcrSelect, pad}), a u32 count of
  TPML_DIGESTs, then each TPML_DIGEST (u32 count, 8 x {u16 size, u8[64] buffer}).

Every parser reads exactly its structure: a short, long or malformed input raises
:class:`TpmFormatError` naming the field and the byte offset.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = [
    "ALG_ECDSA",
    "ALG_RSAPSS",
    "ALG_RSASSA",
    "ATTEST_MAGIC",
    "HASH_ALGORITHMS",
    "ST_ATTEST_QUOTE",
    "ClockInfo",
    "PcrSelection",
    "TpmFormatError",
    "TpmPublic",
    "TpmsAttest",
    "TpmtSignature",
    "encode_tpms_attest",
    "encode_tpmt_signature",
    "parse_pcrs_file",
    "parse_tpm_public",
    "parse_tpms_attest",
    "parse_tpmt_signature",
    "pcr_digest",
]

ATTEST_MAGIC: Final = 0xFF544347
"""``TPM_GENERATED_VALUE``: every TPMS_ATTEST a TPM signs starts with it."""
ST_ATTEST_QUOTE: Final = 0x8018
"""``TPM_ST_ATTEST_QUOTE``: the TPMS_ATTEST of TPM2_Quote."""
ALG_RSASSA: Final = 0x0014
ALG_RSAPSS: Final = 0x0016
ALG_ECDSA: Final = 0x0018
_ALG_NULL = 0x0010
_ALG_RSA = 0x0001
_ALG_ECC = 0x0023

HASH_ALGORITHMS: Final = {0x0004: "sha1", 0x000B: "sha256", 0x000C: "sha384", 0x000D: "sha512"}
"""TPM_ALG_ID of the hashes a quote may use, by the bank name the event log layer uses."""
_SIG_NAMES = {ALG_RSASSA: "RSASSA", ALG_RSAPSS: "RSAPSS", ALG_ECDSA: "ECDSA"}
_CURVES: dict[int, type[ec.EllipticCurve]] = {
    0x0003: ec.SECP256R1,
    0x0004: ec.SECP384R1,
    0x0005: ec.SECP521R1,
}
_MAX_PCRS_FILE = 64 * 1024


class TpmFormatError(ValueError):
    """A TPM structure that cannot be read: names the structure, field and byte offset.

    Attributes:
        structure: ``"TPMS_ATTEST"``, ``"TPMT_SIGNATURE"``, ...
        problem: What is wrong.
        offset: The byte offset of the field at fault.
        unsupported: The structure is well formed but uses an algorithm not supported.
    """

    def __init__(
        self, structure: str, problem: str, offset: int, *, unsupported: bool = False
    ) -> None:
        self.structure = structure
        self.problem = problem
        self.offset = offset
        self.unsupported = unsupported
        super().__init__(f"{structure}, byte offset {offset}: {problem}")


class _Reader:
    """Reads big-endian TPM fields from ``data``; each short read names its field."""

    def __init__(self, data: bytes, structure: str) -> None:
        self.data = data
        self.at = 0
        self.structure = structure

    def fail(
        self, problem: str, *, unsupported: bool = False, at: int | None = None
    ) -> TpmFormatError:
        return TpmFormatError(
            self.structure, problem, self.at if at is None else at, unsupported=unsupported
        )

    def take(self, size: int, what: str) -> bytes:
        end = self.at + size
        if end > len(self.data):
            raise self.fail(
                f"{what} needs {size} byte(s) but only {len(self.data) - self.at} remain "
                f"(the structure is truncated)"
            )
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "big")

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "big")

    def u64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "big")

    def tpm2b(self, what: str, limit: int = 4096) -> bytes:
        start = self.at
        size = self.u16(f"{what}.size")
        if size > limit:
            raise self.fail(f"{what}.size is {size}, more than {limit}", at=start)
        return self.take(size, what)

    def end(self) -> None:
        if self.at != len(self.data):
            raise self.fail(
                f"{len(self.data) - self.at} byte(s) follow the end of the structure "
                "(not a single TPM structure)"
            )


@dataclass(frozen=True, slots=True)
class ClockInfo:
    """TPMS_CLOCK_INFO: the TPM's clock (ms), resets and restarts, and the safe flag."""

    clock: int
    reset_count: int
    restart_count: int
    safe: bool


@dataclass(frozen=True, slots=True)
class PcrSelection:
    """One bank of a TPML_PCR_SELECTION: the bank and the PCRs selected, ascending."""

    bank: str
    pcrs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TpmsAttest:
    """A parsed quote message (TPMS_ATTEST of type TPM_ST_ATTEST_QUOTE)."""

    qualified_signer: bytes
    extra_data: bytes
    clock_info: ClockInfo
    firmware_version: int
    selection: tuple[PcrSelection, ...]
    pcr_digest: bytes


@dataclass(frozen=True, slots=True)
class TpmtSignature:
    """A parsed TPMT_SIGNATURE: algorithm, hash (bank name) and the signature bytes.

    For ECDSA ``signature`` is empty and ``r``/``s`` hold the integers.
    """

    algorithm: int
    hash: str
    signature: bytes = b""
    r: int = 0
    s: int = 0

    @property
    def algorithm_name(self) -> str:
        """``"RSASSA"``, ``"RSAPSS"`` or ``"ECDSA"``."""
        return _SIG_NAMES[self.algorithm]


@dataclass(frozen=True, slots=True)
class TpmPublic:
    """A parsed TPMT_PUBLIC of an RSA or ECC key.

    Attributes:
        key: The public key.
        scheme: The signing scheme the key is restricted to (``ALG_RSASSA`` ...), or
            ``None`` when the key does not fix one.
        scheme_hash: That scheme's hash (bank name), or ``None``.
        name_alg: The key's nameAlg (bank name) or ``None`` if unknown to us.
        name: The TPM Name: nameAlg id || H(TPMT_PUBLIC), when nameAlg is known.
    """

    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    scheme: int | None
    scheme_hash: str | None
    name_alg: str | None
    name: bytes | None


def _hash_name(reader: _Reader, what: str) -> str:
    start = reader.at
    alg = reader.u16(what)
    name = HASH_ALGORITHMS.get(alg)
    if name is None:
        raise reader.fail(
            f"{what} 0x{alg:04x} is not a supported hash (sha1, sha256, sha384, sha512)",
            unsupported=True,
            at=start,
        )
    return name


def _selection(reader: _Reader, little: bool = False) -> tuple[PcrSelection, ...]:
    start = reader.at
    count = reader.u32("pcrSelect.count")
    if count > 16:
        raise reader.fail(f"pcrSelect.count is {count}, more than the 16 banks a TPM has", at=start)
    banks = []
    for n in range(count):
        bank = _hash_name(reader, f"pcrSelect[{n}].hash")
        size = reader.u8(f"pcrSelect[{n}].sizeofSelect")
        if size > 4:
            raise reader.fail(f"pcrSelect[{n}].sizeofSelect is {size}, more than 4")
        bitmap = reader.take(size, f"pcrSelect[{n}].pcrSelect")
        pcrs = tuple(i for i in range(8 * size) if bitmap[i // 8] >> (i % 8) & 1)
        banks.append(PcrSelection(bank, pcrs))
    return tuple(banks)


def parse_tpms_attest(data: bytes) -> TpmsAttest:
    """Parse a quote message (``quote.msg``); raise :class:`TpmFormatError` if it is not one."""
    reader = _Reader(data, "TPMS_ATTEST")
    magic = reader.u32("magic")
    if magic != ATTEST_MAGIC:
        raise reader.fail(
            f"magic is 0x{magic:08x}, not 0x{ATTEST_MAGIC:08x} (TPM_GENERATED_VALUE): "
            "this is not a message a TPM signed",
            at=0,
        )
    kind = reader.u16("type")
    if kind != ST_ATTEST_QUOTE:
        raise reader.fail(
            f"type is 0x{kind:04x}, not 0x{ST_ATTEST_QUOTE:04x} (TPM_ST_ATTEST_QUOTE): not a quote",
            at=4,
        )
    signer = reader.tpm2b("qualifiedSigner", 2 + 64)
    extra = reader.tpm2b("extraData", 64)
    clock = ClockInfo(
        reader.u64("clockInfo.clock"),
        reader.u32("clockInfo.resetCount"),
        reader.u32("clockInfo.restartCount"),
        bool(reader.u8("clockInfo.safe")),
    )
    firmware = reader.u64("firmwareVersion")
    selection = _selection(reader)
    digest = reader.tpm2b("pcrDigest", 64)
    reader.end()
    return TpmsAttest(signer, extra, clock, firmware, selection, digest)


def parse_tpmt_signature(data: bytes) -> TpmtSignature:
    """Parse a quote signature (``quote.sig``, TPMT_SIGNATURE)."""
    reader = _Reader(data, "TPMT_SIGNATURE")
    alg = reader.u16("sigAlg")
    if alg not in _SIG_NAMES:
        raise reader.fail(
            f"sigAlg 0x{alg:04x} is not supported (RSASSA 0x0014, RSAPSS 0x0016, ECDSA 0x0018)",
            unsupported=True,
            at=0,
        )
    hash_name = _hash_name(reader, "hash")
    if alg == ALG_ECDSA:
        r = int.from_bytes(reader.tpm2b("signatureR", 66), "big")
        s = int.from_bytes(reader.tpm2b("signatureS", 66), "big")
        reader.end()
        return TpmtSignature(alg, hash_name, r=r, s=s)
    signature = reader.tpm2b("sig", 1024)
    reader.end()
    return TpmtSignature(alg, hash_name, signature)


def parse_tpm_public(data: bytes) -> TpmPublic:
    """Parse a TPMT_PUBLIC, or a TPM2B_PUBLIC (its 2-byte size first), of an RSA or ECC key."""
    if len(data) >= 2 and int.from_bytes(data[:2], "big") == len(data) - 2:
        data = data[2:]
    reader = _Reader(data, "TPMT_PUBLIC")
    kind = reader.u16("type")
    if kind not in (_ALG_RSA, _ALG_ECC):
        raise reader.fail(
            f"type 0x{kind:04x} is not an RSA (0x0001) or ECC (0x0023) key",
            unsupported=True,
            at=0,
        )
    name_id = reader.u16("nameAlg")
    reader.u32("objectAttributes")
    reader.tpm2b("authPolicy", 64)
    symmetric = reader.u16("parameters.symmetric.algorithm")
    if symmetric != _ALG_NULL:
        reader.u16("parameters.symmetric.keyBits")
        reader.u16("parameters.symmetric.mode")
    scheme: int | None = reader.u16("parameters.scheme")
    scheme_hash = None
    if scheme == _ALG_NULL:
        scheme = None
    else:
        scheme_hash = _hash_name(reader, "parameters.scheme.hashAlg")
    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    if kind == _ALG_RSA:
        bits = reader.u16("parameters.keyBits")
        exponent = reader.u32("parameters.exponent") or 65537
        modulus = reader.tpm2b("unique.rsa", 1024)
        if len(modulus) * 8 != bits:
            raise reader.fail(f"unique.rsa has {len(modulus) * 8} bits, keyBits says {bits}")
        try:
            key = rsa.RSAPublicNumbers(exponent, int.from_bytes(modulus, "big")).public_key()
        except ValueError as exc:
            raise reader.fail(f"not an RSA public key ({exc})") from None
    else:
        start = reader.at
        curve_id = reader.u16("parameters.curveID")
        curve = _CURVES.get(curve_id)
        if curve is None:
            raise reader.fail(
                f"curveID 0x{curve_id:04x} is not NIST P-256, P-384 or P-521",
                unsupported=True,
                at=start,
            )
        if reader.u16("parameters.kdf.scheme") != _ALG_NULL:
            reader.u16("parameters.kdf.hashAlg")
        x = int.from_bytes(reader.tpm2b("unique.x", 66), "big")
        y = int.from_bytes(reader.tpm2b("unique.y", 66), "big")
        try:
            key = ec.EllipticCurvePublicNumbers(x, y, curve()).public_key()
        except ValueError as exc:
            raise reader.fail(f"not a point on the curve ({exc})") from None
    reader.end()
    name_alg = HASH_ALGORITHMS.get(name_id)
    name = name_id.to_bytes(2, "big") + hashlib.new(name_alg, data).digest() if name_alg else None
    return TpmPublic(key, scheme, scheme_hash, name_alg, name)


def pcr_digest(
    selection: tuple[PcrSelection, ...], values: dict[str, dict[int, bytes]], hash_name: str
) -> bytes | None:
    """The pcrDigest a TPM computes: ``H(value || value || ...)`` over the selection in order.

    Returns ``None`` when ``values`` lacks a selected PCR (the caller names which).
    """
    digest = hashlib.new(hash_name)
    for bank in selection:
        held = values.get(bank.bank, {})
        for pcr in bank.pcrs:
            value = held.get(pcr)
            if value is None:
                return None
            digest.update(value)
    return digest.digest()


def parse_pcrs_file(data: bytes) -> dict[str, dict[int, bytes]]:
    """Parse ``quote.pcrs`` as ``tpm2_quote -o`` writes it (the default "serialized" format).

    Returns:
        ``{bank: {pcr: value}}``.
    """
    if len(data) > _MAX_PCRS_FILE:
        raise TpmFormatError("quote.pcrs", f"{len(data)} bytes, more than {_MAX_PCRS_FILE}", 0)
    at = 0

    def take(size: int, what: str) -> bytes:
        nonlocal at
        if at + size > len(data):
            raise TpmFormatError("quote.pcrs", f"{what} is truncated", at)
        chunk = data[at : at + size]
        at += size
        return chunk

    count = struct.unpack("<I", take(4, "TPML_PCR_SELECTION.count"))[0]
    if count > 16:
        raise TpmFormatError("quote.pcrs", f"TPML_PCR_SELECTION.count is {count}, more than 16", 0)
    selection: list[tuple[str, list[int]]] = []
    for n in range(16):
        alg, size = struct.unpack("<HB", take(3, f"pcrSelections[{n}]"))
        bitmap = take(4, f"pcrSelections[{n}].pcrSelect")
        take(1, "padding")
        if n >= count:
            continue
        bank = HASH_ALGORITHMS.get(alg)
        if bank is None or size > 4:
            raise TpmFormatError(
                "quote.pcrs",
                f"pcrSelections[{n}]: hash 0x{alg:04x} / size {size} unsupported",
                at - 8,
                unsupported=True,
            )
        selection.append((bank, [i for i in range(8 * size) if bitmap[i // 8] >> (i % 8) & 1]))
    lists = struct.unpack("<I", take(4, "digest list count"))[0]
    wanted = [(bank, pcr) for bank, pcrs in selection for pcr in pcrs]
    if lists > (len(wanted) + 7) // 8 + 1:
        raise TpmFormatError("quote.pcrs", f"{lists} digest lists for {len(wanted)} PCRs", at - 4)
    digests: list[bytes] = []
    for _ in range(lists):
        n = struct.unpack("<I", take(4, "TPML_DIGEST.count"))[0]
        if n > 8:
            raise TpmFormatError("quote.pcrs", f"TPML_DIGEST.count is {n}, more than 8", at - 4)
        for i in range(8):
            size = struct.unpack("<H", take(2, "TPM2B_DIGEST.size"))[0]
            buffer = take(64, "TPM2B_DIGEST.buffer")
            if i < n:
                if size > 64:
                    raise TpmFormatError("quote.pcrs", f"digest size {size}", at - 66)
                digests.append(buffer[:size])
    if at != len(data):
        raise TpmFormatError("quote.pcrs", f"{len(data) - at} byte(s) after the digests", at)
    if len(digests) != len(wanted):
        raise TpmFormatError(
            "quote.pcrs", f"{len(digests)} digests for {len(wanted)} selected PCRs", at
        )
    values: dict[str, dict[int, bytes]] = {}
    for (bank, pcr), value in zip(wanted, digests, strict=True):
        if len(value) != hashlib.new(bank).digest_size:
            raise TpmFormatError("quote.pcrs", f"{bank} PCR {pcr} has {len(value)} bytes", at)
        values.setdefault(bank, {})[pcr] = value
    return values


def encode_tpms_attest(attest: TpmsAttest) -> bytes:
    """The wire form of a quote's TPMS_ATTEST (what a TPM signs): the inverse of parsing."""
    out = bytearray(struct.pack(">IH", ATTEST_MAGIC, ST_ATTEST_QUOTE))
    for blob in (attest.qualified_signer, attest.extra_data):
        out += struct.pack(">H", len(blob)) + blob
    clock = attest.clock_info
    out += struct.pack(">QIIB", clock.clock, clock.reset_count, clock.restart_count, clock.safe)
    out += struct.pack(">QI", attest.firmware_version, len(attest.selection))
    ids = {name: alg for alg, name in HASH_ALGORITHMS.items()}
    for bank in attest.selection:
        bitmap = bytearray(max(3, max(bank.pcrs, default=0) // 8 + 1))
        for pcr in bank.pcrs:
            bitmap[pcr // 8] |= 1 << (pcr % 8)
        out += struct.pack(">HB", ids[bank.bank], len(bitmap)) + bitmap
    out += struct.pack(">H", len(attest.pcr_digest)) + attest.pcr_digest
    return bytes(out)


def encode_tpmt_signature(signature: TpmtSignature) -> bytes:
    """The wire form of a TPMT_SIGNATURE: the inverse of :func:`parse_tpmt_signature`."""
    ids = {name: alg for alg, name in HASH_ALGORITHMS.items()}
    head = struct.pack(">HH", signature.algorithm, ids[signature.hash])
    if signature.algorithm == ALG_ECDSA:
        size = max(32, (max(signature.r, signature.s).bit_length() + 7) // 8)
        r, s = signature.r.to_bytes(size, "big"), signature.s.to_bytes(size, "big")
        return head + struct.pack(">H", len(r)) + r + struct.pack(">H", len(s)) + s
    return head + struct.pack(">H", len(signature.signature)) + signature.signature

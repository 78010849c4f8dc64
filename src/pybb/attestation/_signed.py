"""Signed quotes in fleets: a device's TPMS_ATTEST and signature, checked against a ledger.

A generated demo fleet (and a fleet folder saved from it) carries, per device, the quote
its TPM signed (``SignedQuote``: ``quote.msg`` and ``quote.sig`` bytes) and, per fleet, a
:class:`QuoteLedger`: which AK each device enrolled, which nonce was issued to it and
which nonces earlier attestations already spent. :meth:`QuoteLedger.check` runs the same
checks as ``pybb attest verify`` (the structure, the enrolled AK, the signature, the
nonce, and that the signed pcrDigest is the hash of exactly the PCR values the evidence
reports) and raises :class:`QuoteError` with the reason; the tree then escalates the
device for it.

The ledger is a snapshot, not the live registry: every process and every resume of a
demo sees the same one, so a generated fleet lands the same everywhere. Real evidence
(``pybb attest verify``) is checked against the registry board instead, where a nonce is
spent once and for all.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pybb.attestation._quote import (
    AttestationKey,
    QuoteError,
    load_attestation_key,
    parse_quote,
    verify_signature,
)
from pybb.attestation._report import Reason
from pybb.attestation._tpm import TpmFormatError, parse_tpms_attest, pcr_digest

__all__ = ["QuoteLedger", "SignedQuote"]


@dataclass(frozen=True, slots=True)
class SignedQuote:
    """What TPM2_Quote returned: ``quote.msg`` (TPMS_ATTEST) and ``quote.sig`` (TPMT_SIGNATURE)."""

    message: bytes = field(repr=False)
    signature: bytes = field(repr=False)

    @property
    def nonce(self) -> bytes | None:
        """The nonce the TPM quoted over (``extraData``), or ``None`` if the quote is unreadable."""
        try:
            return parse_tpms_attest(self.message).extra_data
        except TpmFormatError:
            return None

    def to_json(self) -> dict[str, str]:
        """``{"msg": base64, "sig": base64}``."""
        return {
            "msg": base64.b64encode(self.message).decode(),
            "sig": base64.b64encode(self.signature).decode(),
        }

    @classmethod
    def from_json(cls, data: object) -> SignedQuote:
        """Read :meth:`to_json`'s object.

        Raises:
            ValueError: Not such an object.
        """
        if not isinstance(data, dict) or set(data) != {"msg", "sig"}:
            raise ValueError('must be {"msg": base64, "sig": base64}')
        try:
            message, signature = (base64.b64decode(data[k], validate=True) for k in ("msg", "sig"))
        except (binascii.Error, ValueError, TypeError) as exc:
            raise ValueError(f"is not base64 ({exc})") from None
        if len(message) > 4096 or len(signature) > 4096:
            raise ValueError("a quote or signature over 4096 bytes")
        return cls(message, signature)


NonceState = Callable[[str, bytes], str]
"""``state(device, nonce) -> "issued" | "spent" | "unknown"``."""


@dataclass(frozen=True)
class QuoteLedger:
    """Who enrolled which AK, and which nonces were issued and spent: a fleet's snapshot.

    Attributes:
        ak_of: The device's enrolled AK, or ``None``.
        nonce_state: Whether a nonce was issued to the device, spent, or never issued.
        materialize: ``devices -> JSON`` of the whole ledger (for a fleet folder).
    """

    ak_of: Callable[[str], AttestationKey | None] = field(repr=False)
    nonce_state: NonceState = field(repr=False)
    materialize: Callable[[Iterable[str]], dict[str, Any]] = field(repr=False)

    def check(self, device: str, signed: SignedQuote | None, quote: Mapping[str, Any]) -> None:
        """Check a device's signed quote (see :meth:`_check`), naming ``signed_quote``.

        Raises:
            QuoteError: With the reason.
        """
        try:
            self._check(device, signed, quote)
        except QuoteError as exc:
            if exc.path is not None:  # "quote.sig": inside the evidence's signed_quote here
                exc.field, exc.path = f"signed_quote.{exc.path.rsplit('.', 1)[-1]}", None
                Exception.__init__(exc, exc.explain())
            raise

    def _check(self, device: str, signed: SignedQuote | None, quote: Mapping[str, Any]) -> None:
        """Check a device's signed quote and that it signs exactly ``quote``'s PCR values.

        Raises:
            QuoteError: With the reason (``bad_quote``, ``unknown_ak``, ``bad_signature``,
                ``nonce_unknown``, ``nonce_reused``, ``pcr_digest_mismatch``).
        """
        if signed is None:
            raise QuoteError(
                Reason.BAD_QUOTE,
                "the fleet verifies signed quotes and this evidence has none",
                field="signed_quote",
                device=device,
                hint="collect the quote with tpm2_quote (-m and -s) and add it",
            )
        attest, signature = parse_quote(signed.message, signed.signature, device=device)
        ak = self.ak_of(device)
        if ak is None:
            raise QuoteError(
                Reason.UNKNOWN_AK,
                "no attestation key is enrolled for it, so no quote from it can be believed",
                field="signed_quote",
                device=device,
                hint="enrol its AK if you trust the machine, and attest it again",
            )
        verify_signature(signed.message, signature, ak, device=device)
        state = self.nonce_state(device, attest.extra_data)
        if state != "issued":
            reason = Reason.NONCE_REUSED if state == "spent" else Reason.NONCE_UNKNOWN
            what = (
                "was spent by an earlier attestation: this is a replayed quote"
                if state == "spent"
                else "is not a nonce issued to this device"
            )
            raise QuoteError(
                reason,
                f"the quote's nonce {attest.extra_data.hex()[:24]}… {what}",
                field="signed_quote",
                device=device,
                hint="challenge the device again for a fresh quote; quarantine it if nobody "
                "resubmitted this one",
            )
        values = {bank: dict(pcrs) for bank, pcrs in quote.items()}
        selected = {(s.bank, p) for s in attest.selection for p in s.pcrs}
        reported = {(bank, p) for bank, pcrs in values.items() for p in pcrs}
        digest = pcr_digest(attest.selection, values, signature.hash)
        if selected != reported or digest != attest.pcr_digest:
            raise QuoteError(
                Reason.PCR_DIGEST_MISMATCH,
                "the PCR values the evidence reports are not the ones its TPM signed "
                f"(pcrDigest {attest.pcr_digest.hex()[:24]}…)",
                field="quote",
                device=device,
                hint="the quoted values were altered: quarantine the device",
            )

    @classmethod
    def from_json(cls, data: object) -> QuoteLedger:
        """Read a fleet folder's ``registry.json``.

        Its form: ``{"aks": {device: pem}, "nonces": {device: hex}, "spent": [hex]}``.

        Raises:
            ValueError: Naming what is wrong.
        """
        if not isinstance(data, dict) or set(data) != {"aks", "nonces", "spent"}:
            raise ValueError('must be {"aks": {...}, "nonces": {...}, "spent": [...]}')
        aks, nonces, spent = data["aks"], data["nonces"], data["spent"]
        if not (isinstance(aks, dict) and isinstance(nonces, dict) and isinstance(spent, list)):
            raise ValueError("aks and nonces must be objects, spent a list")
        keys = {d: load_attestation_key(str(pem).encode(), f"aks.{d}") for d, pem in aks.items()}
        issued = {str(d): str(n) for d, n in nonces.items()}
        used = frozenset(str(n) for n in spent)

        def state(device: str, nonce: bytes) -> str:
            if issued.get(device) != nonce.hex():
                return "unknown"
            return "spent" if nonce.hex() in used else "issued"

        def materialize(devices: Iterable[str]) -> dict[str, Any]:
            return {"aks": dict(aks), "nonces": dict(issued), "spent": sorted(used)}

        return cls(keys.get, state, materialize)

"""A device's evidence: its id, class, event log, and the PCR values its quote reports.

An evidence file is a JSON object (``devices/<device>.json`` in a fleet folder)::

    {"device": "dev-00001", "class": "fedora37", "log": "logs/dev-00001.bin",
     "quote": {"sha256": {"0": "<64 hex digits>", "7": "..."}}}

``log`` is a path relative to the fleet folder (it may not leave it), or
``log_base64`` carries the log inline. Everything is checked on load; a file that
cannot be used raises :class:`EvidenceError` naming the file and the field. The log's
*contents* are not parsed here: a corrupt log is the attestation tiers' finding.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pybb.attestation._eventlog import MAX_PCR_INDEX
from pybb.attestation._fleet_errors import EvidenceError
from pybb.attestation._jsonfile import (
    NAME,
    ErrorFactory,
    Fields,
    parse_json,
    read_capped,
    relative_to_root,
    show,
)
from pybb.attestation._policy import BANK_SIZES
from pybb.attestation._signed import SignedQuote

__all__ = [
    "EVENT_LOG_CAP",
    "MAX_EVIDENCE_FILE_SIZE",
    "Evidence",
    "Quote",
    "load_evidence",
    "parse_evidence",
]

MAX_EVIDENCE_FILE_SIZE = 1024 * 1024
"""The largest evidence JSON file of a fleet folder read by default."""
EVENT_LOG_CAP = 16 * 1024 * 1024
"""The largest event log file read by default, in a fleet folder or an evidence folder
(a real firmware log is well under 1 MiB); checked with ``stat`` before reading."""
"""The largest evidence file read (an inline ``log_base64`` counts towards it)."""

Quote = Mapping[str, Mapping[int, bytes]]
"""``{bank: {pcr_index: value}}``: the PCR values a device's quote reports."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one device sends to be attested.

    Attributes:
        device: The device id (1-64 letters, digits, ``.``, ``_``, ``-``).
        device_class: The name of its device class.
        log: Its TCG event log, as bytes (parsed by the tiers, not here).
        quote: The PCR values its quote reports, per bank.
        source: Where the evidence came from (a file), for reports.
        signed: The quote as its TPM signed it, when the fleet verifies signed quotes
            (JSON ``"signed_quote": {"msg": base64, "sig": base64}``).

    Raises:
        EvidenceError: A value of the wrong type or form.
    """

    device: str
    device_class: str
    log: bytes = field(repr=False)
    quote: Quote = field(default_factory=dict)
    source: str | None = None
    signed: SignedQuote | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("device", "device_class"):
            value = getattr(self, name)
            if not isinstance(value, str) or not NAME.fullmatch(value):
                raise EvidenceError(f"{show(value)} is not a name", field=name, path=self.source)
        if not isinstance(self.log, bytes):
            raise EvidenceError(
                f"must be bytes, not {type(self.log).__name__}", field="log", path=self.source
            )
        object.__setattr__(self, "quote", _frozen_quote(self.quote, self.source))

    def to_json(self, log_path: str | None = None) -> dict[str, Any]:
        """The evidence file's object: ``log`` as ``log_path``, else inline base64."""
        data: dict[str, Any] = {"device": self.device, "class": self.device_class}
        if log_path is None:
            data["log_base64"] = base64.b64encode(self.log).decode()
        else:
            data["log"] = log_path
        data["quote"] = {
            bank: {str(p): v.hex() for p, v in sorted(values.items())}
            for bank, values in self.quote.items()
        }
        if self.signed is not None:
            data["signed_quote"] = self.signed.to_json()
        return data

    @classmethod
    def from_json(
        cls,
        data: object,
        *,
        path: str | None = None,
        root: Path | None = None,
        log_cap: int = EVENT_LOG_CAP,
    ) -> Evidence:
        """Read and check an evidence object.

        Args:
            data: The parsed JSON.
            path: The file it came from, for messages.
            root: The fleet folder a ``log`` path is relative to (required for ``log``).
            log_cap: The largest log file (``log``) read, in bytes.

        Raises:
            EvidenceError: Naming the file and the field at fault.
        """
        fields = Fields(_error(path, None))
        obj = fields.obj(
            data, None, ("device", "class", "quote"), ("log", "log_base64", "signed_quote")
        )
        device = fields.name(obj["device"], "device")
        fields = Fields(_error(path, device))
        device_class = fields.name(obj["class"], "class")
        quote = _quote(fields, obj["quote"])
        log = _log(fields, obj, root, log_cap)
        signed = None
        if "signed_quote" in obj:
            try:
                signed = SignedQuote.from_json(obj["signed_quote"])
            except ValueError as exc:
                fields.fail("signed_quote", str(exc))
        return cls(device, device_class, log, quote, path, signed)


def _error(path: str | None, device: str | None) -> ErrorFactory:
    def build(problem: str, field_name: str | None) -> EvidenceError:
        return EvidenceError(problem, path=path, field=field_name, device=device)

    return build


def _quote(fields: Fields, value: object) -> dict[str, dict[int, bytes]]:
    banks = fields.mapping(value, "quote", limit=len(BANK_SIZES))
    quote: dict[str, dict[int, bytes]] = {}
    for bank, values in banks.items():
        size = BANK_SIZES.get(bank)
        if size is None:
            fields.fail(
                f"quote.{bank}", f"{show(bank)} is not a bank; use one of {', '.join(BANK_SIZES)}"
            )
        pcrs = fields.mapping(values, f"quote.{bank}", limit=MAX_PCR_INDEX + 1)
        quote[bank] = {
            fields.pcr(k, f"quote.{bank}.{k}", MAX_PCR_INDEX): fields.digest(
                v, f"quote.{bank}.{k}", size
            )
            for k, v in pcrs.items()
        }
    return quote


def _log(fields: Fields, obj: Mapping[str, Any], root: Path | None, cap: int) -> bytes:
    if ("log" in obj) == ("log_base64" in obj):
        fields.fail("log", "give exactly one of 'log' (a path) and 'log_base64'")
    if "log_base64" in obj:
        text = fields.string(obj["log_base64"], "log_base64", limit=MAX_EVIDENCE_FILE_SIZE)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            fields.fail("log_base64", f"is not base64 ({exc})")
    value = fields.string(obj["log"], "log", limit=1024)
    if root is None:
        fields.fail("log", "a log path needs a fleet folder to be relative to")
    resolved = relative_to_root(root, value)
    if resolved is None:
        fields.fail(
            "log",
            f"{show(value)} is not a relative path inside the fleet folder "
            "(no '..', no absolute path, no link leading out)",
        )

    def error(problem: str, field_name: str | None) -> EvidenceError:
        return fields.error(f"the log file {show(value)}: {problem}", "log")  # type: ignore[return-value]

    return read_capped(resolved, cap, error)


def _frozen_quote(quote: object, source: str | None) -> Quote:
    if not isinstance(quote, Mapping):
        raise EvidenceError(f"must be a mapping, not {show(quote)}", field="quote", path=source)
    frozen: dict[str, Mapping[int, bytes]] = {}
    for bank, values in quote.items():
        size = BANK_SIZES.get(bank) if isinstance(bank, str) else None
        if size is None or not isinstance(values, Mapping):
            raise EvidenceError(
                f"{show(bank)}: {show(values)} is not a bank's PCR values",
                field="quote",
                path=source,
            )
        for pcr, value in values.items():
            if (
                isinstance(pcr, bool)
                or not isinstance(pcr, int)
                or not 0 <= pcr <= MAX_PCR_INDEX
                or not isinstance(value, bytes)
                or len(value) != size
            ):
                raise EvidenceError(
                    f"{show(pcr)}: {show(value)} is not a PCR index with a {size}-byte value",
                    field=f"quote.{bank}",
                    path=source,
                )
        frozen[bank] = MappingProxyType(dict(sorted(values.items())))
    return MappingProxyType(frozen)


def parse_evidence(
    data: bytes,
    *,
    path: str | None = None,
    root: Path | None = None,
    max_size: int = MAX_EVIDENCE_FILE_SIZE,
    log_cap: int = EVENT_LOG_CAP,
) -> Evidence:
    """Parse and check the bytes of an evidence file.

    Raises:
        EvidenceError: Naming the file and the field at fault.
    """
    error = _error(path, None)
    if len(data) > max_size:
        raise error(f"it is larger than {max_size} bytes", None)
    return Evidence.from_json(parse_json(data, error), path=path, root=root, log_cap=log_cap)


def load_evidence(
    path: Path,
    *,
    root: Path,
    max_size: int = MAX_EVIDENCE_FILE_SIZE,
    log_cap: int = EVENT_LOG_CAP,
) -> Evidence:
    """Read and check an evidence file of the fleet folder ``root``.

    Args:
        path: The evidence file.
        root: The fleet folder.
        max_size: The largest evidence file read, in bytes (checked before reading).
        log_cap: The largest event log file read, in bytes (checked before reading).

    Raises:
        EvidenceError: Naming the file (relative to ``root``) and the field at fault.
    """
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = path.as_posix()
    data = read_capped(path, max_size, _error(shown, None))
    return parse_evidence(data, path=shown, root=root, max_size=max_size, log_cap=log_cap)

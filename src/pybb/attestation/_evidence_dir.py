"""Real evidence: an EVIDENCE_DIR of tpm2-tools files, each device's quote verified first.

The layout (pinned, so operators can script it)::

    EVIDENCE_DIR/<device>/eventlog.bin   /sys/kernel/security/tpm0/binary_bios_measurements
    EVIDENCE_DIR/<device>/quote.msg      tpm2_quote -m  (TPMS_ATTEST)
    EVIDENCE_DIR/<device>/quote.sig      tpm2_quote -s  (TPMT_SIGNATURE)
    EVIDENCE_DIR/<device>/quote.pcrs     tpm2_quote -o  (optional: names the PCR that differs)

For each device, in this order: the files (each size checked with ``stat`` before it
is read), the quote's structure, the enrolled AK (unknown, revoked), the signature,
the nonce (issued to this device, unexpired, spent now: exactly once), the pcrDigest
against the log's replay, the AK's clock. A device that passes becomes an
:class:`Evidence` whose quote is the replayed values of the PCRs the TPM signed, and
goes through the decision tree like any other; one that fails is refused with a
:class:`QuoteError` (its own escalation reason) and the rest of the fleet runs on.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from pybb.attestation._errors import EventLogError
from pybb.attestation._eventlog import parse_event_log
from pybb.attestation._evidence import EVENT_LOG_CAP, Evidence
from pybb.attestation._fleet import Fleet
from pybb.attestation._fleet_errors import EvidenceError, FleetError
from pybb.attestation._jsonfile import NAME, show
from pybb.attestation._quote import (
    QuoteError,
    check_pcr_digest,
    parse_quote,
    verify_signature,
)
from pybb.attestation._registry import Registry
from pybb.attestation._replay import replay
from pybb.attestation._report import Reason
from pybb.attestation._tpm import TpmFormatError, parse_pcrs_file, parse_tpms_attest

__all__ = [
    "EVENT_LOG_CAP",
    "QUOTE_FILE_CAP",
    "Caps",
    "load_evidence_dir",
    "verify_device",
]

QUOTE_FILE_CAP: Final = 64 * 1024
"""The largest ``quote.msg``, ``quote.sig`` or ``quote.pcrs`` read."""
_MAX_DEVICES = 1_000_000


@dataclass(frozen=True, slots=True)
class Caps:
    """The size caps of an evidence folder's files (checked with ``stat``, before reading)."""

    event_log: int = EVENT_LOG_CAP
    quote: int = QUOTE_FILE_CAP


def _read(
    folder: Path, name: str, cap: int, device: str, *, optional: bool = False
) -> bytes | None:
    path = folder / name
    shown = f"{device}/{name}"

    def refuse(problem: str, hint: str) -> EvidenceError:
        # An explicit reason: the report then names the file and says what to do.
        return EvidenceError(
            problem, path=shown, device=device, hint=hint, reason=Reason.BAD_EVIDENCE
        )

    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        if optional:
            return None
        raise refuse("it is missing", f"collect {name} with the rest of the evidence") from None
    except OSError as exc:
        raise refuse(
            f"it cannot be read ({exc.strerror or exc})", "check its permissions"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise refuse("it is not a regular file (a link or a folder?)", f"give {name} as a file")
    if info.st_size > cap:
        raise refuse(
            f"it is {info.st_size} bytes, over the cap of {cap} bytes (not read)",
            "this is not real evidence; collect it again (or raise the cap if it truly is)",
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as exc:
        raise refuse(
            f"it cannot be read ({exc.strerror or exc})", "check its permissions"
        ) from None
    if len(data) > cap:  # it grew between stat and read
        raise refuse(f"it is over the cap of {cap} bytes (not read)", "collect it again")
    return data


def verify_device(
    registry: Registry,
    device: str,
    folder: Path,
    *,
    caps: Caps = Caps(),
    now: datetime | None = None,
) -> Evidence:
    """Verify one device's quote and return its evidence for the decision tree.

    Raises:
        EvidenceError: A file missing, unreadable or over its cap (``bad_evidence``),
            or a :class:`QuoteError` naming the check that failed and its reason; the
            file is named inside the EVIDENCE_DIR (``<device>/quote.sig``).
    """
    try:
        return _verify(registry, device, folder, caps, now)
    except EvidenceError as exc:
        if exc.path is not None and not exc.path.startswith(f"{device}/"):
            exc.path = f"{device}/{exc.path}"
            Exception.__init__(exc, exc.explain())
        raise


def _verify(
    registry: Registry,
    device: str,
    folder: Path,
    caps: Caps,
    now: datetime | None,
) -> Evidence:
    message = _read(folder, "quote.msg", caps.quote, device)
    signature_bytes = _read(folder, "quote.sig", caps.quote, device)
    pcrs_bytes = _read(folder, "quote.pcrs", caps.quote, device, optional=True)
    log_bytes = _read(folder, "eventlog.bin", caps.event_log, device)
    assert message is not None
    assert signature_bytes is not None
    assert log_bytes is not None
    attest, signature = parse_quote(message, signature_bytes, device=device)
    enrolled = registry.ak(device)
    if enrolled is None or enrolled.revoked:
        revoked = enrolled is not None
        raise QuoteError(
            Reason.REVOKED_AK if revoked else Reason.UNKNOWN_AK,
            f"its AK was revoked (version {enrolled.version}, by {enrolled.by})"
            if enrolled is not None
            else "no attestation key is enrolled for it, so no quote from it can be believed",
            path=f"{device}/quote.sig",
            device=device,
            hint="quarantine it; re-enrol a new AK (pybb attest enroll --replace) once it is "
            "trusted again"
            if revoked
            else "enrol its AK (pybb attest enroll DEVICE --ak AK.pem --class CLASS), "
            "if you trust the machine, and attest it again",
        )
    verify_signature(message, signature, enrolled.key, device=device)
    registry.spend(device, attest.extra_data, now=now)
    pcrs = None
    if pcrs_bytes is not None:
        try:
            pcrs = parse_pcrs_file(pcrs_bytes)
        except TpmFormatError as exc:
            raise QuoteError(
                Reason.BAD_QUOTE,
                f"cannot be read: {exc}",
                path=f"{device}/quote.pcrs",
                device=device,
                hint="give quote.pcrs as tpm2_quote -o writes it (the default format), or "
                "leave it out",
            ) from None
    try:
        replayed = replay(parse_event_log(log_bytes))
    except EventLogError as exc:
        raise EvidenceError(
            str(exc),
            path=f"{device}/eventlog.bin",
            device=device,
            hint="collect the event log again from /sys/kernel/security/tpm0/"
            "binary_bios_measurements",
            reason=Reason.CORRUPT_LOG,
        ) from None
    quoted = check_pcr_digest(attest, signature.hash, replayed, pcrs=pcrs, device=device)
    registry.observe_clock(device, enrolled.key, attest.clock_info)
    return Evidence(device, enrolled.device_class, log_bytes, quoted, f"{device}/")


def load_evidence_dir(
    folder: str | Path,
    registry: Registry,
    *,
    caps: Caps = Caps(),
    now: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Fleet:
    """Verify every device's quote in an EVIDENCE_DIR and return the fleet for the tree.

    Each quote is verified (and its nonce spent) once, here; the fleet holds the
    outcomes, so the tree reads them as often as it likes. A device sent back for
    re-measuring is read again only through the fleet's ``reread`` (see :func:`_rereader`).

    Raises:
        FleetError: ``folder`` is not a folder or holds no device folders.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FleetError(f"{show(str(root))} is not a folder", hint="give an EVIDENCE_DIR")
    entries = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not entries:
        raise FleetError(
            "it holds no device folders",
            path=str(root),
            hint="put each device's eventlog.bin, quote.msg and quote.sig in "
            "EVIDENCE_DIR/<device>/",
        )
    if len(entries) > _MAX_DEVICES:
        raise FleetError(f"it holds more than {_MAX_DEVICES} device folders", path=str(root))
    classes = registry.classes()
    results: dict[str, Evidence | EvidenceError] = {}
    digest = hashlib.sha256()
    for done, path in enumerate(entries, 1):
        key = path.name if NAME.fullmatch(path.name) else _safe(path.name)
        try:
            if key != path.name:
                raise EvidenceError(
                    f"the folder name {show(path.name)} is not a device id (1-64 letters, "
                    "digits, '.', '_', '-')",
                    path=path.name,
                    hint="name each device folder after its device id",
                    reason=Reason.BAD_EVIDENCE,
                )
            evidence = verify_device(registry, key, path, caps=caps, now=now)
            digest.update(f"{key}:{hashlib.sha256(evidence.log).hexdigest()}:ok\n".encode())
            result: Evidence | EvidenceError = evidence
        except EvidenceError as exc:
            result = exc
            digest.update(f"{key}:{exc.reason}:{exc}\n".encode())
        results[key] = result
        if progress is not None:
            progress(done, len(entries))

    def load(device: str) -> Evidence:
        found = results[device]
        if isinstance(found, EvidenceError):
            raise found
        return found

    def classify(device: str) -> str | None:
        found = results[device]
        return found.device_class if isinstance(found, Evidence) else None

    for name, cls in classes.items():
        digest.update(f"class {name}:{cls.fingerprint}\n".encode())
    name = re.sub(r"[^A-Za-z0-9._-]", "-", root.resolve().name)[:64].lstrip("._-") or "evidence"
    reread = _rereader(root, registry, caps, results)
    return Fleet(
        name, classes, tuple(results), load, {}, digest.hexdigest(), classify, reread=reread
    )


def _rereader(
    root: Path, registry: Registry, caps: Caps, results: dict[str, Evidence | EvidenceError]
) -> Callable[[str, bytes | None], bool]:
    """``reread(device, nonce)``: verify a new quote dropped into the device's folder.

    Only a quote over a nonce not seen before for the device (with ``nonce``, over
    exactly it: the re-measure challenge) is new evidence; it is verified against the
    live registry, so its nonce is spent now, once, and its outcome, good or refused
    (a bad signature, an unknown AK), becomes the device's. Anything else (the old quote
    still there or dropped again, files not all written yet) leaves the outcome as it was.
    """
    answered: dict[str, bytes] = {}  # the nonce of the quote each device was last read from

    def reread(device: str, nonce: bytes | None) -> bool:
        folder = root / device
        if device not in results or not all(
            (folder / f).is_file() for f in ("quote.msg", "quote.sig", "eventlog.bin")
        ):
            return False
        try:
            message = _read(folder, "quote.msg", caps.quote, device)
            assert message is not None
            quoted = parse_tpms_attest(message).extra_data
        except (EvidenceError, TpmFormatError):
            return False  # not readable yet (being written?): the next poll looks again
        if (nonce is not None and quoted != nonce) or answered.get(device) == quoted:
            return False
        try:
            found: Evidence | EvidenceError = verify_device(registry, device, folder, caps=caps)
        except QuoteError as exc:
            if exc.reason is Reason.NONCE_REUSED:
                # The old quote (spent at load), or one another process read first.
                return False
            found = exc
        except EvidenceError as exc:
            found = exc
        answered[device] = quoted
        results[device] = found
        return True

    return reread


def _safe(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:40]
    tag = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"dir:{safe}~{tag}"

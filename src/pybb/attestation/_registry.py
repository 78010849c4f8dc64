"""The verifier's registry on a board: attestation keys, nonces, TPM clocks, device classes.

One board (``attest-registry`` by default) in the same store as the attestation boards,
holding append-only levels, so every change is a record with its writer and time:

* ``attestation.aks`` (unique on ``slot`` = ``device@version``): enrolments and
  revocations. Version 1 enrols; a re-enrolment (a new AK for a device) is an explicit
  change that names the next version; a revocation is a version too. Two processes
  changing the same device race for the same slot, and the board admits one.
* ``attestation.nonces`` (unique on ``nonce``): each challenge, its device and expiry.
* ``attestation.nonce_uses`` (unique on ``nonce``): a quote's nonce is spent by adding it
  here, so across processes and workers exactly one quote per nonce is accepted; the
  store enforces it inside the transaction (a second write is ``DUPLICATE``).
* ``attestation.clocks``: the clockInfo of each accepted quote per AK, so a clock,
  resetCount or restartCount behind one already seen is refused.
* ``attestation.classes`` (unique on ``slot`` = ``class@version``): device classes
  (reference values and policy) by name, the latest version in force.

The trust model: an AK is trusted because an operator enrolled it (who, when, on the
record). EK certificates and credential activation (proving the AK lives in the same
TPM as a certified EK) are out of scope.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from blackboard import Level, RecordKind, Rejected, RejectionCause, create_model
from blackboard.stores import Store
from pybb.attestation._fleet_errors import FleetError
from pybb.attestation._policy import DeviceClass
from pybb.attestation._quote import AttestationKey, QuoteError
from pybb.attestation._report import Reason
from pybb.attestation._tpm import ClockInfo

__all__ = [
    "AKS",
    "CLASSES",
    "CLOCKS",
    "NONCES",
    "NONCE_BYTES",
    "NONCE_TTL",
    "NONCE_USES",
    "REGISTRY_BOARD",
    "EnrolledAk",
    "Registry",
]

REGISTRY_BOARD: Final = "attest-registry"
"""The registry's board id unless told otherwise."""
NONCE_TTL: Final = timedelta(minutes=10)
"""How long a challenge's nonce can be quoted over."""
NONCE_BYTES: Final = 32
"""The length of a nonce (a TPM2B_DATA holds up to 64; 20 or more resists guessing)."""
AKS: Final = "attestation.aks"
NONCES: Final = "attestation.nonces"
NONCE_USES: Final = "attestation.nonce_uses"
CLOCKS: Final = "attestation.clocks"
CLASSES: Final = "attestation.classes"
_WRITER = "attestation-registry"


@dataclass(frozen=True, slots=True)
class EnrolledAk:
    """A device's attestation key as the registry holds it now.

    Attributes:
        device: The device.
        version: The version of its latest change (1 = first enrolment).
        key: Its AK (the last one enrolled, also when revoked).
        device_class: The class it was enrolled in.
        revoked: Whether the latest change revoked it.
        by: Who made the latest change.
        at: When.
    """

    device: str
    version: int
    key: AttestationKey
    device_class: str
    revoked: bool
    by: str
    at: datetime


class Registry:
    """The registry board: enrol, re-enrol and revoke AKs, issue and spend nonces.

    Args:
        store: ``None`` (memory), a store URL or a Store (the board is created if new).
        board_id: The board in the store.
        writer: The default writer of changes (an operator's name on the record).
    """

    def __init__(
        self,
        store: str | Store | None = None,
        board_id: str = REGISTRY_BOARD,
        *,
        writer: str = "operator",
    ) -> None:
        self.model = create_model(
            [
                Level(AKS, unique="slot"),
                Level(NONCES, unique="nonce"),
                Level(NONCE_USES, unique="nonce"),
                Level(CLOCKS),
                Level(CLASSES, unique="slot"),
            ],
            store=store,
            board_id=board_id,
        )
        self.board_id = board_id
        self.writer = writer
        # Folded from the board's log incrementally (``_refresh``): each look-up costs
        # only the records written since the last one, so a fleet of n devices is O(n).
        self._seen = 0
        self._aks: dict[str, tuple[int, Mapping[str, Any], datetime]] = {}
        self._nonces: dict[str, Mapping[str, Any]] = {}
        self._clocks: dict[str, list[Mapping[str, Any]]] = {}
        self._classes: dict[str, tuple[int, Any]] = {}

    def _refresh(self) -> None:
        """Take in every record written to the registry since the last look."""
        for record in self.model.reader.log(self._seen):
            self._seen = record.sequence
            if record.kind is not RecordKind.LEVEL:
                continue
            content = record.content
            if record.region == AKS:
                held = self._aks.get(content["device"])
                if held is None or content["version"] > held[0]:
                    self._aks[content["device"]] = (content["version"], content, record.at)
            elif record.region == NONCES:
                self._nonces[content["nonce"]] = content
            elif record.region == CLOCKS:
                self._clocks.setdefault(content["ak"], []).append(content)
            elif record.region == CLASSES:
                known = self._classes.get(content["name"])
                if known is None or content["version"] > known[0]:
                    self._classes[content["name"]] = (content["version"], content["class"])

    # -- attestation keys ---------------------------------------------------------------

    def ak(self, device: str) -> EnrolledAk | None:
        """The device's AK as enrolled now, or ``None`` if it was never enrolled."""
        self._refresh()
        held = self._aks.get(device)
        return None if held is None else self._enrolled(device, *held)

    def aks(self) -> dict[str, EnrolledAk]:
        """Every device's AK as enrolled now."""
        self._refresh()
        return {device: self._enrolled(device, *held) for device, held in self._aks.items()}

    def _enrolled(
        self, device: str, version: int, content: Mapping[str, Any], at: datetime
    ) -> EnrolledAk:
        return EnrolledAk(
            device,
            version,
            AttestationKey.from_json(content["ak"]),
            content["class"],
            content["action"] == "revoke",
            content["by"],
            at,
        )

    def enroll(
        self,
        device: str,
        key: AttestationKey,
        device_class: str,
        *,
        replace: bool = False,
        by: str | None = None,
    ) -> int:
        """Enrol ``device``'s AK; with ``replace``, re-enrol one already enrolled.

        Returns:
            The version written.

        Raises:
            FleetError: Already enrolled without ``replace`` (or ``replace`` of nothing),
                or another process changed the device at the same moment.
        """
        current = self.ak(device)
        if current is not None and not replace:
            raise FleetError(
                f"device {device!r} is already enrolled (version {current.version}, AK "
                f"{current.key.fingerprint[:16]}…, by {current.by})",
                hint="re-enrol it explicitly with --replace, or revoke it first",
            )
        if current is None and replace:
            raise FleetError(
                f"device {device!r} is not enrolled, so there is nothing to replace",
                hint="enrol it without --replace",
            )
        return self._change(device, current, "enroll", key, device_class, by)

    def revoke(self, device: str, *, by: str | None = None) -> int:
        """Revoke ``device``'s AK: its quotes are refused until it is re-enrolled.

        Raises:
            FleetError: The device is not enrolled, or is revoked already.
        """
        current = self.ak(device)
        if current is None or current.revoked:
            state = "not enrolled" if current is None else "revoked already"
            raise FleetError(f"device {device!r} is {state}", hint="nothing to revoke")
        return self._change(device, current, "revoke", current.key, current.device_class, by)

    def _change(
        self,
        device: str,
        current: EnrolledAk | None,
        action: str,
        key: AttestationKey,
        device_class: str,
        by: str | None,
    ) -> int:
        version = 1 if current is None else current.version + 1
        content = {
            "slot": f"{device}@{version}",
            "device": device,
            "version": version,
            "action": action,
            "ak": key.to_json(),
            "fingerprint": key.fingerprint,
            "class": device_class,
            "by": by or self.writer,
        }
        result = self.model.control.write(by or self.writer, AKS, content)
        if isinstance(result, Rejected):
            raise FleetError(
                f"the registry refused to {action} {device!r} at version {version}: "
                f"{result.reason}",
                hint="another process changed this device at the same moment; look and retry",
            )
        return version

    # -- nonces -------------------------------------------------------------------------

    def challenge(
        self, device: str, *, ttl: timedelta = NONCE_TTL, now: datetime | None = None
    ) -> bytes:
        """Issue a fresh random nonce for ``device`` to quote over; it expires after ``ttl``."""
        issued = now or datetime.now(UTC)
        for _ in range(4):
            nonce = secrets.token_bytes(NONCE_BYTES)
            content = {
                "nonce": nonce.hex(),
                "device": device,
                "issued": issued.isoformat(),
                "expires": (issued + ttl).isoformat(),
            }
            result = self.model.control.write(self.writer, NONCES, content)
            if not isinstance(result, Rejected):
                self._nonces[nonce.hex()] = content
                return nonce
        raise FleetError("could not record a nonce on the registry board")  # pragma: no cover

    def spend(self, device: str, nonce: bytes, *, now: datetime | None = None) -> None:
        """Spend a quote's nonce: it must have been issued to ``device``, unexpired, unused.

        Raises:
            QuoteError: ``nonce_unknown``, ``nonce_expired`` or ``nonce_reused``.
        """
        shown = nonce.hex()
        issued = self._issued(shown)
        if issued is None or issued["device"] != device:
            whom = "" if issued is None else f" (it was issued to {issued['device']!r})"
            raise QuoteError(
                Reason.NONCE_UNKNOWN,
                f"the quote's extraData {_clip(shown)} is not a nonce this verifier issued to "
                f"{device!r}{whom}",
                path="quote.msg",
                field="extraData",
                device=device,
                hint="quote over a nonce from `pybb attest challenge DEVICE` (tpm2_quote -q)",
            )
        at = now or datetime.now(UTC)
        expires = datetime.fromisoformat(issued["expires"])
        use = {"nonce": shown, "device": device, "at": at.isoformat()}
        if at >= expires:
            raise QuoteError(
                Reason.NONCE_EXPIRED,
                f"the quote's nonce {_clip(shown)} expired at {expires.isoformat()} "
                f"(issued {issued['issued']})",
                path="quote.msg",
                field="extraData",
                device=device,
                hint="challenge the device again and quote over the new nonce within "
                f"{int(NONCE_TTL.total_seconds() // 60)} minutes",
            )
        result = self.model.control.write(self.writer, NONCE_USES, use)
        if isinstance(result, Rejected) and result.cause is RejectionCause.DUPLICATE:
            raise QuoteError(
                Reason.NONCE_REUSED,
                f"the quote's nonce {_clip(shown)} was spent by an earlier quote: this is a "
                "replayed (or resubmitted) quote",
                path="quote.msg",
                field="extraData",
                device=device,
                hint="a quote counts once; challenge the device again for a fresh quote, and "
                "quarantine it if nobody resubmitted this one",
            )
        if isinstance(result, Rejected):  # pragma: no cover - a closed registry
            raise FleetError(f"the registry refused to spend a nonce: {result.reason}")

    def _issued(self, nonce: str) -> Mapping[str, Any] | None:
        if nonce not in self._nonces:
            self._refresh()
        return self._nonces.get(nonce)

    # -- clocks -------------------------------------------------------------------------

    def observe_clock(self, device: str, key: AttestationKey, clock: ClockInfo) -> None:
        """Record an accepted quote's clockInfo; refuse one behind what the AK showed before.

        Raises:
            QuoteError: ``clock_rollback``, naming the field and both values.
        """
        fingerprint = key.fingerprint
        self._refresh()
        seen = self._clocks.get(fingerprint, [])
        problem = _rollback(seen, clock)
        if problem is not None:
            raise QuoteError(
                Reason.CLOCK_ROLLBACK,
                f"{problem}: a TPM's counters never go backwards, so this quote is older than "
                "one already accepted from this AK (a replay), or the TPM was cleared",
                path="quote.msg",
                field="clockInfo",
                device=device,
                hint="quarantine the device; if its TPM was cleared, re-enrol its new AK",
            )
        content = {
            "ak": fingerprint,
            "device": device,
            "clock": clock.clock,
            "reset_count": clock.reset_count,
            "restart_count": clock.restart_count,
        }
        self.model.control.write(self.writer, CLOCKS, content)

    # -- device classes -----------------------------------------------------------------

    def add_class(self, device_class: DeviceClass, *, by: str | None = None) -> int:
        """Record (or replace) a device class; the latest version is the one in force."""
        self._refresh()
        held = self._classes.get(device_class.name)
        version = 1 if held is None else held[0] + 1
        content = {
            "slot": f"{device_class.name}@{version}",
            "name": device_class.name,
            "version": version,
            "class": device_class.to_json(),
        }
        result = self.model.control.write(by or self.writer, CLASSES, content)
        if isinstance(result, Rejected):
            raise FleetError(f"the registry refused class {device_class.name!r}: {result.reason}")
        return version

    def classes(self) -> dict[str, DeviceClass]:
        """The device classes in force, by name."""
        self._refresh()
        return {name: DeviceClass.from_json(data) for name, (_, data) in self._classes.items()}

    def close(self) -> None:
        """Release the store if the registry opened it."""
        self.model.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rollback(seen: list[Mapping[str, Any]], clock: ClockInfo) -> str | None:
    if not seen:
        return None
    reset = max(s["reset_count"] for s in seen)
    if clock.reset_count < reset:
        return f"resetCount {clock.reset_count} is behind {reset}"
    if clock.reset_count == reset:
        restart = max(s["restart_count"] for s in seen if s["reset_count"] == reset)
        if clock.restart_count < restart:
            return f"restartCount {clock.restart_count} is behind {restart} (resetCount {reset})"
    latest = max(s["clock"] for s in seen)
    if clock.clock < latest:
        return f"clock {clock.clock} ms is behind {latest} ms"
    return None


def _clip(text: str) -> str:
    return text if len(text) <= 24 else text[:24] + "…"

"""What the attestation tree reports: findings, tier reports, device results, fleet reports.

A :class:`TierReport` is what a tier attaches to its attempt on the board (as JSON) and
what an escalation carries: the device, the tier, and one :class:`Finding` per thing the
tier found, each naming the PCR, event number, event type, description and the expected
and found digests. It reads as text (:meth:`TierReport.text`) and offers the options a
person could choose (:meth:`TierReport.options`), shaped as ``pybb.human.Option`` JSON.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_FINDINGS",
    "DeviceOutcome",
    "DeviceResult",
    "Finding",
    "FleetReport",
    "GroundTruth",
    "Reason",
    "Tier",
    "TierReport",
]

MAX_FINDINGS = 32
"""The most findings a tier report keeps (the rest are counted in ``omitted``)."""

_MAX_TEXT = 300


class Tier(enum.StrEnum):
    """The tiers of the attestation tree."""

    INTEGRITY = "integrity"
    """The cheap check: quoted PCRs equal the class's reference values (the entry's conditions)."""
    ATTRIBUTION = "attribution"
    """``on_fail``: replays the log event by event, names what differs, repairs what is allowed."""
    VERIFICATION = "verification"
    """``on_pass``: replays the whole log against the quote, checks Secure Boot and the denylist."""


class Reason(enum.StrEnum):
    """What a finding is; for an escalated device, why it was escalated.

    The order of the members is their priority: a device with several unexplained
    findings is escalated for the first of them in this order.
    """

    BAD_EVIDENCE = "bad_evidence"
    """The evidence file could not be used (see its :class:`EvidenceError`)."""
    BAD_QUOTE = "bad_quote"
    """``quote.msg``/``quote.sig``/``quote.pcrs`` cannot be read, or use an unknown algorithm."""
    UNKNOWN_AK = "unknown_ak"
    """The device has no enrolled attestation key."""
    REVOKED_AK = "revoked_ak"
    """The device's attestation key was revoked."""
    BAD_SIGNATURE = "bad_signature"
    """The quote's signature does not verify with the device's enrolled AK."""
    NONCE_UNKNOWN = "nonce_unknown"
    """The quote's extraData is not a nonce this verifier issued to the device."""
    NONCE_EXPIRED = "nonce_expired"
    """The quote's nonce was issued but has expired."""
    NONCE_REUSED = "nonce_reused"
    """The quote's nonce was used by an earlier quote (a replay)."""
    CLOCK_ROLLBACK = "clock_rollback"
    """The quote's clock, resetCount or restartCount is behind one already seen from the AK."""
    PCR_DIGEST_MISMATCH = "pcr_digest_mismatch"
    """The quote's signed pcrDigest is not the hash of the PCRs the event log replays to."""
    CORRUPT_LOG = "corrupt_log"
    """The event log is corrupt, truncated, empty or uses an unknown algorithm."""
    MISSING_QUOTE = "missing_quote"
    """The quote lacks a value for a PCR the policy covers."""
    LOG_QUOTE_MISMATCH = "log_quote_mismatch"
    """Replaying the log does not give the quoted value."""
    EVENT_DATA_MISMATCH = "event_data_mismatch"
    """An event's data does not hash to its digest where the PC Client spec says it must."""
    SECURE_BOOT_OFF = "secure_boot_off"
    """The policy requires Secure Boot and the log measured it off (or not at all)."""
    DENIED_COMPONENT = "denied_component"
    """A measured digest is on the policy's denylist."""
    TAMPERED_COMPONENT = "tampered_component"
    """A component differs from the reference manifest and its digest is not allowed."""
    TIER_ERROR = "tier_error"
    """The tier itself failed without a report (a bug; see the attempt's error)."""
    SANCTIONED_UPDATE = "sanctioned_update"
    """A component differs from the manifest with an allowed digest: repaired, not escalated."""


_PRIORITY = {reason: rank for rank, reason in enumerate(Reason)}


class DeviceOutcome(enum.StrEnum):
    """Where a device landed."""

    PASSED = "passed"
    """The cheap check passed and the verification tier confirmed it."""
    REPAIRED = "repaired"
    """The cheap check failed and the attribution tier explained every difference by policy."""
    ESCALATED = "escalated"
    """A tier could not pass it; it waits for a person, with the tier's report."""
    RESOLVED = "resolved"
    """A person resolved its escalation."""
    PENDING = "pending"
    """Not settled yet (the run was stopped)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a tier found about a device.

    Attributes:
        reason: What it is.
        message: One readable sentence.
        pcr: The PCR concerned, if any.
        event: The event number (as ``tpm2_eventlog`` numbers them), if any.
        offset: The byte offset in the log (for a log that cannot be parsed).
        event_type: The TCG event type name.
        description: What the event measured, decoded for a person.
        label: The stable name of what it measured (the allowlist slot's label).
        bank: The bank of ``expected`` and ``found``.
        expected: The expected digest or PCR value, in hex.
        found: The digest or PCR value found, in hex.
    """

    reason: Reason
    message: str
    pcr: int | None = None
    event: int | None = None
    offset: int | None = None
    event_type: str | None = None
    description: str | None = None
    label: str | None = None
    bank: str | None = None
    expected: str | None = None
    found: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON object (``None`` fields left out)."""
        data: dict[str, Any] = {"reason": self.reason.value, "message": self.message}
        for name in _FINDING_FIELDS:
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        """Read the object :meth:`to_json` wrote."""
        values = {name: data.get(name) for name in _FINDING_FIELDS}
        return cls(Reason(data["reason"]), data["message"], **values)

    def text(self) -> str:
        """The finding as a few readable lines."""
        where = []
        if self.pcr is not None:
            where.append(f"PCR {self.pcr}")
        if self.event is not None:
            where.append(f"event {self.event}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        if self.event_type is not None:
            where.append(self.event_type)
        head = ", ".join(where)
        lines = [f"  {head}: {self.message}" if head else f"  {self.message}"]
        if self.description:
            lines.append(f"    measured: {_clip(self.description)}")
        bank = f"{self.bank} " if self.bank else ""
        if self.expected is not None:
            lines.append(f"    expected {bank}{self.expected}")
        if self.expected is not None or self.found is not None:
            lines.append(f"    found    {bank}{self.found or '(none)'}")
        return "\n".join(lines)


_FINDING_FIELDS = (
    "pcr",
    "event",
    "offset",
    "event_type",
    "description",
    "label",
    "bank",
    "expected",
    "found",
)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


@dataclass(frozen=True, slots=True)
class TierReport:
    """What one tier found about one device; what an escalation carries.

    Attributes:
        device: The device.
        tier: The tier that wrote it.
        device_class: The device's class, when its evidence named a known one.
        findings: What it found, most important first, at most :data:`MAX_FINDINGS`.
        omitted: How many more findings there were.
    """

    device: str
    tier: Tier
    device_class: str | None = None
    findings: tuple[Finding, ...] = ()
    omitted: int = 0

    @classmethod
    def of(
        cls, device: str, tier: Tier, device_class: str | None, findings: Iterable[Finding]
    ) -> TierReport:
        """A report of ``findings``, ordered by priority and capped at :data:`MAX_FINDINGS`."""
        ordered = sorted(findings, key=lambda f: (_PRIORITY[f.reason], f.event or 0, f.pcr or 0))
        kept = tuple(ordered[:MAX_FINDINGS])
        return cls(device, tier, device_class, kept, len(ordered) - len(kept))

    @property
    def unexplained(self) -> tuple[Finding, ...]:
        """The findings policy does not explain (everything but sanctioned updates)."""
        return tuple(f for f in self.findings if f.reason is not Reason.SANCTIONED_UPDATE)

    @property
    def passed(self) -> bool:
        """Whether the tier passes the device: every finding is a sanctioned update."""
        return not self.unexplained

    @property
    def reason(self) -> Reason | None:
        """Why the device is escalated (the first unexplained finding), or ``None``."""
        unexplained = self.unexplained
        return unexplained[0].reason if unexplained else None

    @property
    def title(self) -> str:
        """One line a person reads first."""
        reason = self.reason
        kind = f" ({self.device_class})" if self.device_class else ""
        if reason is None and self.findings:
            count = len(self.findings) + self.omitted
            return f"Device {self.device}{kind}: repaired, {count} sanctioned update(s)"
        if reason is None:
            return f"Device {self.device}{kind} passed the {self.tier.value} tier"
        return f"Device {self.device}{kind}: {_TITLES[reason]}"

    def text(self) -> str:
        """The report as readable text: the title, then each finding."""
        lines = [f"{self.title} [{self.tier.value} tier]"]
        lines += [finding.text() for finding in self.findings]
        if self.omitted:
            lines.append(f"  … and {self.omitted} more finding(s)")
        return "\n".join(lines)

    def allowlist_candidates(self) -> tuple[dict[str, Any], ...]:
        """The digests a person could accept into the class allowlist (tampered ones).

        Each names its slot: the PCR, the event type and the component's label, so
        accepting it sanctions the digest there and nowhere else.
        """
        seen: dict[tuple[int, str, str | None, str | None], dict[str, Any]] = {}
        for finding in self.findings:
            if (
                finding.reason is Reason.TAMPERED_COMPONENT
                and finding.pcr is not None
                and finding.found is not None
                and finding.event is not None
            ):
                seen.setdefault(
                    (finding.pcr, finding.found, finding.event_type, finding.label),
                    {
                        "class": self.device_class,
                        "pcr": finding.pcr,
                        "event_type": finding.event_type,
                        "label": finding.label,
                        "bank": finding.bank,
                        "digest": finding.found,
                    },
                )
        return tuple(seen.values())

    def options(self) -> tuple[dict[str, Any], ...]:
        """The 2–4 options a person could choose, as ``pybb.human.Option`` JSON objects."""
        reason = self.reason
        if reason is None:
            return ()
        quarantine = _option(
            "quarantine",
            "Quarantine the device",
            f"Keep {self.device} off the network until it has been re-imaged and attests clean.",
        )
        remeasure = _option(
            "remeasure",
            "Re-measure the device",
            f"Ask {self.device} for a fresh quote and event log, and attest it again.",
        )
        if reason in _REMEASURE:
            return ({**remeasure, "recommended": True}, quarantine)
        options = [{**quarantine, "recommended": True}, remeasure]
        candidates = self.allowlist_candidates()
        if reason is Reason.TAMPERED_COMPONENT and candidates and self.device_class:
            pcrs = sorted({c["pcr"] for c in candidates})
            options.insert(
                1,
                _option(
                    "accept-digest",
                    "Accept the new digest into the allowlist",
                    f"Add {len(candidates)} digest(s) to class {self.device_class}'s allowlist "
                    f"for PCR {', '.join(map(str, pcrs))}; this device and every other one "
                    "measuring them will then be repaired.",
                ),
            )
        return tuple(options)

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept on the board: everything needed to ask a person."""
        reason = self.reason
        return {
            "device": self.device,
            "class": self.device_class,
            "tier": self.tier.value,
            "passed": self.passed,
            "reason": None if reason is None else reason.value,
            "title": self.title,
            "findings": [finding.to_json() for finding in self.findings],
            "omitted": self.omitted,
            "options": list(self.options()),
            "allowlist_candidates": list(self.allowlist_candidates()),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TierReport:
        """Read the object :meth:`to_json` wrote."""
        return cls(
            data["device"],
            Tier(data["tier"]),
            data.get("class"),
            tuple(Finding.from_json(f) for f in data.get("findings", ())),
            int(data.get("omitted", 0)),
        )


_REMEASURE = (
    Reason.BAD_EVIDENCE,
    Reason.CORRUPT_LOG,
    Reason.MISSING_QUOTE,
    Reason.BAD_QUOTE,
    Reason.UNKNOWN_AK,
    Reason.NONCE_EXPIRED,
)
"""Reasons a fresh measurement (or an enrolment) can cure: ask again first."""

_TITLES = {
    Reason.BAD_EVIDENCE: "its evidence could not be used",
    Reason.BAD_QUOTE: "its quote cannot be read",
    Reason.UNKNOWN_AK: "it has no enrolled attestation key",
    Reason.REVOKED_AK: "its attestation key was revoked",
    Reason.BAD_SIGNATURE: "its quote's signature does not verify with its AK",
    Reason.NONCE_UNKNOWN: "its quote's nonce was never issued to it",
    Reason.NONCE_EXPIRED: "its quote's nonce has expired",
    Reason.NONCE_REUSED: "its quote's nonce was used before (a replayed quote)",
    Reason.CLOCK_ROLLBACK: "its TPM clock went backwards",
    Reason.PCR_DIGEST_MISMATCH: "its event log does not give the signed PCR digest",
    Reason.CORRUPT_LOG: "its event log cannot be read",
    Reason.MISSING_QUOTE: "its quote lacks a PCR the policy covers",
    Reason.LOG_QUOTE_MISMATCH: "its event log does not match its quote",
    Reason.EVENT_DATA_MISMATCH: "its event log holds data its digests do not vouch for",
    Reason.SECURE_BOOT_OFF: "Secure Boot is off but the policy requires it",
    Reason.DENIED_COMPONENT: "it booted a component on the denylist",
    Reason.TAMPERED_COMPONENT: "a boot component differs and its digest is not allowed",
    Reason.TIER_ERROR: "the attestation tier failed",
    Reason.SANCTIONED_UPDATE: "a sanctioned update",
}


def _option(option_id: str, label: str, detail: str) -> dict[str, Any]:
    return {"id": option_id, "label": label, "recommended": False, "detail": detail}


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """What a generated device really is, and where it should land.

    Attributes:
        kind: ``clean``, ``sanctioned_update``, ``tampered_component``,
            ``log_quote_mismatch``, ``secure_boot_off`` or ``corrupt_log`` (or any
            label a fleet's author chose).
        outcome: Where the device should land.
        reason: For an escalation, why.
        detail: What was done to the device, in words.
    """

    kind: str
    outcome: DeviceOutcome
    reason: Reason | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept in a fleet's ``truth.json``."""
        return {
            "kind": self.kind,
            "outcome": self.outcome.value,
            "reason": None if self.reason is None else self.reason.value,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """Where one device landed and why.

    Attributes:
        device: The device (its entry key on the board).
        outcome: Where it landed.
        tier: The tier that decided it (``None`` while pending).
        reason: For an escalation, why; for a repair, ``sanctioned_update``.
        device_class: Its class, when known.
        report: The deciding tier's report (for an escalation, the one it carries).
        truth: Its ground truth, when the fleet knows it.
    """

    device: str
    outcome: DeviceOutcome
    tier: Tier | None = None
    reason: Reason | None = None
    device_class: str | None = None
    report: TierReport | None = None
    truth: GroundTruth | None = None

    @property
    def correct(self) -> bool | None:
        """Whether it landed where its ground truth says (``None`` without one)."""
        if self.truth is None:
            return None
        if self.truth.outcome is not self.outcome:
            return False
        return self.outcome is not DeviceOutcome.ESCALATED or self.truth.reason is self.reason

    def to_json(self) -> dict[str, Any]:
        """The device's line of the JSON report."""
        data: dict[str, Any] = {
            "device": self.device,
            "class": self.device_class,
            "outcome": self.outcome.value,
            "tier": None if self.tier is None else self.tier.value,
            "reason": None if self.reason is None else self.reason.value,
        }
        if self.truth is not None:
            data["truth"] = self.truth.to_json()
            data["correct"] = self.correct
        if self.report is not None and self.report.findings:
            data["report"] = self.report.to_json()
            data["text"] = self.report.text()
        return data


@dataclass(frozen=True, slots=True)
class FleetReport:
    """Where every device of a fleet landed.

    Attributes:
        fleet: The fleet's name.
        devices: One result per device, in the fleet's order.
        quarantined: The devices people quarantined (a supervised run's board list).
    """

    fleet: str
    devices: tuple[DeviceResult, ...]
    quarantined: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """Devices per outcome (every outcome listed, zeros included)."""
        found = Counter(result.outcome for result in self.devices)
        return {outcome.value: found[outcome] for outcome in DeviceOutcome}

    def escalations(self) -> dict[str, int]:
        """Escalated devices per reason, in priority order."""
        found = Counter(
            r.reason for r in self.devices if r.outcome is DeviceOutcome.ESCALATED and r.reason
        )
        return {reason.value: found[reason] for reason in Reason if found[reason]}

    @property
    def known(self) -> int:
        """How many devices have a ground truth."""
        return sum(1 for result in self.devices if result.truth is not None)

    @property
    def accuracy(self) -> float | None:
        """The share of devices with a ground truth that landed where it says (or ``None``)."""
        known = [result.correct for result in self.devices if result.truth is not None]
        return sum(map(bool, known)) / len(known) if known else None

    def accuracy_by_kind(self) -> dict[str, dict[str, int]]:
        """Per ground-truth kind: how many devices, and how many landed right."""
        table: dict[str, dict[str, int]] = {}
        for result in self.devices:
            if result.truth is None:
                continue
            row = table.setdefault(result.truth.kind, {"devices": 0, "correct": 0})
            row["devices"] += 1
            row["correct"] += bool(result.correct)
        return dict(sorted(table.items()))

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON: summary, accuracy, and every device."""
        accuracy = self.accuracy
        held = set(self.quarantined)
        return {
            "fleet": self.fleet,
            "devices_total": len(self.devices),
            "summary": {**self.counts(), "escalated_by_reason": self.escalations()},
            "accuracy": None
            if accuracy is None
            else {
                "known": self.known,
                "correct": sum(1 for r in self.devices if r.correct),
                "rate": accuracy,
                "by_kind": self.accuracy_by_kind(),
            },
            "quarantined": list(self.quarantined),
            "devices": [
                {**result.to_json(), **({"quarantined": True} if result.device in held else {})}
                for result in self.devices
            ],
        }

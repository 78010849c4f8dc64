"""What the two tiers conclude about one device: pure functions of evidence and class.

:func:`verify` is the ``on_pass`` tier's judgement: replay the whole log, require it to
give the quoted values, read Secure Boot, apply the denylist. :func:`attribute` is the
``on_fail`` tier's: replay the log event by event, check the same, then align each
failing PCR's events with the reference manifest, naming every event that differs,
and decide which differences policy sanctions. Neither touches a board; the knowledge
sources in ``_tree`` put their conclusions there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from pybb.attestation._errors import EventLogError
from pybb.attestation._eventlog import BootComponent, Event, EventLog, parse_event_log
from pybb.attestation._evidence import Evidence
from pybb.attestation._policy import BANK_SIZES, DeviceClass, Policy
from pybb.attestation._replay import PcrValues, iter_replay, replay
from pybb.attestation._report import Finding, Reason, Tier, TierReport
from pybb.attestation._tcg import EventType

__all__ = ["Attribution", "attribute", "bad_evidence", "verify"]

_DRIVER_CONFIG = int(EventType.EV_EFI_VARIABLE_DRIVER_CONFIG)


@dataclass(frozen=True, slots=True)
class Attribution:
    """The attribution tier's conclusion.

    Attributes:
        report: What it found.
        repairs: For a device it passes, each failing PCR's new reference value (the
            quoted value, in hex) and the sanctioned findings that explain it.
    """

    report: TierReport
    repairs: Mapping[int, tuple[str, tuple[Finding, ...]]]


def bad_evidence(device: str, tier: Tier, problem: str, field: str | None) -> TierReport:
    """The report of a device whose evidence could not be used."""
    finding = Finding(Reason.BAD_EVIDENCE, problem if field is None else f"{field}: {problem}")
    return TierReport.of(device, tier, None, [finding])


def verify(evidence: Evidence, device_class: DeviceClass) -> TierReport:
    """The verification tier: the whole log must give the quote and satisfy the policy."""
    tier = Tier.VERIFICATION
    try:
        log = parse_event_log(evidence.log)
        final = replay(log)
    except EventLogError as exc:
        return TierReport.of(evidence.device, tier, device_class.name, [_corrupt(exc)])
    mismatches = _quote_findings(log, final, evidence)
    findings = [
        *mismatches,
        *_culprits(log, device_class, mismatches),
        *_secure_boot(log, device_class),
        *_denied(log, device_class.policy),
    ]
    return TierReport.of(evidence.device, tier, device_class.name, findings)


def _culprits(log: EventLog, device_class: DeviceClass, mismatches: list[Finding]) -> list[Finding]:
    """The events of a covered PCR whose log does not match its quote that differ from the manifest.

    The quote vouches for the reference (the cheap check passed), so an event that
    differs from the manifest in such a PCR is where the log was changed.
    """
    bank = device_class.policy.bank
    pcrs = {f.pcr for f in mismatches if f.bank == bank and f.pcr in device_class.reference}
    findings = []
    for pcr in sorted(p for p in pcrs if p is not None):
        events = [e for e in log.events if e.measured and e.pcr_index == pcr]
        for expected, event in _differences(device_class.components(pcr), events, bank):
            if event is None:
                assert expected is not None
                findings.append(_missing_component(expected, bank))
                continue
            message = (
                "differs from the manifest, whose digest the quote vouches for: "
                "the log was changed here"
            )
            findings.append(
                _event_finding(Reason.LOG_QUOTE_MISMATCH, message, event, bank, expected)
            )
    return findings


def attribute(
    evidence: Evidence,
    device_class: DeviceClass,
    failing: Iterable[int],
    allowed: Mapping[int, frozenset[bytes]] | None = None,
) -> Attribution:
    """The attribution tier: name what differs in the failing PCRs; repair what policy allows.

    Args:
        evidence: The device's evidence.
        device_class: Its class.
        failing: The covered PCRs whose quoted value differs from the reference.
        allowed: The allowlist per PCR (default: the class policy's); the board's
            allowlist premise, extended by people, is passed here.
    """
    tier = Tier.ATTRIBUTION
    policy = device_class.policy
    try:
        log = parse_event_log(evidence.log)
        final, measured = _replay_steps(log)
    except EventLogError as exc:
        return Attribution(
            TierReport.of(evidence.device, tier, device_class.name, [_corrupt(exc)]), {}
        )
    findings = [
        *_missing_quote(evidence, device_class),
        *_quote_findings(log, final, evidence),
        *_secure_boot(log, device_class),
        *_denied(log, policy),
    ]
    explained = {f.event for f in findings if f.event is not None}
    allowlist = policy.allowed if allowed is None else allowed
    repairs: dict[int, tuple[str, tuple[Finding, ...]]] = {}
    for pcr in sorted(set(failing)):
        quoted = evidence.quote.get(policy.bank, {}).get(pcr)
        if quoted is None:
            continue
        found, differs = _pcr_findings(
            device_class, pcr, measured.get(pcr, ()), explained, allowlist
        )
        replayed = final.get(policy.bank, {}).get(pcr)
        if replayed == quoted and not differs:
            found.append(_disagreement(device_class, pcr))
        findings += found
        if found and replayed == quoted:
            repairs[pcr] = (quoted.hex(), tuple(found))
    report = TierReport.of(evidence.device, tier, device_class.name, findings)
    return Attribution(report, repairs if report.passed else {})


# -- replay ---------------------------------------------------------------------------------


def _replay_steps(log: EventLog) -> tuple[PcrValues, dict[int, list[Event]]]:
    """Replay event by event: the final values, and each PCR's extending events in order."""
    final: PcrValues = {}
    measured: dict[int, list[Event]] = {}
    for step in iter_replay(log):
        pcr = step.event.pcr_index
        for bank, value in step.values.items():
            final.setdefault(bank, {})[pcr] = value
        if step.extended:
            measured.setdefault(pcr, []).append(step.event)
    return final, measured


def _corrupt(exc: EventLogError) -> Finding:
    return Finding(Reason.CORRUPT_LOG, str(exc), event=exc.event, offset=exc.offset)


# -- the checks both tiers make --------------------------------------------------------------


def _quote_findings(log: EventLog, final: PcrValues, evidence: Evidence) -> list[Finding]:
    """Every quoted value the log's replay does not give."""
    findings: list[Finding] = []
    for bank, values in evidence.quote.items():
        if bank not in log.banks:
            findings.append(
                Finding(
                    Reason.LOG_QUOTE_MISMATCH,
                    f"the quote reports {bank} values but the log carries no {bank} bank "
                    f"(it carries {', '.join(log.banks)})",
                    bank=bank,
                )
            )
            continue
        replayed = final.get(bank, {})
        zero = bytes(BANK_SIZES[bank])
        for pcr, quoted in values.items():
            found = replayed.get(pcr, zero)
            if found != quoted:
                findings.append(_mismatch(log, bank, pcr, quoted, found))
    return findings


def _mismatch(log: EventLog, bank: str, pcr: int, quoted: bytes, found: bytes) -> Finding:
    last = _last_event(log, pcr)
    message = (
        f"replaying the log gives PCR {pcr} a {bank} value other than the quoted one"
        + ("" if last is None else f" (its last extend is event {last.index})")
        + "; the log does not match the quote"
    )
    return Finding(
        Reason.LOG_QUOTE_MISMATCH,
        message,
        pcr=pcr,
        event=None if last is None else last.index,
        event_type=None if last is None else last.type_name,
        bank=bank,
        expected=quoted.hex(),
        found=found.hex(),
    )


def _last_event(log: EventLog, pcr: int) -> Event | None:
    for event in reversed(log.events):
        if event.pcr_index == pcr and event.measured:
            return event
    return None


def _secure_boot(log: EventLog, device_class: DeviceClass) -> list[Finding]:
    policy = device_class.policy
    if not policy.secure_boot_required:
        return []
    state = log.secure_boot
    if state is True:
        return []
    event = _secure_boot_event(log)
    if event is None:
        return [
            Finding(
                Reason.SECURE_BOOT_OFF,
                "the log does not measure the SecureBoot variable; the policy requires "
                "Secure Boot on",
            )
        ]
    expected = next(
        (c for c in device_class.components(event.pcr_index) if c.label.startswith("SecureBoot")),
        None,
    )
    return [
        _event_finding(
            Reason.SECURE_BOOT_OFF,
            "the log measured Secure Boot off; the policy requires it on",
            event,
            policy.bank,
            expected,
        )
    ]


def _secure_boot_event(log: EventLog) -> Event | None:
    for event in log.events:
        if event.event_type == _DRIVER_CONFIG and event.label.startswith("SecureBoot "):
            return event
    return None


def _denied(log: EventLog, policy: Policy) -> list[Finding]:
    denied = policy.denied
    if not denied:
        return []
    findings = []
    for event in log.events:
        if not event.measured:
            continue
        for bank, digest in event.digests.items():
            if digest in denied:
                message = f"the {bank} digest is on the policy's denylist"
                findings.append(_event_finding(Reason.DENIED_COMPONENT, message, event, bank))
                break
    return findings


def _missing_quote(evidence: Evidence, device_class: DeviceClass) -> list[Finding]:
    bank = device_class.policy.bank
    values = evidence.quote.get(bank)
    if not values:
        return [
            Finding(
                Reason.MISSING_QUOTE,
                f"the quote reports no {bank} values; the policy covers PCRs "
                f"{', '.join(map(str, device_class.policy.pcrs))}",
                bank=bank,
            )
        ]
    return [
        Finding(
            Reason.MISSING_QUOTE,
            f"the quote reports no {bank} value for PCR {pcr}, which the policy covers",
            pcr=pcr,
            bank=bank,
            expected=device_class.reference[pcr].hex(),
        )
        for pcr in device_class.policy.pcrs
        if pcr not in values
    ]


def _event_finding(
    reason: Reason,
    message: str,
    event: Event,
    bank: str,
    expected: BootComponent | None = None,
) -> Finding:
    digest = event.digests.get(bank)
    return Finding(
        reason,
        message,
        pcr=event.pcr_index,
        event=event.index,
        event_type=event.type_name,
        description=event.description,
        bank=bank,
        expected=None if expected is None else expected.digests[bank].hex(),
        found=None if digest is None else digest.hex(),
    )


# -- attribution against the manifest ------------------------------------------------------


def _pcr_findings(
    device_class: DeviceClass,
    pcr: int,
    events: Sequence[Event],
    explained: set[int],
    allowed: Mapping[int, frozenset[bytes]],
) -> tuple[list[Finding], bool]:
    """What differs between a PCR's events and the manifest, each judged by policy.

    Returns:
        The findings (differences already explained by another finding left out),
        and whether anything differed at all.
    """
    bank = device_class.policy.bank
    allow = allowed.get(pcr, frozenset())
    differences = _differences(device_class.components(pcr), events, bank)
    findings = []
    for expected, event in differences:
        if event is None:
            assert expected is not None
            findings.append(_missing_component(expected, bank))
        elif event.index not in explained:
            findings.append(_judge(event, expected, bank, allow))
    return findings, bool(differences)


def _disagreement(device_class: DeviceClass, pcr: int) -> Finding:
    return Finding(
        Reason.TAMPERED_COMPONENT,
        f"PCR {pcr} differs from its reference value although every event matches the "
        "manifest; the class's reference values and manifest disagree",
        pcr=pcr,
        bank=device_class.policy.bank,
    )


def _differences(
    expected: Sequence[BootComponent], events: Sequence[Event], bank: str
) -> list[tuple[BootComponent | None, Event | None]]:
    """Align the manifest with the log by component identity; return what differs."""
    if len(expected) == len(events) and all(
        c.digests[bank] == e.digests.get(bank) for c, e in zip(expected, events, strict=True)
    ):
        return []
    found = [(e.pcr_index, e.type_name, e.label) for e in events]
    matcher = SequenceMatcher(None, [c.identity for c in expected], found, autojunk=False)
    pairs: list[tuple[BootComponent | None, Event | None]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += [
                (expected[i], events[j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                if expected[i].digests[bank] != events[j].digests.get(bank)
            ]
            continue
        shared = min(i2 - i1, j2 - j1)
        pairs += [(expected[i1 + k], events[j1 + k]) for k in range(shared)]
        pairs += [(expected[i], None) for i in range(i1 + shared, i2)]
        pairs += [(None, events[j]) for j in range(j1 + shared, j2)]
    return pairs


def _judge(
    event: Event, expected: BootComponent | None, bank: str, allow: frozenset[bytes]
) -> Finding:
    digest = event.digests.get(bank)
    what = "differs from the manifest" if expected is not None else "is not in the manifest"
    if digest is not None and digest in allow:
        message = f"{what}; its digest is allowed for PCR {event.pcr_index}: a sanctioned update"
        return _event_finding(Reason.SANCTIONED_UPDATE, message, event, bank, expected)
    message = f"{what} and its digest is not allowed for PCR {event.pcr_index}"
    return _event_finding(Reason.TAMPERED_COMPONENT, message, event, bank, expected)


def _missing_component(expected: BootComponent, bank: str) -> Finding:
    return Finding(
        Reason.TAMPERED_COMPONENT,
        f"the manifest's {expected.type_name} {expected.label!r} (reference event "
        f"{expected.event_index}) is missing from the log",
        pcr=expected.pcr_index,
        event_type=expected.type_name,
        description=expected.label,
        bank=bank,
        expected=expected.digests[bank].hex(),
    )

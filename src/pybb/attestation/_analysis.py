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
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Any

from pybb.attestation._errors import EventLogError
from pybb.attestation._eventdata import check_event, data_mismatches, secure_boot_event
from pybb.attestation._eventlog import BootComponent, Event, EventLog, parse_event_log
from pybb.attestation._evidence import Evidence
from pybb.attestation._policy import BANK_SIZES, DeviceClass, Policy
from pybb.attestation._replay import PcrValues, iter_replay, replay
from pybb.attestation._report import Finding, Reason, Tier, TierReport
from pybb.attestation._slots import Allowlist

__all__ = ["Attribution", "attribute", "bad_evidence", "verify"]


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


def bad_evidence(
    device: str,
    tier: Tier,
    problem: str,
    field: str | None,
    reason: Reason | None = None,
    *,
    path: str | None = None,
    hint: str | None = None,
) -> TierReport:
    """The report of a device whose evidence could not be used (or whose quote was refused).

    A refused quote (``reason`` given) also names the file and says what to do.
    """
    message = problem if field is None else f"{field}: {problem}"
    if reason is not None:
        message = f"{path}: {message}" if path else message
        message = f"{message}; {hint}" if hint else message
    finding = Finding(reason or Reason.BAD_EVIDENCE, message)
    return TierReport.of(device, tier, None, [finding])


def verify(
    evidence: Evidence, device_class: DeviceClass, *, parsed: EventLog | None = None
) -> TierReport:
    """The verification tier: the whole log must give the quote and satisfy the policy.

    ``parsed``: ``evidence.log`` already parsed (a quote verifier has done it), to save
    parsing it again.
    """
    tier = Tier.VERIFICATION
    try:
        log = parse_event_log(evidence.log) if parsed is None else parsed
        final = replay(log)
    except EventLogError as exc:
        return TierReport.of(evidence.device, tier, device_class.name, [_corrupt(exc)])
    mismatches = _quote_findings(log, final, evidence)
    findings = [
        *mismatches,
        *_culprits(log, device_class, mismatches),
        *_event_data(log, device_class.policy.bank),
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
    allowed: Mapping[Any, Iterable[bytes]] | None = None,
) -> Attribution:
    """The attribution tier: name what differs in the failing PCRs; repair what policy allows.

    Args:
        evidence: The device's evidence.
        device_class: Its class.
        failing: The covered PCRs whose quoted value differs from the reference.
        allowed: The class's :class:`Allowlist` (default: the class policy's); the
            board's allowlist premise, extended by people, is passed here. Each digest
            is sanctioned only in its slot (PCR, event type, label).
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
        *_event_data(log, device_class.policy.bank),
        *_secure_boot(log, device_class),
        *_denied(log, policy),
    ]
    explained = {f.event for f in findings if f.event is not None}
    if allowed is None:
        allowlist = policy.allowed
    else:
        allowlist = allowed if isinstance(allowed, Allowlist) else Allowlist(allowed)
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


def _event_data(log: EventLog, policy_bank: str) -> list[Finding]:
    """Every event whose data does not hash to its digest where the PC Client spec says so."""
    findings = []
    for event, check in data_mismatches(log.events):
        bank = policy_bank if policy_bank in check.computed else next(iter(check.computed))
        recorded = event.digests[bank].hex()
        computed = check.computed[bank].hex()
        findings.append(
            Finding(
                Reason.EVENT_DATA_MISMATCH,
                f"its data does not hash to its digest ({check.rule} rule): the log "
                f"records {bank} {recorded[:16]}…, its data hashes to {computed[:16]}…; "
                "the data was changed after it was measured",
                pcr=event.pcr_index,
                event=event.index,
                event_type=event.type_name,
                description=event.description,
                bank=bank,
                expected=recorded,
                found=computed,
            )
        )
    return findings


def _secure_boot(log: EventLog, device_class: DeviceClass) -> list[Finding]:
    policy = device_class.policy
    if not policy.secure_boot_required:
        return []
    state = log.secure_boot
    if state is True:
        return []
    found = secure_boot_event(log.events)
    if found is None:
        return [
            Finding(
                Reason.SECURE_BOOT_OFF,
                "the log does not measure the SecureBoot variable in PCR 7; the policy "
                "requires Secure Boot on",
            )
        ]
    event = found[0]
    expected = next(
        (c for c in device_class.components(event.pcr_index) if c.label.startswith("SecureBoot")),
        None,
    )
    message = (
        "the log measured Secure Boot off; the policy requires it on"
        if check_event(event).verified
        else "the SecureBoot variable's data does not match its digest, so Secure Boot "
        "cannot be shown on; the policy requires it on"
    )
    return [_event_finding(Reason.SECURE_BOOT_OFF, message, event, policy.bank, expected)]


def _denied(log: EventLog, policy: Policy) -> list[Finding]:
    if not policy.denied and not policy.denied_at:
        return []
    findings = []
    for event in log.events:
        if not event.measured:
            continue
        for bank, digest in event.digests.items():
            if policy.denies(event.pcr_index, digest):
                where = "" if digest in policy.denied else f" for PCR {event.pcr_index}"
                message = f"the {bank} digest is on the policy's denylist{where}"
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
        label=event.label,
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
    allowed: Allowlist,
) -> tuple[list[Finding], bool]:
    """What differs between a PCR's events and the manifest, each judged by policy.

    Returns:
        The findings (differences already explained by another finding left out),
        and whether anything differed at all.
    """
    bank = device_class.policy.bank
    manifest = device_class.components(pcr)
    types = frozenset(c.type_name for c in manifest)
    differences = _differences(manifest, events, bank)
    findings = []
    for expected, event in differences:
        if event is None:
            assert expected is not None
            findings.append(_missing_component(expected, bank))
        elif event.index not in explained:
            kind, label = _place(event, expected)
            # no label ("") is one only slots naming no label admit
            allow = allowed.allowed_at(pcr, kind, label or "", types)
            findings.append(_judge(event, expected, bank, allow, kind, label))
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


def _place(event: Event, expected: BootComponent | None) -> tuple[str, str | None]:
    """The slot an event stands in: ``(event type, label)`` as far as they can be believed.

    Neither an event's type nor, unless its data verifies against its digest, its data
    is vouched for by the PCRs: a log can relabel a boot image or retype an S-CRTM
    version event at will. So an event aligned with a manifest component stands in
    that component's place (its type, and its label unless the event's own data
    verifies, as a UEFI variable's does); an event the manifest lacks keeps its claimed
    type, and its label only if its data verifies (``None``: only slots naming no label
    can sanction it).
    """
    verified = check_event(event).verified
    if expected is not None:
        return expected.type_name, event.label if verified else expected.label
    return event.type_name, event.label if verified else None


def _judge(
    event: Event,
    expected: BootComponent | None,
    bank: str,
    allow: frozenset[bytes],
    kind: str,
    label: str | None,
) -> Finding:
    digest = event.digests.get(bank)
    what = "differs from the manifest" if expected is not None else "is not in the manifest"
    place = f"{kind} in PCR {event.pcr_index}"
    if digest is not None and digest in allow:
        message = f"{what}; its digest is allowed for {place}: a sanctioned update"
        found = _event_finding(Reason.SANCTIONED_UPDATE, message, event, bank, expected)
    else:
        message = f"{what} and its digest is not allowed for {place}"
        found = _event_finding(Reason.TAMPERED_COMPONENT, message, event, bank, expected)
    return replace(found, label=label)


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

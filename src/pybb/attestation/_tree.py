"""The attestation decision tree, as an application of pybb.

One entry per device, component-wise: one component per PCR its class's policy covers,
``{"quote": <quoted value>, "reference": <reference value>}``, each with the condition
``quote_matches_reference`` — the cheap integrity check. Every device is routed
``on_fail=[attribution]``, ``on_pass=[verification]``:

* a failing first verdict goes to :class:`AttributionTier`, which replays the log event
  by event, names what differs from the reference manifest, and writes the components
  that policy explains (a digest on the allowlist: the reference becomes the quoted
  value, the component passes). What it cannot explain stays failing; the controller
  escalates the device with the tier's report.
* a passing first verdict is provisional; :class:`VerificationTier` replays the whole
  log and requires the quote, Secure Boot (when required) and no denied digest. It fails
  its attempt with its report (``AttemptError``) otherwise, and the device is escalated.

A device whose evidence cannot be loaded gets one component, ``evidence``, with the
problem and the condition ``evidence_loaded`` (which it fails): it is escalated by the
attribution tier with a ``bad_evidence`` report, and the rest of the fleet runs on.

The class allowlists live on the board, in the premise :data:`ALLOWLIST`, opened with
the policies' allowlists and read by the attribution tier at every attempt;
:func:`accept_digest` extends it (a person accepting a new digest), so the same digest
on any later device is a sanctioned update.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from blackboard import (
    Accept,
    AdmissionRule,
    BoardReader,
    Conflict,
    Premise,
    ProposedPremiseWrite,
    ProposedWrite,
    Region,
    Reject,
    Written,
)
from blackboard.stores import Store
from pybb import (
    AttemptError,
    Blackboard,
    BlackboardEntry,
    Chain,
    Controller,
    ControllerObserver,
    KnowledgeSource,
    Stage,
)
from pybb.attestation._analysis import attribute, bad_evidence, verify
from pybb.attestation._evidence import Evidence
from pybb.attestation._fleet import Fleet
from pybb.attestation._fleet_errors import EvidenceError, FleetError
from pybb.attestation._jsonfile import NAME, show
from pybb.attestation._policy import BANK_SIZES
from pybb.attestation._report import (
    DeviceOutcome,
    DeviceResult,
    Finding,
    FleetReport,
    Reason,
    Tier,
    TierReport,
)
from pybb.attestation._slots import Allowlist, Slot

__all__ = [
    "ALLOWLIST",
    "ATTRIBUTION",
    "EVIDENCE_LOADED",
    "FLEET",
    "QUOTE_MATCHES_REFERENCE",
    "VERIFICATION",
    "Attestation",
    "AttributionTier",
    "VerificationTier",
    "accept_digest",
    "component_name",
    "read_allowlist",
]

ALLOWLIST = "attestation.allowlist"
"""The premise holding every class's allowlist: ``{class: {slot key: [hex digest, ...]}}``.

A slot key is ``"PCR:EVENT_TYPE:LABEL"``, ``"PCR:EVENT_TYPE"`` or, as written before
slots, ``"PCR"`` (see :class:`Slot`)."""
FLEET = "attestation.fleet"
"""The premise naming the fleet the board attests (its name, fingerprint and size)."""
QUOTE_MATCHES_REFERENCE = "quote_matches_reference"
"""The condition of every PCR component: the quoted value equals the reference value."""
EVIDENCE_LOADED = "evidence_loaded"
"""The condition of the ``evidence`` component of a device whose evidence was refused."""
ATTRIBUTION = "attribution"
"""The name of the ``on_fail`` tier's knowledge source."""
VERIFICATION = "verification"
"""The name of the ``on_pass`` tier's knowledge source."""

_COMPONENT = re.compile(r"pcr(\d+)")


def component_name(pcr: int) -> str:
    """The entry component of a PCR: ``"pcr7"``."""
    return f"pcr{pcr}"


def quote_matches_reference(value: Any) -> bool:
    """The cheap integrity check of one PCR component."""
    return (
        isinstance(value, dict)
        and value.get("quote") is not None
        and value.get("quote") == value.get("reference")
    )


def evidence_loaded(value: Any) -> bool:
    """The condition of the ``evidence`` component: there is no problem with it."""
    return isinstance(value, dict) and not value.get("problem")


class _Context:
    """What the tiers share: the fleet, the evidence of the devices at hand, the board."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.evidence: dict[str, Evidence | EvidenceError] = {}
        self.reader: BoardReader | None = None
        self._allowlist: tuple[int, dict[str, Allowlist]] = (-1, {})

    def load(self, device: str) -> Evidence | EvidenceError:
        found = self.evidence.get(device)
        if found is None:
            try:
                found = self.fleet.load(device)
            except EvidenceError as exc:
                found = exc
            self.evidence[device] = found
        return found

    def allowlist(self, device_class: str) -> Allowlist:
        """The class's allowlist as the board holds it now."""
        assert self.reader is not None
        state = self.reader.read_premise(ALLOWLIST)
        if state.version != self._allowlist[0]:
            self._allowlist = (state.version, _parse_allowlist(state.value))
        return self._allowlist[1].get(device_class, Allowlist())


def _parse_allowlist(value: Any) -> dict[str, Allowlist]:
    return {
        name: Allowlist(
            {Slot.from_key(k): frozenset(bytes.fromhex(d) for d in ds) for k, ds in slots.items()}
        )
        for name, slots in value.items()
    }


class AttributionTier(KnowledgeSource):
    """``on_fail``: replay the log event by event, name the differences, repair what policy allows.

    It writes each PCR component it explains (the quoted value becomes the reference,
    with the sanctioned findings kept beside it) and attaches its report to the attempt;
    what it cannot explain keeps the entry failing, so the controller escalates it.
    """

    def __init__(self, context: _Context, name: str = ATTRIBUTION) -> None:
        super().__init__(name, max_attempts=1)
        self._context = context

    def execute(self, blackboard: Blackboard, key: str) -> None:
        """Attribute the device ``key``'s failing PCRs."""
        measurement = blackboard.get_entry(key).measurement
        evidence = _evidence_for(self._context, key, measurement)
        if isinstance(evidence, EvidenceError):
            report = bad_evidence(
                key,
                Tier.ATTRIBUTION,
                evidence.problem,
                evidence.field,
                evidence.reason,
                path=evidence.path,
                hint=evidence.hint,
            )
            blackboard.report(key, _with_file(report, evidence))
            return
        device_class = self._context.fleet.classes[evidence.device_class]
        failing = [
            int(match.group(1))
            for component, value in measurement.items()
            if (match := _COMPONENT.fullmatch(component)) and not quote_matches_reference(value)
        ]
        allowed = self._context.allowlist(device_class.name)
        result = attribute(evidence, device_class, failing, allowed)
        blackboard.report(key, result.report.to_json())
        for pcr, (value, found) in sorted(result.repairs.items()):
            repaired = {
                "quote": value,
                "reference": value,
                "sanctioned": [finding.to_json() for finding in found],
            }
            blackboard.write_component(key, component_name(pcr), repaired)


def _evidence_for(context: _Context, key: str, measurement: Any) -> Evidence | EvidenceError:
    """The evidence the entry was written from, or why it cannot be used.

    The entry is the record: a device written as refused stays refused, and evidence
    that changed since its entry was written (a file edited between a killed run and
    its resume) is not attested against an entry made from other values.
    """
    if "evidence" in measurement:
        recorded = measurement["evidence"]
        return EvidenceError(
            str(recorded.get("problem")),
            path=recorded.get("file"),
            field=recorded.get("field"),
            device=key,
            hint=str(recorded.get("hint") or "fix the evidence file and run again"),
            reason=Reason(recorded["reason"]) if recorded.get("reason") else None,
        )
    evidence = context.load(key)
    if isinstance(evidence, EvidenceError):
        return evidence
    device_class = context.fleet.classes[evidence.device_class]
    quote = evidence.quote.get(device_class.policy.bank, {})
    for pcr in device_class.policy.pcrs:
        recorded = measurement.get(component_name(pcr), {}).get("quote")
        value = quote.get(pcr)
        if recorded is not None and (value is None or value.hex() != recorded):
            return EvidenceError(
                f"its quote for PCR {pcr} is not the one its entry was made from; the evidence "
                "changed while the device was being attested",
                path=evidence.source,
                field=f"quote.{device_class.policy.bank}.{pcr}",
                device=key,
            )
    return evidence


class VerificationTier(KnowledgeSource):
    """``on_pass``: the whole log must replay to the quote and satisfy the policy.

    A device it cannot confirm fails its attempt with :class:`pybb.AttemptError`
    carrying the report, and the controller escalates it.
    """

    def __init__(self, context: _Context, name: str = VERIFICATION) -> None:
        super().__init__(name, max_attempts=1)
        self._context = context

    def execute(self, blackboard: Blackboard, key: str) -> None:
        """Verify the device ``key``'s whole log against its quote and policy."""
        evidence = _evidence_for(self._context, key, blackboard.get_entry(key).measurement)
        if isinstance(evidence, EvidenceError):
            report = bad_evidence(
                key,
                Tier.VERIFICATION,
                evidence.problem,
                evidence.field,
                evidence.reason,
                path=evidence.path,
                hint=evidence.hint,
            )
            raise AttemptError(report.title, _with_file(report, evidence))
        report = verify(evidence, self._context.fleet.classes[evidence.device_class])
        if not report.passed:
            raise AttemptError(report.title, report.to_json())


def _with_file(report: TierReport, error: EvidenceError) -> dict[str, Any]:
    data = report.to_json()
    data["evidence"] = {"file": error.path, "field": error.field, "message": str(error)}
    return data


def _admission(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    """The board's rule for the attestation premises: a well-formed allowlist; a fixed fleet."""
    if not isinstance(proposed, ProposedPremiseWrite):
        return Accept()
    if proposed.premise == FLEET:
        return Reject("the fleet a board attests is fixed when the board is made")
    if proposed.premise == ALLOWLIST:
        problem = _allowlist_problem(proposed.value)
        return Accept() if problem is None else Reject(f"allowlist: {problem}")
    return Accept()


def _both(rule: AdmissionRule) -> AdmissionRule:
    """The attestation's admission rule, then ``rule``."""

    def both(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        verdict = _admission(proposed, reader)
        return verdict if isinstance(verdict, Reject) else rule(proposed, reader)

    return both


def _allowlist_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "must be an object of class name to {slot: [hex digest, ...]}"
    for name, slots in value.items():
        if not isinstance(name, str) or not NAME.fullmatch(name) or not isinstance(slots, dict):
            return f"{show(name)} is not a class name with an object of slots"
        for key, digests in slots.items():
            try:
                Slot.from_key(key)
            except ValueError as exc:
                return f"{show(key)} of class {name!r} is not a slot: {exc}"
            if not isinstance(digests, list) or not all(_is_hex_digest(d) for d in digests):
                return f"slot {key} of class {name!r} must list hex digests"
    return None


def _is_hex_digest(value: object) -> bool:
    if not isinstance(value, str) or len(value) // 2 not in BANK_SIZES.values():
        return False
    try:
        return len(bytes.fromhex(value)) * 2 == len(value)
    except ValueError:
        return False


def read_allowlist(blackboard: Blackboard) -> dict[str, Allowlist]:
    """Every class's allowlist as the board holds it now (``allowlist[c][0]``: PCR 0's digests)."""
    return _parse_allowlist(blackboard.model.reader.read_premise(ALLOWLIST).value)


def accept_digest(
    blackboard: Blackboard,
    device_class: str,
    pcr: int,
    digest: bytes | str,
    *,
    by: str,
    event_type: str | None = None,
    label: str | None = None,
) -> int:
    """Extend a class's allowlist on the board: the digest is a sanctioned update from now on.

    This is what answering an escalation with "accept the new digest" does: the
    attribution tier reads the allowlist at every attempt, so the same digest on any
    device attested afterwards is repaired instead of escalated. Call it between
    controller runs, or from another process (the controller takes the write in at its
    next cycle).

    Args:
        blackboard: A board made by :class:`Attestation`.
        device_class: The class whose allowlist grows.
        pcr: The PCR the digest is allowed in.
        digest: The digest (bytes or hex).
        by: Who accepted it (the writer of the premise write, e.g. ``human:alice``).
        event_type: The event type it is allowed for (an allowlist candidate's
            ``event_type``); without it, any type PCR ``pcr``'s manifest holds.
        label: The component it is allowed for (a candidate's ``label``); without it,
            any component of ``event_type``.

    Returns:
        The allowlist premise's new version.

    Raises:
        FleetError: The board refused the write (a malformed value, or a class name
            that is not one), or it kept changing under us.
    """
    value = digest.hex() if isinstance(digest, bytes) else str(digest).lower()
    try:
        key = Slot(pcr, event_type, label).key
    except ValueError as exc:
        raise FleetError(f"the allowlist slot cannot be used: {exc}") from None
    reader = blackboard.model.reader
    for _ in range(32):
        state = reader.read_premise(ALLOWLIST)
        allowlist = {name: dict(pcrs) for name, pcrs in state.value.items()}
        digests = set(allowlist.setdefault(device_class, {}).get(key, []))
        if value in digests:
            return state.version
        allowlist[device_class][key] = sorted(digests | {value})
        result = blackboard.model.control.set_premise(
            by, ALLOWLIST, allowlist, expected_version=state.version
        )
        if isinstance(result, Written):
            return result.version or state.version + 1
        if not isinstance(result, Conflict):
            raise FleetError(f"the board refused the allowlist write: {result.reason}")
    raise FleetError("the allowlist kept changing; try again")


ProgressHook = Callable[[int, int], None]
"""Told ``(devices settled, devices in the fleet)`` as the run goes."""


class Attestation:
    """Attests a fleet on a pybb board: the decision tree, run chunk by chunk, resumable.

    Args:
        fleet: What to attest.
        store: ``None`` (memory), ``"sqlite:///path.db"``, a PostgreSQL URL or a Store.
            Reopening the same board resumes it.
        board_id: The board in the store (default ``attest-<fleet name>``).
        observers: Told of escalations (with their tier reports), cycles and halts.
        chunk_size: Devices written per controller run (default: 5 % of the fleet, 25
            to 250); each chunk is one transaction of entries and then its cycles.
        regions: More regions to declare on the board (e.g. the human loop's, see
            ``pybb.supervision``), with their opening ``premises``.
        premises: The opening values of the premises among ``regions``.
        admission_rule: Another admission rule, asked after the attestation's own.

    Attributes:
        fleet: The fleet.
        blackboard: The board.
        controller: The controller.
        attribution: The ``on_fail`` tier.
        verification: The ``on_pass`` tier.

    Raises:
        FleetError: The board already attests a different fleet.
    """

    def __init__(
        self,
        fleet: Fleet,
        *,
        store: str | Store | None = None,
        board_id: str | None = None,
        observers: Iterable[ControllerObserver] = (),
        chunk_size: int | None = None,
        regions: Iterable[Region] = (),
        premises: Mapping[str, Any] | None = None,
        admission_rule: AdmissionRule | None = None,
    ) -> None:
        if chunk_size is not None and (
            isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
        ):
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        self.fleet = fleet
        self.board_id = board_id or f"attest-{fleet.name}"
        total = len(fleet.devices)
        self.chunk_size = chunk_size or max(25, min(250, total // 20))
        identity = {"name": fleet.name, "fingerprint": fleet.fingerprint, "devices": total}
        self.blackboard = Blackboard(
            store,
            self.board_id,
            writer="attestation",
            admission_rule=_admission if admission_rule is None else _both(admission_rule),
            regions=[Premise(ALLOWLIST), Premise(FLEET), *regions],
            premises={ALLOWLIST: fleet.allowlist(), FLEET: identity, **(premises or {})},
        )
        try:
            self._check_fleet(identity)
            self._context = _Context(fleet)
            self._context.reader = self.blackboard.model.reader
            chunks = -(-total // self.chunk_size)
            self.controller = Controller(
                self.blackboard, max_cycles=8 * chunks + 64, observers=observers
            )
            self.controller.register_predicate(QUOTE_MATCHES_REFERENCE, quote_matches_reference)
            self.controller.register_predicate(EVIDENCE_LOADED, evidence_loaded)
            self.attribution = AttributionTier(self._context)
            self.verification = VerificationTier(self._context)
            # One tree for every device, written chunk by chunk: no route per key ahead
            # of its entry (which the controller would report as a route with no entry).
            self.controller.route_all(on_pass=[self.verification], on_fail=[self.attribution])
        except BaseException:
            self.blackboard.close()
            raise

    def _check_fleet(self, identity: Mapping[str, Any]) -> None:
        stored = self.blackboard.model.reader.read_premise(FLEET).value
        if stored != identity:
            raise FleetError(
                f"board {self.board_id!r} already attests fleet {stored.get('name')!r} "
                f"(fingerprint {str(stored.get('fingerprint'))[:12]}…, {stored.get('devices')} "
                f"devices), not this one ({identity['fingerprint'][:12]}…)",
                hint="use another board id (--board-id) or store to attest another fleet",
            )

    # -- running ------------------------------------------------------------------------

    def run(self, progress: ProgressHook | None = None) -> FleetReport:
        """Attest every device not yet settled; return the fleet's report.

        A board left by an interrupted run is resumed: the entries it holds are
        finished first, then the devices not yet written, chunk by chunk.
        """
        total = len(self.fleet.devices)
        tell = progress or (lambda done, total: None)
        self.controller.run()
        done = self._settled()
        tell(done, total)
        for chunk in self._chunks():
            new = [device for device in chunk if not self._on_board(device)]
            if new:
                self._write(new)
                self.controller.run()
                self._context.evidence.clear()
                done += len(new)
                tell(done, total)
        return self.report()

    def submit(self) -> int:
        """Write the devices not yet on the board as entries, and run nothing.

        For ``pybb worker --app attest`` processes to work on (``docs/workers.md``):
        devices already on the board stay as they are, so submitting twice writes
        nothing the second time.

        Returns:
            How many devices were written now.
        """
        self.controller.refresh()  # another process may have written since this view
        written = 0
        for chunk in self._chunks():
            new = [device for device in chunk if not self._on_board(device)]
            if new:
                self._write(new)
                self._context.evidence.clear()
                written += len(new)
        return written

    def _chunks(self) -> Iterator[tuple[str, ...]]:
        devices = self.fleet.devices
        for start in range(0, len(devices), self.chunk_size):
            yield devices[start : start + self.chunk_size]

    def _on_board(self, device: str) -> bool:
        return device in self.blackboard.entries or device in self.blackboard.escalate

    def _settled(self) -> int:
        return sum(1 for device in self.fleet.devices if self._on_board(device))

    def _write(self, devices: list[str]) -> None:
        with self.blackboard.batch():
            for device in devices:
                self.blackboard.write_entry(device, self.entry(device))

    def entry(self, device: str) -> BlackboardEntry:
        """The device's entry: one component per covered PCR (or ``evidence`` if refused)."""
        evidence = self._context.load(device)
        if isinstance(evidence, EvidenceError):
            problem = {
                "problem": evidence.problem,
                "file": evidence.path,
                "field": evidence.field,
                "hint": evidence.hint,
            }
            if evidence.reason is not None:  # absent otherwise: older boards read the same
                problem["reason"] = evidence.reason.value
            return BlackboardEntry(
                conditions={"evidence": EVIDENCE_LOADED}, measurement={"evidence": problem}
            )
        device_class = self.fleet.classes[evidence.device_class]
        quote = evidence.quote.get(device_class.policy.bank, {})
        measurement = {
            component_name(pcr): {
                "quote": quote[pcr].hex() if pcr in quote else None,
                "reference": device_class.reference[pcr].hex(),
            }
            for pcr in device_class.policy.pcrs
        }
        conditions = dict.fromkeys(measurement, QUOTE_MATCHES_REFERENCE)
        return BlackboardEntry(conditions=conditions, measurement=measurement)

    def fresh_entry(self, device: str) -> BlackboardEntry:
        """The device's entry from its evidence as the fleet gives it now (not cached).

        For re-measuring: a device sent back for fresh evidence is read again.
        """
        self._context.evidence.pop(device, None)
        try:
            return self.entry(device)
        finally:
            self._context.evidence.pop(device, None)

    # -- reading the outcome --------------------------------------------------------------

    def report(self) -> FleetReport:
        """Where every device of the fleet stands now."""
        return FleetReport(self.fleet.name, tuple(map(self.result, self.fleet.devices)))

    def result(self, device: str) -> DeviceResult:
        """Where ``device`` stands now, and why."""
        truth = self.fleet.truth.get(device)
        if not self._on_board(device):
            return DeviceResult(device, DeviceOutcome.PENDING, truth=truth)
        entry = self.blackboard.get_entry(device)
        if entry.stage is Stage.GOOD:
            return self._good(device, entry, truth)
        if entry.stage in (Stage.ESCALATED, Stage.RESOLVED):
            return self._escalated(device, entry.stage, truth)
        return DeviceResult(device, DeviceOutcome.PENDING, truth=truth)

    def _good(self, device: str, entry: BlackboardEntry, truth: Any) -> DeviceResult:
        device_class = self.fleet.device_class(device)
        if entry.chain is Chain.ON_PASS:
            return DeviceResult(
                device, DeviceOutcome.PASSED, Tier.VERIFICATION, None, device_class, truth=truth
            )
        findings = [
            Finding.from_json(f)
            for value in entry.measurement.values()
            for f in (value.get("sanctioned") or ())
        ]
        report = TierReport.of(device, Tier.ATTRIBUTION, device_class, findings)
        return DeviceResult(
            device,
            DeviceOutcome.REPAIRED,
            Tier.ATTRIBUTION,
            Reason.SANCTIONED_UPDATE,
            device_class,
            report,
            truth,
        )

    def _escalated(self, device: str, stage: Stage, truth: Any) -> DeviceResult:
        escalation = self.blackboard.get_escalation(device)
        assert escalation is not None
        carried = escalation.report.tier_report
        report = TierReport.from_json(carried) if isinstance(carried, dict) else None
        if report is not None and report.reason is not None:
            reason, tier = report.reason, report.tier
        else:
            reason = Reason.TIER_ERROR
            tier = (
                Tier.VERIFICATION if escalation.report.chain is Chain.ON_PASS else Tier.ATTRIBUTION
            )
        device_class = report.device_class if report is not None else None
        outcome = DeviceOutcome.RESOLVED if stage is Stage.RESOLVED else DeviceOutcome.ESCALATED
        return DeviceResult(
            device,
            outcome,
            tier,
            reason,
            device_class or self.fleet.device_class(device),
            report,
            truth,
        )

    # -- the allowlist on the board ---------------------------------------------------------

    def allowlist(self) -> dict[str, Allowlist]:
        """Every class's allowlist as the board holds it now."""
        return read_allowlist(self.blackboard)

    def accept_digest(
        self,
        device_class: str,
        pcr: int,
        digest: bytes | str,
        *,
        by: str,
        event_type: str | None = None,
        label: str | None = None,
    ) -> int:
        """Extend a class's allowlist on the board (see :func:`accept_digest`)."""
        return accept_digest(
            self.blackboard, device_class, pcr, digest, by=by, event_type=event_type, label=label
        )

    def close(self) -> None:
        """Release the store if the board opened it."""
        self.blackboard.close()

    def __enter__(self) -> Attestation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Attestation(fleet={self.fleet.name!r}, devices={len(self.fleet.devices)}, "
            f"board={self.board_id!r})"
        )

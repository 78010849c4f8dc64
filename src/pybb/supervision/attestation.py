"""Supervising an attestation run: its policy pack, its asks, and what an answer does.

* :class:`AttestationPack`, buddhi's policy pack for escalated devices: the ask is the
  tier report's title, its options the report's (``accept-digest`` "Accept the new
  digest into the allowlist", ``quarantine`` "Quarantine the device", ``remeasure``
  "Re-measure the device"; the recommendation starred), and its confidence that a
  person is needed depends on why the device was escalated.
* :func:`compose_attestation_ask`: the board ask, with the report as readable text.
* :class:`AttestationEffect`: answering ``accept-digest`` extends the class allowlist
  on the board (``pybb.attestation.accept_digest``); the device is resolved with its
  repaired measurement, and every other escalated device that the extended allowlist
  now explains is resolved with it too (its ask is then closed as ``RESOLVED_OOB``),
  while devices attested afterwards are repaired by the attribution tier itself.
* :class:`SupervisedAttestation`: an :class:`~pybb.attestation.Attestation` whose board
  also holds the human loop, with its :class:`~pybb.supervision.SupervisedRun`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from blackboard.stores import Store
from buddhi import (
    Ask,
    AskOption,
    BudgetTree,
    ConvergencePolicy,
    EffortScale,
    ExclusionCause,
    GraduatedBar,
    Item,
    Spend,
)
from buddhi.reference import DEFAULT_CAUSES, DEFAULT_EFFORTS
from pybb import Blackboard, BlackboardEntry, Controller, Escalation
from pybb.attestation import (
    Allowlist,
    Attestation,
    EvidenceError,
    Fleet,
    FleetReport,
    Reason,
    TierReport,
    accept_digest,
    read_allowlist,
)
from pybb.human import Answer, DeadlinePolicy, answer_rule, compose_rules
from pybb.human import Ask as BoardAsk
from pybb.supervision._board import SUPERVISION_PREMISES, SUPERVISION_REGIONS, supervision_rule
from pybb.supervision._effects import (
    DecisionEffect,
    quarantine_entry,
    quarantined,
    remeasure_requests,
    request_remeasure,
)
from pybb.supervision._records import SUPERVISION, SUPERVISOR_WRITER, BoardIndex
from pybb.supervision._run import SupervisedRun
from pybb.supervision._settings import SupervisionSettings
from pybb.supervision._supervisor import Supervisor
from pybb.supervision._transport import AskContext, compose_ask

__all__ = [
    "ACCEPT",
    "CONFIDENCE",
    "DEFAULT_ASKS",
    "QUARANTINE",
    "REMEASURE",
    "AttestationEffect",
    "AttestationPack",
    "SupervisedAttestation",
    "attestation_settings",
    "compose_attestation_ask",
]

ACCEPT = "accept-digest"
"""The option id of "Accept the new digest into the allowlist"."""
QUARANTINE = "quarantine"
"""The option id of "Quarantine the device"."""
REMEASURE = "remeasure"
"""The option id of "Re-measure the device"."""

_log = logging.getLogger("pybb.supervision")

DEFAULT_ASKS = 20
"""The default budget of an attestation run: twenty asks."""

CONFIDENCE: Mapping[str, float] = MappingProxyType(
    {
        Reason.BAD_SIGNATURE.value: 0.95,
        Reason.NONCE_REUSED.value: 0.9,
        Reason.CLOCK_ROLLBACK.value: 0.9,
        Reason.REVOKED_AK.value: 0.9,
        Reason.PCR_DIGEST_MISMATCH.value: 0.85,
        Reason.NONCE_UNKNOWN.value: 0.85,
        Reason.UNKNOWN_AK.value: 0.7,
        Reason.BAD_QUOTE.value: 0.6,
        Reason.NONCE_EXPIRED.value: 0.55,
        Reason.DENIED_COMPONENT.value: 0.95,
        Reason.TAMPERED_COMPONENT.value: 0.9,
        Reason.LOG_QUOTE_MISMATCH.value: 0.85,
        Reason.EVENT_DATA_MISMATCH.value: 0.85,
        Reason.SECURE_BOOT_OFF.value: 0.8,
        Reason.MISSING_QUOTE.value: 0.7,
        Reason.CORRUPT_LOG.value: 0.65,
        Reason.BAD_EVIDENCE.value: 0.6,
        Reason.TIER_ERROR.value: 0.5,
    }
)
"""How sure the pack is that a person is needed, by the reason a device was escalated:
a component nobody allowed (or a quote signed by another key) needs a person most; a
corrupt log or an expired nonce mostly needs a re-measure."""

_FALLBACK = (
    {"id": QUARANTINE, "label": "Quarantine the device", "recommended": True, "detail": ""},
    {"id": REMEASURE, "label": "Re-measure the device", "recommended": False, "detail": ""},
)


def _causes() -> Mapping[str, ExclusionCause]:
    return MappingProxyType({cause.name: cause for cause in DEFAULT_CAUSES})


@dataclass(frozen=True)
class AttestationPack:
    """buddhi's policy pack for escalated devices (see the module docstring).

    Attributes:
        confidence_threshold: Escalated devices carry no automation confidence, so
            every one is a question for a person unless this is lowered to 0.
        efforts: The effort scale (the reference one).
        iteration_budget: The iteration budget (the reference one).
        convergence: The stop detector (tiers report no scores: never converges).
        bar: The graduated bar: as the budget fills, only surer asks interrupt.
        exclusion_causes: The exclusion taxonomy (the reference one).
        confidence: The escalation confidence by reason.
    """

    confidence_threshold: float = 0.9
    efforts: EffortScale = DEFAULT_EFFORTS
    iteration_budget: int = 8
    convergence: ConvergencePolicy = field(default_factory=ConvergencePolicy)
    bar: GraduatedBar = field(default_factory=lambda: GraduatedBar(floor=0.3, rise=0.75))
    exclusion_causes: Mapping[str, ExclusionCause] = field(default_factory=_causes)
    confidence: Mapping[str, float] = field(default_factory=lambda: CONFIDENCE)

    def detect_trigger(self, item: Item) -> str | None:
        """Flag the item with the reason its device was escalated."""
        reason = _report(item).get("reason")
        return f"reason:{reason}" if isinstance(reason, str) else None

    def worth_acting(self, item: Item) -> bool:
        """Every escalated device is worth a decision."""
        return True

    def build_ask(self, item: Item, spend: Spend) -> Ask:
        """The tier report's title, its options (one starred), a confidence by reason."""
        report = _report(item)
        escalation: Escalation = item.payload  # type: ignore[assignment]
        title = report.get("title") or f"Device {escalation.key} was escalated"
        options = tuple(
            AskOption(o["label"], o.get("detail", ""), bool(o.get("recommended")))
            for o in _options(report)
        )
        confidence = self.confidence.get(str(report.get("reason")), 0.5)
        return Ask(item.id, f"{title}. What should be done?", options, confidence)


def compose_attestation_ask(context: AskContext) -> BoardAsk:
    """The board ask of an escalated device: report options' ids, the report as text."""
    tier = context.escalation.report.tier_report
    report = tier if isinstance(tier, Mapping) else {}
    ids = {o["label"]: o["id"] for o in _options(report)}
    ask = compose_ask(context, option_ids=ids)
    device = report.get("device") or context.escalation.key
    subject = f"{device} ({report['class']})" if report.get("class") else str(device)
    text = _text(report) or ask.report
    return dataclasses.replace(ask, subject=subject[:500], report=text[:65_536])


class AttestationEffect(DecisionEffect):
    """What an attestation decision does: ``accept-digest`` extends the allowlist.

    The answered device is resolved with its repaired measurement (every failing PCR
    explained by an accepted digest now has reference = quote), and every other
    escalated device the extended allowlist explains is resolved the same way, by the
    same person, under the decision ``accept-digest``. ``quarantine`` and
    ``quarantine`` puts the device on the board's quarantine list
    (:func:`~pybb.supervision.quarantined`, shown by the report and by ``pybb attest
    quarantine``); ``remeasure`` writes a re-measure request
    (:func:`~pybb.supervision.remeasure_requests`), which
    :meth:`SupervisedAttestation.remeasure` honours when fresh evidence arrives.
    Idempotent: accepting a digest already allowed, resolving a device already
    resolved, and quarantining or requesting twice change nothing.
    """

    def defers(self, answer: Answer, escalation: Escalation) -> bool:
        """A re-measure waits for fresh evidence before it resolves the device."""
        return answer.option == REMEASURE

    def measurement(self, answer: Answer, escalation: Escalation) -> Any:
        """The repaired measurement when the digests are accepted, else ``None``."""
        if answer.option != ACCEPT:
            return None
        report = _report_of(escalation)
        accepted = {(c["pcr"], c["digest"]) for c in report.get("allowlist_candidates", ())}
        return _repaired(escalation, report, accepted)

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        """Quarantine, ask for a re-measure, or extend the allowlist and settle its devices."""
        control = controller.blackboard.model.control
        if answer.option in (QUARANTINE, REMEASURE):
            if answer.option == QUARANTINE:
                quarantine_entry(
                    control, escalation.key, by=answer.by, at=answer.at, ask_id=answer.ask_id,
                    note=answer.note,
                )  # fmt: skip
            else:
                request_remeasure(
                    control, escalation.key, by=answer.by, at=answer.at, ask_id=answer.ask_id,
                    note=answer.note, escalation=escalation.id,
                )  # fmt: skip
            return
        if answer.option != ACCEPT:
            return
        board = controller.blackboard
        for candidate in _report_of(escalation).get("allowlist_candidates", ()):
            accept_digest(
                board,
                candidate["class"],
                candidate["pcr"],
                candidate["digest"],
                by=answer.by,
                event_type=candidate.get("event_type"),
                label=candidate.get("label"),
            )
        controller.refresh()
        allowlist = read_allowlist(board)
        for key in list(board.escalate):
            other = board.get_escalation(key)
            if other is None or key == escalation.key or board.get_resolution(key):
                continue
            measurement = _explained(other, allowlist)
            if measurement is not None:
                controller.resolve(
                    key,
                    ACCEPT,
                    by=answer.by,
                    at=answer.at,
                    measurement=measurement,
                    idempotency_key=f"accepted/{answer.ask_id}/{key}"[:256],
                )


def attestation_settings(
    asks: int = DEFAULT_ASKS, *, max_open_asks: int | None = None
) -> SupervisionSettings:
    """The supervision of an attestation run: its pack, composer and effect, a budget.

    Args:
        asks: The budget: how many asks the run may make (one pool, ``fleet``).
        max_open_asks: The most asks open at once (``None``: no cap).
    """
    return SupervisionSettings(
        policy=AttestationPack(),
        budget=BudgetTree.single_pool(asks, name="fleet"),
        max_open_asks=max_open_asks,
        compose=compose_attestation_ask,
        effect=AttestationEffect(),
        # An unanswered ask must never accept a digest into fleet policy by itself: at
        # the deadline the device is quarantined, whatever was recommended.
        deadlines=DeadlinePolicy(default=QUARANTINE),
    )


class SupervisedAttestation:
    """An attestation run whose escalations are supervised and asked in the inbox.

    Args:
        fleet: What to attest.
        store: The store; a URL (e.g. ``"sqlite:///pybb-attest.db"``) lets the inbox
            serve the same run from its own connection.
        board_id: The board (default ``attest-<fleet name>``).
        settings: The supervision (default :func:`attestation_settings`).
        chunk_size: Devices per controller run (see ``Attestation``).
        challenge: With real evidence, how to issue a device a fresh nonce (e.g.
            ``pybb.attestation.Registry(...).challenge``): a device sent back for
            re-measuring is challenged once, and the nonce is recorded on the board
            (``challenge:<device>``) for the operator to quote over.

    Attributes:
        attestation: The attestation (its board declares the human loop too).
        run: The supervised run on its controller.
    """

    def __init__(
        self,
        fleet: Fleet,
        *,
        store: str | Store | None = None,
        board_id: str | None = None,
        settings: SupervisionSettings | None = None,
        chunk_size: int | None = None,
        challenge: Callable[[str], bytes] | None = None,
    ) -> None:
        self._challenge = challenge
        self.attestation = Attestation(
            fleet,
            store=store,
            board_id=board_id,
            chunk_size=chunk_size,
            regions=SUPERVISION_REGIONS,
            premises=SUPERVISION_PREMISES,
            admission_rule=compose_rules(answer_rule, supervision_rule),
        )
        try:
            board = self.attestation.blackboard
            supervisor = Supervisor(board, settings or attestation_settings())
            self.run = SupervisedRun(self.attestation.controller, supervisor)
            self.run.after_poll.append(self.remeasure)
        except BaseException:
            self.attestation.close()
            raise

    @property
    def board_id(self) -> str:
        """The run's board."""
        return self.attestation.board_id

    def attest(self, progress: Callable[[int, int], None] | None = None) -> FleetReport:
        """Attest the fleet; return its report.

        Escalations are supervised as they happen, and after each chunk of devices the
        answers given so far are applied, so an accepted digest already counts for the
        devices attested after it.
        """

        def chunk_done(done: int, total: int) -> None:
            self.run.poll()
            if progress is not None:
                progress(done, total)

        self.run.run()
        self.attestation.run(chunk_done)
        self.run.run()
        return self.report()

    def report(self) -> FleetReport:
        """Where every device stands now, with the board's quarantine list."""
        listed = tuple(quarantined(self.attestation.blackboard))
        return dataclasses.replace(self.attestation.report(), quarantined=listed)

    def quarantined(self) -> list[str]:
        """The devices people quarantined, in the order they did."""
        return quarantined(self.attestation.blackboard)

    def remeasure_requests(self) -> list[dict[str, Any]]:
        """The re-measure requests people made, oldest first."""
        return remeasure_requests(self.attestation.blackboard)

    def remeasure(self) -> list[str]:
        """Run again every device sent back for re-measuring whose fresh evidence arrived.

        For each re-measure request whose escalation still stands (the device escalated,
        unresolved), the device's evidence is loaded again from the fleet. Evidence that
        has not changed yet leaves the request waiting; with a ``challenge``, so does
        evidence that is not quoted over the nonce issued for this request (an old quote
        sent again answers no challenge). Fresh evidence opens the device's next
        generation (``Controller.reopen``, by the person who asked, once per request
        across processes and restarts), and the controller runs it through the tree like
        a new device: it passes, is repaired by a tier, or is escalated again, which is
        a new escalation and so a new item for the supervisor (a new ask, within the
        budget). The first generation's escalation and the request stay in the history.
        Runs at every poll of the run.

        Returns:
            The devices run again now.
        """
        board = self.attestation.blackboard
        controller = self.run.controller
        controller.refresh()
        done = []
        for request in remeasure_requests(board):
            key = request["key"]
            if not _awaits(board, request):
                continue
            try:
                if self._run_again(controller, request):
                    done.append(key)
            except Exception:  # one device's trouble must not stop the others' re-measure
                _log.exception("could not re-measure %s; it is tried again at the next poll", key)
        if done:
            controller.run()  # the devices run again now; escalations reach the supervisor
            self.run.supervisor.flush()
        return done

    def _run_again(self, controller: Controller, request: Mapping[str, Any]) -> bool:
        """Open the device's next generation if its fresh evidence arrived; whether it did."""
        key = request["key"]
        nonce = self._challenge_once(key, request) if self._challenge is not None else None
        fresh = self._fresh(key, nonce)
        if (
            fresh is None
            or fresh.measurement == controller.blackboard.get_entry(key).original_measurement
        ):
            return False  # nothing new yet: the device has not been measured again
        once = request.get("escalation") or request.get("ask_id") or key
        controller.reopen(
            key,
            fresh.measurement,
            by=str(request["by"]),
            at=datetime.fromisoformat(str(request["at"])),
            note=str(request.get("note") or "") or None,
            idempotency_key=f"remeasure/{once}"[:256],
            conditions=fresh.conditions,
        )
        return True

    def _fresh(self, key: str, nonce: bytes | None) -> BlackboardEntry | None:
        """The device's measurement from its evidence now; with a challenge, only if answered."""
        reread = self.attestation.fleet.reread
        if reread is not None:  # real evidence: a new quote is verified (and spent) only now
            return self.attestation.fresh_entry(key) if reread(key, nonce) else None
        if nonce is not None:
            try:
                evidence = self.attestation.fleet.load(key)
            except EvidenceError:
                return None  # no quote over the new nonce (nor any) yet
            signed = evidence.signed
            if signed is None or signed.nonce != nonce:
                return None
        return self.attestation.fresh_entry(key)

    def challenges(self) -> dict[str, str]:
        """The fresh nonces (hex) issued to devices sent back for re-measuring (the latest)."""
        rows = BoardIndex(self.attestation.blackboard.model.reader).rows()
        return {c["key"]: c["nonce"] for _, c in rows if c.get("kind") == "challenge"}

    def _challenge_once(self, key: str, request: Mapping[str, Any]) -> bytes:
        """The nonce issued for ``request``: issued now if it has none yet, once."""
        escalation = request.get("escalation")
        record = f"challenge:{escalation or key}"
        index = BoardIndex(self.attestation.blackboard.model.reader)
        found = index.row(record)
        if found is None:
            assert self._challenge is not None
            nonce = self._challenge(key)
            content = {"id": record, "kind": "challenge", "key": key, "nonce": nonce.hex(),
                       "at": datetime.now(UTC).isoformat()}  # fmt: skip
            if escalation is not None:
                content["escalation"] = escalation
            # Unique on id: a second process's challenge is refused and the first one stands.
            control = self.attestation.blackboard.model.control
            control.write(SUPERVISOR_WRITER, SUPERVISION, content)
            found = index.row(record)
        assert found is not None
        return bytes.fromhex(found[1]["nonce"])

    def close(self) -> None:
        """Close the supervisor and the attestation's board."""
        self.run.close()
        self.attestation.close()

    def __enter__(self) -> SupervisedAttestation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _awaits(board: Blackboard, request: Mapping[str, Any]) -> bool:
    """Whether the re-measure ``request`` still waits: its escalation stands, unresolved.

    A request names the escalation it answers; one written before requests did is for
    the entry's first generation.
    """
    key = request["key"]
    if key not in board.escalate or board.get_resolution(key) is not None:
        return False
    escalation = board.get_escalation(key)
    if escalation is None:
        return False
    named = request.get("escalation")
    if named is None:
        return board.get_entry(key).generation == 1
    return bool(escalation.id == named)


# -- reading reports and repairing measurements -------------------------------------------------


def _report(item: Item) -> Mapping[str, Any]:
    payload = item.payload
    return _report_of(payload) if isinstance(payload, Escalation) else {}


def _report_of(escalation: Escalation) -> Mapping[str, Any]:
    tier = escalation.report.tier_report
    return tier if isinstance(tier, Mapping) else {}


def _options(report: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    options = report.get("options")
    if isinstance(options, list) and 2 <= len(options) <= 4:
        return tuple(o for o in options if isinstance(o, Mapping))
    return _FALLBACK


def _text(report: Mapping[str, Any]) -> str | None:
    try:
        return TierReport.from_json(report).text()
    except (KeyError, TypeError, ValueError):
        return None


def _explained(escalation: Escalation, allowlist: Mapping[str, Allowlist]) -> Any:
    """The repaired measurement of a device the allowlist now explains, else ``None``.

    A digest explains a finding only in its slot (PCR, event type, label); an entry
    written before slots is not read here (the tiers judged the device against it).
    """
    report = _report_of(escalation)
    if report.get("reason") != Reason.TAMPERED_COMPONENT.value:
        return None
    allowed = allowlist.get(str(report.get("class")), Allowlist())
    unexplained = [f for f in report.get("findings", ()) if f.get("reason") != "sanctioned_update"]
    accepted = set()
    for finding in unexplained:
        pcr, found = finding.get("pcr"), finding.get("found")
        if finding.get("reason") != Reason.TAMPERED_COMPONENT.value or pcr is None or not found:
            return None
        place = (pcr, str(finding.get("event_type")), str(finding.get("label")))
        if bytes.fromhex(found) not in allowed.allowed_at(*place):
            return None
        accepted.add((pcr, found))
    return _repaired(escalation, report, accepted) if accepted else None


def _repaired(
    escalation: Escalation, report: Mapping[str, Any], accepted: set[tuple[int, str]]
) -> Any:
    """The measurement with the failing PCRs ``accepted`` explains repaired (or ``None``)."""
    measurement = escalation.report.measurement
    if not isinstance(measurement, dict) or not accepted:
        return None
    pcrs = {pcr for pcr, _ in accepted}
    repaired = dict(measurement)
    for component, value in measurement.items():
        if not isinstance(value, dict) or value.get("quote") == value.get("reference"):
            continue
        pcr = _pcr(component)
        if pcr not in pcrs or value.get("quote") is None:
            return None
        sanctioned = [
            {**f, "reason": Reason.SANCTIONED_UPDATE.value}
            for f in report.get("findings", ())
            if f.get("pcr") == pcr
        ]
        repaired[component] = {**value, "reference": value["quote"], "sanctioned": sanctioned}
    return repaired


def _pcr(component: str) -> int | None:
    digits = component.removeprefix("pcr")
    return int(digits) if component.startswith("pcr") and digits.isdigit() else None

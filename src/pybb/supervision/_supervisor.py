"""The Supervisor: every escalated entry through buddhi, every decision on the board."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import buddhi
from blackboard import Rejected, RejectionCause, Written
from buddhi import (
    AdmissionRefused,
    BudgetExhausted,
    Context,
    Decision,
    Disposition,
    Item,
    Outcome,
    Seams,
    SourceExcluded,
    evaluate_item,
)
from buddhi.board import BoardStore
from pybb import (
    Blackboard,
    Controller,
    ControllerObserver,
    CycleReport,
    Escalation,
    Resolution,
    RunSummary,
)
from pybb.human import (
    ESCALATION_WRITER,
    Ask,
    AskStatus,
    DeadlineApplied,
    DispatchReport,
    Notification,
    NotificationDispatcher,
    apply_deadlines,
    ask_state,
    close_ask,
    open_asks,
)
from pybb.supervision._board import check_regions
from pybb.supervision._budget import (
    OPEN_ASKS_SCOPE,
    AdmissionLedger,
    AskCapReached,
    OncePerItemStore,
    admission_from_audit,
)
from pybb.supervision._errors import SupervisionError
from pybb.supervision._items import ask_id_for
from pybb.supervision._records import (
    SUPERVISION,
    SUPERVISOR_WRITER,
    BoardIndex,
    SupervisionRecord,
)
from pybb.supervision._settings import SupervisionSettings
from pybb.supervision._transport import BoardOOBSource, BoardTransport, find_escalation

__all__ = ["OOB_REASON", "Supervisor", "escalation_of", "outcome_details", "refusal_details"]

OOB_REASON = "resolved_oob"
"""How the reason of an ask closed because its entry was resolved on the board begins."""

_log = logging.getLogger("pybb.supervision")


class Supervisor(ControllerObserver):
    """Supervises a run's escalations with buddhi and writes every decision on the board.

    Each escalated entry becomes a buddhi item carrying its tier's report
    (``settings.item``); :func:`buddhi.evaluate_item` decides it with the settings'
    pack and Router, the budget store, a :class:`BoardTransport` and a
    :class:`BoardOOBSource`; the decision and its reasons are written on the
    ``supervision`` level as ``decision:<escalation id>``. Delivery from the controller
    is at least once; the supervisor is idempotent: an escalation with a decision on
    the board is not decided again, the budget charges an escalation at most once
    (:class:`OncePerItemStore`), and its ask id is derived from the escalation, so a
    redelivery after a crash posts no second ask. An ask whose entry is resolved on
    the board before anyone answered is closed (reason ``resolved_oob: ...``) and a
    ``closed:<escalation id>`` record says ``RESOLVED_OOB``.

    Bind it to the controller (:meth:`bind`; ``pybb.supervision.SupervisedRun`` does).
    Its hooks write through the kernel after the controller's commits; the controller
    takes those writes in at its next cycle, and a bound supervisor has it take them in
    when a run halts.

    Args:
        blackboard: The run's blackboard, declaring ``SUPERVISION_REGIONS`` (see
            :func:`~pybb.supervision.supervised_blackboard`).
        settings: The pack, budget, caps and effect; by default
            :class:`SupervisionSettings()`.
        store: The buddhi budget store; by default a ``buddhi.board.BoardStore`` on the
            run's own board (so the inbox shows its use). The budget tree is installed
            in it.
        clock: Where the budget's windows and the asks' times come from.
        writer: The writer name of the supervision records.

    Raises:
        SupervisionError: The board lacks the regions the wiring writes.
    """

    def __init__(
        self,
        blackboard: Blackboard,
        settings: SupervisionSettings | None = None,
        *,
        store: buddhi.Store | None = None,
        clock: buddhi.Clock | None = None,
        writer: str = SUPERVISOR_WRITER,
    ) -> None:
        self.blackboard = blackboard
        self.settings = SupervisionSettings() if settings is None else settings
        check_regions(
            blackboard.model, budget=store is None, people=self.settings.notify is not None
        )
        self._writer = writer
        self._clock: buddhi.Clock = buddhi.SystemClock() if clock is None else clock
        self._index = BoardIndex(blackboard.model.reader)
        inner, ledger = self._budget_store(store)
        self.settings.budget.install(inner)
        self.store = OncePerItemStore(
            inner, ledger=ledger, open_asks=self.open_ask_count, cap=self.settings.max_open_asks
        )
        self.transport = BoardTransport(
            blackboard,
            scope=self.settings.scope_of,
            compose=self.settings.compose,
            clock=clock,
            deadlines=self.settings.deadlines,
        )
        self.oob = BoardOOBSource(blackboard)
        self.seams = Seams(
            self.settings.policy, self.settings.router, self.store, self.transport, self.oob
        )
        self._retry: dict[str, Escalation] = {}
        self._resolved = False
        self._controller: Controller | None = None
        self.notifications = self._dispatcher()

    def bind(self, controller: Controller) -> None:
        """Observe ``controller`` (its blackboard must be this supervisor's).

        A bound supervisor leaves the controller's view of the board current when a run
        halts (``Controller.refresh``), so the application can write entries next.

        Raises:
            SupervisionError: The controller works on another blackboard.
        """
        if controller.blackboard is not self.blackboard:
            raise SupervisionError(
                "the controller works on another blackboard than the supervisor's; build "
                "both on one blackboard"
            )
        self._controller = controller
        controller.add_observer(self)

    def _budget_store(self, store: buddhi.Store | None) -> tuple[buddhi.Store, AdmissionLedger]:
        if store is None:
            return BoardStore.on_model(self.blackboard.model, clock=self._clock), self._ledger(
                self._index
            )
        if isinstance(store, BoardStore):
            same = store.model.reader is self.blackboard.model.reader
            return store, self._ledger(self._index if same else BoardIndex(store.model.reader))
        return store, lambda item_id: None

    @staticmethod
    def _ledger(index: BoardIndex) -> AdmissionLedger:
        def earlier(item_id: str) -> buddhi.Admission | None:
            record = index.admitted(item_id)
            return None if record is None else admission_from_audit(record)

        return earlier

    # -- the controller's hooks --------------------------------------------------------

    def on_escalated(self, escalation: Escalation) -> None:
        """Supervise the escalation now; if that fails, again at the next cycle or poll."""
        self._attempt(escalation)

    def on_resolved(self, resolution: Resolution) -> None:
        """Note that an entry was resolved: its ask, if still open, is closed next."""
        self._resolved = True

    def on_cycle(self, cycle: CycleReport) -> None:
        """Retry what failed and close the asks of resolved entries."""
        self.flush()

    def on_halted(self, summary: RunSummary) -> None:
        """Retry what failed, apply due deadlines, close resolved entries' asks, take in."""
        self.flush()
        try:  # a worker's controller applies deadlines too: whoever sees one first
            self.expire()
        except Exception:
            _log.exception("could not apply the deadlines due; they are applied next time")
        if self._controller is not None:
            self._controller.refresh()

    # -- supervising ------------------------------------------------------------------

    def supervise(self, escalation: Escalation) -> SupervisionRecord:
        """Decide one escalation and write the decision, unless it was decided before.

        Returns:
            The decision record, as the board holds it.

        Raises:
            SupervisionError, buddhi.errors.BuddhiError, blackboard.StoreError: It could
                not be decided or recorded; supervising it again is safe.
        """
        found = self._index.record("decision", escalation.id)
        if found is not None:
            return found
        item = self._item(escalation)
        scope = self.settings.scope_of(escalation)
        outcome = evaluate_item(item, self.seams, Context(scope))
        return self._write(self._decision(escalation, outcome, "/".join(scope)))

    def decision(self, escalation_id: str) -> SupervisionRecord | None:
        """The decision recorded for an escalation, or ``None``."""
        return self._index.record("decision", escalation_id)

    def records(self) -> tuple[SupervisionRecord, ...]:
        """Every decision and closure on the board, in board order."""
        return self._index.records()

    def flush(self) -> list[SupervisionRecord]:
        """Supervise the escalations that failed before; close the asks of resolved entries."""
        written = [r for e in list(self._retry.values()) if (r := self._attempt(e)) is not None]
        if self._resolved:
            self._resolved = False
            written += self.close_resolved()
        return written

    def sweep(self) -> list[SupervisionRecord]:
        """Decide every escalated entry on the board that has no decision yet.

        Covers entries escalated (or escalated and since resolved) while no supervisor
        was listening; an entry resolved before it was decided ends ``RESOLVED_OOB``.
        Then closes the open asks of resolved entries.
        """
        written = [
            record
            for escalation in self._escalations()
            if self.decision(escalation.id) is None
            and (record := self._attempt(escalation)) is not None
        ]
        return written + self.close_resolved()

    def close_resolved(self) -> list[SupervisionRecord]:
        """Close every open ask whose entry was resolved on the board before an answer."""
        closed = []
        for ask in self.open_asks():
            escalation = escalation_of(self.blackboard, ask)
            resolution = (
                None if escalation is None else self.blackboard.get_resolution(escalation.key)
            )
            if escalation is not None and resolution is not None:
                record = self._close(ask, escalation, resolution)
                if record is not None:
                    closed.append(record)
        return closed

    def pull(self, escalation_id: str, by: str, note: str = "") -> dict[str, Any]:
        """Ask a person about an escalation the budget denied, charged to the same budget.

        A person asked for it, so the escalation confidence counts as 1: the graduated
        bar lets it through, but a full scope (or the open-ask cap) still refuses it. The
        outcome is recorded once as ``pulled:<escalation id>`` (``asked`` with the
        admission, or ``refused`` with why); a second pull returns the first outcome.
        """
        found = self._index.row(f"pulled:{escalation_id}")
        if found is not None:
            return dict(found[1])
        decision = self.decision(escalation_id)
        escalation = find_escalation(self.blackboard, escalation_id)
        outcome: dict[str, Any] = {
            "id": f"pulled:{escalation_id}", "kind": "pulled", "escalation": escalation_id,
            "key": None if escalation is None else escalation.key, "by": by, "note": note,
            "at": self._now().isoformat(),
        }  # fmt: skip
        if decision is None or decision.disposition is not Disposition.DENIED or escalation is None:
            outcome |= {
                "outcome": "refused",
                "message": "it is not an escalation the budget denied",
            }
            return self._write_row(outcome)
        item = self._item(escalation)
        scope = self.settings.scope_of(escalation)
        bar = self.settings.policy.bar
        request = buddhi.AdmissionRequest(scope, item.id, item.source, 1.0, bar)
        try:
            admission = self.store.admit(request)
        except AdmissionRefused as refusal:
            denied = refusal_details(refusal)
            message = (
                f"the budget refused it: scope {denied.get('scope')!r} has spent "
                f"{denied.get('spent')} of {denied.get('ceiling')}; nothing was asked"
            )
            return self._write_row(outcome | {"outcome": "refused", "message": message, **denied})
        spend = buddhi.Spend("human", "pulled", 0, buddhi.RouterPick("human", "pulled"))
        self.transport.deliver(self.settings.policy.build_ask(item, spend))
        outcome |= {
            "outcome": "asked",
            "ask_id": ask_id_for(escalation),
            "admission": _admission(admission),
            "message": "asked",
        }
        return self._write_row(outcome)

    def serve_pulls(self) -> list[dict[str, Any]]:
        """Carry out the pull requests the inbox wrote (``pull:<escalation id>``)."""
        done = []
        for _, row in self._index.rows():
            if row.get("kind") != "pull" or not isinstance(row.get("escalation"), str):
                continue
            if self._index.row(f"pulled:{row['escalation']}") is not None:
                continue
            try:
                done.append(self.pull(row["escalation"], str(row.get("by")), str(row.get("note"))))
            except Exception:
                _log.exception("could not pull escalation %s into an ask", row["escalation"])
        return done

    def _write_row(self, row: dict[str, Any]) -> dict[str, Any]:
        result = self.blackboard.model.control.write(self._writer, SUPERVISION, row)
        if isinstance(result, Written) or result.cause is RejectionCause.DUPLICATE:
            found = self._index.row(row["id"])
            return dict(found[1]) if found is not None else row
        raise SupervisionError(f"the board refused {row['id']!r}: {result.reason}")

    def expire(self) -> tuple[DeadlineApplied, ...]:
        """Apply the default of every open ask past its deadline (``by="deadline"``), once.

        Safe in any number of processes at once: the ``answers`` level admits one answer
        per ask, so exactly one default (or a person's answer) lands; the answer watcher
        then resolves the entry like any answer.
        """
        model = self.blackboard.model
        return apply_deadlines(
            model.control, model.reader, self.settings.deadlines, now=self._now()
        )

    def notify(self) -> DispatchReport | None:
        """Send the notifications due now (``None`` when the settings configure none)."""
        if self.notifications is None:
            return None
        return self.notifications.dispatch(self._now())

    def charge_notification(self, notification: Notification, ask: Ask) -> str | None:
        """Charge a notification to the budget the ask was charged to: ``None`` if admitted.

        The same admission as an ask (the ask's scope, its confidence against the pack's
        bar, its source's exclusions), under the item id ``notify/<notification id>``, on
        the store under the open-asks cap (a reminder of an open ask holds no new slot).
        """
        scope = tuple(ask.scope.split("/")) if ask.scope else self.settings.budget.root.path
        source = ask.report_data.get("tier")
        request = buddhi.AdmissionRequest(
            scope=scope,
            item_id=f"notify/{notification.id}",
            source=source if isinstance(source, str) and source else "pybb:notify",
            confidence=ask.confidence,
            bar=self.settings.policy.bar,
        )
        try:
            self.store.inner.admit(request)
        except AdmissionRefused as refusal:
            return str(refusal)
        return None

    def _dispatcher(self) -> NotificationDispatcher | None:
        notify = self.settings.notify
        if notify is None:
            return None
        model = self.blackboard.model
        return NotificationDispatcher(
            model.control,
            model.reader,
            notify.notifiers,
            notify.link_secret,
            notify.base_url,
            deadlines=self.settings.deadlines,
            assignment=self.settings.assignment,
            charge=self.charge_notification,
        )

    def open_asks(self) -> tuple[Ask, ...]:
        """The asks this wiring posted on the board that are still open, oldest first."""
        return tuple(a for a in open_asks(self.blackboard.model.reader) if _is_supervised(a))

    def open_ask_count(self) -> int:
        """How many asks are open on the board (what ``max_open_asks`` caps)."""
        return len(open_asks(self.blackboard.model.reader))

    def close(self) -> None:
        """Close the transport and the budget store wrapper (never the run's board)."""
        self.transport.close()
        self.store.close()

    # -- steps --------------------------------------------------------------------------

    def _attempt(self, escalation: Escalation) -> SupervisionRecord | None:
        try:
            record = self.supervise(escalation)
        except Exception:
            _log.exception("could not supervise escalation %s; it is retried", escalation.id)
            self._retry[escalation.id] = escalation
            return None
        self._retry.pop(escalation.id, None)
        return record

    def _item(self, escalation: Escalation) -> Item:
        item = self.settings.item(escalation)
        if not isinstance(item, Item) or item.id != escalation.id:
            raise SupervisionError(
                f"the item factory returned {item!r} for escalation {escalation.id!r}; it must "
                "return a buddhi.Item whose id is the escalation's id"
            )
        if item.trigger is None:
            flag = self.settings.policy.detect_trigger(item)
            if flag is not None:
                item = replace(item, trigger=flag)
        return item

    def _escalations(self) -> Iterator[Escalation]:
        board = self.blackboard
        keys = [*board.escalate, *(k for k in board.entries if board.get_resolution(k))]
        for key in keys:
            escalation = board.get_escalation(key)
            if escalation is not None and escalation.sequence:
                yield escalation

    def _decision(self, escalation: Escalation, outcome: Outcome, scope: str) -> SupervisionRecord:
        escalated = outcome.disposition is Disposition.ESCALATED
        return SupervisionRecord(
            escalation_id=escalation.id,
            key=escalation.key,
            kind="decision",
            disposition=outcome.disposition,
            decided_by=outcome.decided_by,
            reason=outcome.reason,
            scope=scope,
            ask_id=ask_id_for(escalation) if escalated else None,
            details={**outcome_details(outcome), **_summary(escalation)},
            trail=outcome.trail,
            at=self._now(),
        )

    def _close(
        self, ask: Ask, escalation: Escalation, resolution: Resolution
    ) -> SupervisionRecord | None:
        reason = (
            f"{OOB_REASON}: {resolution.by} resolved the entry on the board "
            f"({resolution.decision!r}) before anyone answered"
        )[:2_000]
        result = close_ask(
            self.blackboard.model.control, ask.ask_id, reason, writer=ESCALATION_WRITER
        )
        if isinstance(result, Rejected):
            state = ask_state(self.blackboard.model.reader, ask.ask_id)
            if state is None or state.status is not AskStatus.CLOSED:
                return None  # a person's answer landed first; the answer watcher applies it
        details = {
            "by": resolution.by,
            "decision": resolution.decision,
            "resolved_at": resolution.at.isoformat(),
            "resolution_sequence": resolution.sequence,
        }
        record = SupervisionRecord(
            escalation.id, escalation.key, "closed", Disposition.RESOLVED_OOB,
            Decision.CHECK_OOB_RESOLUTION, reason, ask.scope, ask.ask_id, details, (), self._now(),
        )  # fmt: skip
        return self._write(record)

    def _write(self, record: SupervisionRecord) -> SupervisionRecord:
        result = self.blackboard.model.control.write(self._writer, SUPERVISION, record.to_json())
        if isinstance(result, Written):
            return replace(record, sequence=result.sequence)
        if result.cause is RejectionCause.DUPLICATE:
            found = self._index.record(record.kind, record.escalation_id)
            if found is not None:
                return found  # written before (a redelivery raced us); the first one stands
        raise SupervisionError(
            f"the board refused the {record.kind} record of {record.escalation_id!r}: "
            f"{result.reason}"
        )

    def _now(self) -> datetime:
        now = self._clock.now()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def outcome_details(outcome: Outcome) -> dict[str, Any]:
    """What the decision that ended an item found, as JSON for its record."""
    details: dict[str, Any] = {}
    if outcome.spend is not None:
        spend = outcome.spend
        details["spend"] = {
            "model": spend.model,
            "effort": spend.effort,
            "iterations": spend.iterations,
        }
    if outcome.disposition is Disposition.CONVERGED and outcome.convergence is not None:
        report = outcome.convergence
        details["convergence"] = {"counted": report.counted, "transient": report.transient_excluded}
    if outcome.route is not None:
        details["route"] = {
            "confidence": outcome.route.confidence,
            "threshold": outcome.route.threshold,
        }
    if outcome.defects:
        details["defects"] = list(outcome.defects)
    if outcome.resolution is not None:
        resolution = outcome.resolution
        at = None if resolution.at is None else resolution.at.isoformat()
        details["resolution"] = {"by": resolution.by, "note": resolution.note, "at": at}
    if outcome.admission is not None:
        details["admission"] = _admission(outcome.admission)
    if outcome.refusal is not None:
        details["denied"] = refusal_details(outcome.refusal)
    return details


def _summary(escalation: Escalation) -> dict[str, Any]:
    """What the tier found, in brief: the inbox filters, groups and previews by it.

    Only a tier report's ``reason``, ``class`` and its findings' slots and digests (no
    texts), so a denied escalation, which has no ask, can still be shown and counted.
    """
    tier = escalation.report.tier_report
    if not isinstance(tier, Mapping):
        return {}
    keys = ("pcr", "found", "reason", "event_type", "label")
    findings = tier.get("findings")
    brief = [
        {k: f.get(k) for k in keys if f.get(k) is not None}
        for f in (findings if isinstance(findings, list) else [])[:16]
        if isinstance(f, Mapping)
    ]
    return {"tier": {"reason": tier.get("reason"), "class": tier.get("class"), "findings": brief}}


def refusal_details(refusal: AdmissionRefused) -> dict[str, Any]:
    """The scope and bar that refused an escalation, as JSON."""
    if isinstance(refusal, BudgetExhausted):
        return {
            "refused": "budget_exhausted",
            "scope": "/".join(refusal.scope),
            "limit": refusal.limit,
            "spent": refusal.spent,
            "ceiling": refusal.ceiling,
            "required": _finite(refusal.required),
            "confidence": refusal.confidence,
        }
    if isinstance(refusal, AskCapReached):
        return {
            "refused": "open_asks",
            "scope": "/".join(OPEN_ASKS_SCOPE),
            "limit": "open_asks",
            "spent": refusal.open_asks,
            "ceiling": refusal.cap,
        }
    if isinstance(refusal, SourceExcluded):
        found = refusal.exclusions
        return {
            "refused": "source_excluded",
            "scope": None,
            "limit": "excluded",
            "source": found.source,
            "permanent": sorted(found.permanent),
            "transient": sorted(found.transient),
        }
    return {"refused": type(refusal).__name__, "scope": None, "limit": None}


def _admission(admission: buddhi.Admission) -> dict[str, Any]:
    return {
        "scope": "/".join(admission.scope),
        "spent": admission.spent,
        "ceiling": admission.ceiling,
        "load": _finite(admission.load),
        "required": _finite(admission.required),
        "confidence": admission.confidence,
    }


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def escalation_of(blackboard: Blackboard, ask: Ask) -> Escalation | None:
    """The escalation an ask was posted for by this wiring, or ``None`` for any other ask."""
    data: Mapping[str, Any] = ask.report_data
    escalation_id = data.get("escalation")
    if not isinstance(escalation_id, str):
        return None
    escalation = find_escalation(blackboard, escalation_id)
    if escalation is None or ask_id_for(escalation) != ask.ask_id:
        return None
    return escalation


def _is_supervised(ask: Ask) -> bool:
    data: Mapping[str, Any] = ask.report_data
    return isinstance(data.get("escalation"), str)

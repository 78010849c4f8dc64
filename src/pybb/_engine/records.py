"""The content of the controller's records: what one attempt did, and why an entry escalates.

Pure functions of the entry's state and what happened, so a resumed run, a worker and a
replay write the same records for the same decisions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from blackboard import ProposedContribution, Reject
from pybb._engine.attempt import Outcome
from pybb._engine.blackboard import CONTROLLER
from pybb._engine.journal import Journal
from pybb._engine.projection import ATTEMPTS, EntryState, apply_writes
from pybb._engine.source import KnowledgeSource, RetryPolicy
from pybb._engine.types import AttemptStatus, Chain, EscalationReport
from pybb._engine.verdicts import Predicates

__all__ = ["attempt_record", "escalation_content", "schedule_retry"]


def attempt_record(
    journal: Journal,
    predicates: Predicates,
    source: KnowledgeSource,
    entry: EntryState,
    number: int,
    outcome: Outcome,
) -> tuple[str, dict[str, Any]]:
    """The writer and content of the attempt record: judged once, refused writes kept apart."""
    content: dict[str, Any] = {"key": entry.key, "source": source.name, "attempt": number}
    writer = f"ks:{source.name}"
    status, error = outcome.status, outcome.error
    if status is None:
        error = _shape_problem(entry, outcome.writes)
        status = AttemptStatus.ERROR if error else None
    if status is None:
        measurement = apply_writes(entry.measurement, outcome.writes)
        result, good, error = predicates.verdict(entry, measurement)
        content["status"] = (
            AttemptStatus.CHANGED if outcome.writes else AttemptStatus.UNCHANGED
        ).value
        if outcome.writes:
            content["writes"] = outcome.writes
        content["result"] = result
        content["good_standing"] = good
        verdict = journal.judge(ProposedContribution(writer, ATTEMPTS, content))
        if isinstance(verdict, Reject):
            writer, content = CONTROLLER, {**content, "status": AttemptStatus.REFUSED.value}
            content["refused"] = content.pop("writes", [])
            error = verdict.reason
            del content["result"], content["good_standing"]
    else:
        content["status"] = status.value
    if error is not None:
        content["error"] = error
    if outcome.report is not None:
        content["report"] = outcome.report
    return writer, content


def schedule_retry(
    retry: RetryPolicy | None,
    component: str | None,
    max_attempts: int,
    number: int,
    content: dict[str, Any],
    now: datetime | None,
) -> None:
    """Stamp the attempt with its time and, if another attempt must wait, when it may run."""
    if retry is None or now is None:
        return
    content["at"] = now.isoformat()
    if number >= max_attempts or content.get("good_standing"):
        return
    result = content.get("result")
    if component and isinstance(result, dict) and result.get(component):
        return
    delay = retry.delay(number)
    if delay.total_seconds() > 0:
        content["retry_at"] = (now + delay).isoformat()


def escalation_content(entry: EntryState, source: str | None, reason: str) -> dict[str, Any]:
    """The escalation record: the failing tier's last report and every attempt."""
    tier_report = None
    for attempt in entry.attempts:
        if attempt.source == source and attempt.report is not None:
            tier_report = attempt.report
    report = EscalationReport(
        entry.key,
        source,
        entry.chain_name or Chain.ON_FAIL,
        reason,
        entry.measurement,
        entry.original,
        entry.result,
        tuple(entry.attempts),
        tier_report,
        entry.judgement_error,
    )
    return {"key": entry.key, "source": source, "reason": reason, "report": report.to_json()}


def _shape_problem(entry: EntryState, writes: list[list[Any]]) -> str | None:
    """Why a whole-measurement write does not fit a component-wise entry, if it does not."""
    if entry.conditions is None or not any(component is None for component, _ in writes):
        return None
    measurement = apply_writes(entry.measurement, writes)
    if isinstance(measurement, dict) and set(measurement) == set(entry.conditions):
        return None
    return (
        f"the source wrote a measurement for entry {entry.key!r} without exactly the "
        f"components {sorted(entry.conditions)} its conditions name"
    )

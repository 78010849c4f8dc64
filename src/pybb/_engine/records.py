"""The content of the controller's records: what one attempt did, and why an entry escalates.

Pure functions of the entry's state and what happened, so a resumed run, a worker and a
replay write the same records for the same decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blackboard import Judged, Reject
from pybb._engine.attempt import Outcome
from pybb._engine.blackboard import CONTROLLER
from pybb._engine.journal import Journal, contribution
from pybb._engine.projection import ATTEMPTS, EntryState, apply_writes
from pybb._engine.source import KnowledgeSource, RetryPolicy
from pybb._engine.types import AttemptStatus, Chain
from pybb._engine.verdicts import Predicates

__all__ = ["attempt_record", "escalation_content", "schedule_retry"]

# A StrEnum member's ``value`` is a property of the enum machinery: read once, not per attempt.
_CHANGED = AttemptStatus.CHANGED.value
_UNCHANGED = AttemptStatus.UNCHANGED.value
_STATUS_TEXT = {status.value: status.value for status in AttemptStatus}
_CHAIN_TEXT = {chain: chain.value for chain in Chain}


def attempt_record(
    journal: Journal,
    predicates: Predicates,
    source: KnowledgeSource,
    entry: EntryState,
    number: int,
    outcome: Outcome,
    now: datetime | None,
) -> tuple[str, dict[str, Any], Judged | None]:
    """The writer and content of the attempt record, and the rule's one judgement of it.

    The source's own record is judged as it will be written (with its report and its
    retry time); if the rule refuses it, the controller records the refusal instead
    (its writes kept apart, as ``refused``), which is pybb's own bookkeeping.
    """
    content: dict[str, Any] = {"key": entry.record_key, "source": source.name, "attempt": number}
    writer = f"ks:{source.name}"
    status, writes, error = outcome.status, outcome.writes, outcome.error
    if status is None and entry.conditions is not None:  # else no shape to miss
        error = _shape_problem(entry, writes)
        status = AttemptStatus.ERROR if error else None
    if status is not None:
        content["status"] = status.value
        return writer, _finish(source, number, content, error, outcome, now), None
    measurement = apply_writes(entry.measurement, writes)
    result, good, error = predicates.verdict(entry, measurement)
    content["status"] = _CHANGED if writes else _UNCHANGED
    if writes:
        content["writes"] = writes
    content["result"] = result
    content["good_standing"] = good
    proposed = (
        content  # the common attempt: nothing for ``_finish`` to add, so not its frame
        if error is None and outcome.report is None and source.retry is None
        else _finish(source, number, content, error, outcome, now)
    )
    judged = journal.judge(contribution(writer, ATTEMPTS, proposed))
    if not isinstance(judged.verdict, Reject):
        return writer, proposed, judged
    # Built afresh (the refusal is rare): the judged content is the source's own record.
    refused: dict[str, Any] = {"key": entry.record_key, "source": source.name, "attempt": number}
    refused["status"] = AttemptStatus.REFUSED.value
    refused["refused"] = outcome.writes
    return CONTROLLER, _finish(source, number, refused, judged.verdict.reason, outcome, now), None


def _finish(
    source: KnowledgeSource,
    number: int,
    content: dict[str, Any],
    error: str | None,
    outcome: Outcome,
    now: datetime | None,
) -> dict[str, Any]:
    if error is not None:
        content["error"] = error
    if outcome.report is not None:
        content["report"] = outcome.report
    if source.retry is not None:
        schedule_retry(source.retry, source.component, source.max_attempts, number, content, now)
    return content


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
    """The escalation record: the failing tier's last report and every attempt.

    Its ``report`` is ``EscalationReport.to_json()`` of the report the entry's state makes
    (a test holds the two equal), written out directly: the report and its attempts'
    summaries would be built only to be turned into this, five objects per escalation.
    """
    attempts = [_attempt_json(content) for content in entry.attempts]
    tier_report = None
    for attempt in attempts:
        if attempt["source"] == source and "report" in attempt:  # in it only if not None
            tier_report = attempt["report"]
    report = {
        "key": entry.key,
        "source": source,
        "chain": _CHAIN_TEXT[entry.chain_name or Chain.ON_FAIL],
        "reason": reason,
        "measurement": entry.measurement,
        "original_measurement": entry.original,
        "result": entry.result,
        "attempts": attempts,
        "tier_report": tier_report,
    }
    if entry.judgement_error is not None:  # only then, as ``to_json`` writes it
        report["error"] = entry.judgement_error
    return {"key": entry.record_key, "source": source, "reason": reason, "report": report}


def _attempt_json(content: Mapping[str, Any]) -> dict[str, Any]:
    """``AttemptSummary.to_json()`` of an attempt record's summary, from the record."""
    data: dict[str, Any] = {
        "source": content["source"],
        "attempt": content["attempt"],
        "status": _STATUS_TEXT[content["status"]],
    }
    for name in ("error", "report", "good_standing"):
        value = content.get(name)
        if value is not None:
            data[name] = value
    return data


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

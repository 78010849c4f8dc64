"""What a person's decision does beyond resolving its entry: the application's effect."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blackboard import BoardReader, Control, Model, RejectionCause, Written
from pybb import Blackboard, Controller, Escalation
from pybb.human import Answer
from pybb.supervision._errors import SupervisionError
from pybb.supervision._records import SUPERVISION, SUPERVISOR_WRITER, BoardIndex

__all__ = [
    "QUARANTINE_KIND",
    "REMEASURE_KIND",
    "DecisionEffect",
    "NoEffect",
    "quarantine_entry",
    "quarantined",
    "remeasure_requests",
    "request_remeasure",
]


class DecisionEffect:
    """Makes a person's decision take effect; subclass it and override the hooks you need.

    For each answer, the wiring asks :meth:`measurement` for the entry's new
    measurement, resolves the entry with it (``Controller.resolve``, evaluated at
    once), then calls :meth:`apply` and records the answer as applied. In the normal
    course each hook runs once per answer; after a crash between :meth:`apply` and that
    record, :meth:`apply` runs again for the same answer, so it must be idempotent
    (adding a digest to a set is; appending to a list is not). An exception from a
    hook leaves the answer to be applied again at the next poll.
    """

    def defers(self, answer: Answer, escalation: Escalation) -> bool:
        """Whether ``answer`` waits for something before it resolves its entry.

        A deferred answer (e.g. "re-measure the device") is recorded as applied with
        the outcome ``awaiting``, and :meth:`apply` runs; resolving the entry is then
        the application's, once what it waits for arrives (fresh evidence).
        """
        return False

    def measurement(self, answer: Answer, escalation: Escalation) -> Any:
        """The entry's measurement once ``answer`` is applied, or ``None`` to keep it."""
        return None

    def apply(self, answer: Answer, escalation: Escalation, controller: Controller) -> None:
        """Make ``answer`` (``answer.option`` is the decision) take effect beyond its entry.

        The entry is already resolved. An effect that writes through the kernel and
        then resolves other entries calls ``controller.refresh()`` first.
        """


class NoEffect(DecisionEffect):
    """The effect of an application whose decisions only resolve their entries."""


# -- answers that act: the quarantine list and re-measure requests on the board ------------------

QUARANTINE_KIND = "quarantine"
"""The kind of the ``quarantine:<entry>`` records on the ``supervision`` level."""
REMEASURE_KIND = "remeasure"
"""The kind of the ``remeasure:<entry>`` records on the ``supervision`` level."""


def quarantine_entry(
    control: Control,
    key: str,
    *,
    by: str,
    at: datetime,
    ask_id: str | None = None,
    note: str = "",
    writer: str = SUPERVISOR_WRITER,
) -> bool:
    """Put the entry ``key`` on the board's quarantine list, once.

    The list is the ``quarantine:<key>`` records of the ``supervision`` level, which is
    unique on ``id``: writing the same device again (a redelivered answer, a crash
    between the effect and its ``applied`` record) is refused as a duplicate and
    changes nothing.

    Returns:
        Whether this call put it there (``False``: it was quarantined before).

    Raises:
        SupervisionError: The board refused the record for another reason.
    """
    return _write_once(control, writer, QUARANTINE_KIND, key, by, at, ask_id, note)


def request_remeasure(
    control: Control,
    key: str,
    *,
    by: str,
    at: datetime,
    ask_id: str | None = None,
    note: str = "",
    writer: str = SUPERVISOR_WRITER,
    escalation: str | None = None,
) -> bool:
    """Send the entry ``key`` back for fresh evidence, once per escalation.

    The request is a ``remeasure:<escalation id>`` record naming the escalation it
    answers (``remeasure:<key>`` without one, as written before entries could run
    again), so an entry escalated again after its re-measure can be sent back again.

    Returns:
        Whether this call wrote the request (``False``: it was requested before).
    """
    return _write_once(
        control, writer, REMEASURE_KIND, key, by, at, ask_id, note, escalation=escalation
    )


def quarantined(board: Blackboard | Model | BoardReader) -> list[str]:
    """The entries on the board's quarantine list, in the order they were quarantined."""
    return [row["key"] for row in _rows(board, QUARANTINE_KIND)]


def remeasure_requests(board: Blackboard | Model | BoardReader) -> list[dict[str, Any]]:
    """The re-measure requests on the board (key, by, at, ask id, note, escalation), oldest first.

    Each names the escalation it answers (``escalation``), unless written before requests did.
    """
    return [dict(row) for row in _rows(board, REMEASURE_KIND)]


def _write_once(
    control: Control,
    writer: str,
    kind: str,
    key: str,
    by: str,
    at: datetime,
    ask_id: str | None,
    note: str,
    *,
    escalation: str | None = None,
) -> bool:
    content: dict[str, Any] = {
        "id": f"{kind}:{escalation or key}",
        "kind": kind,
        "key": key,
        "by": by,
        "at": at.isoformat(),
        "ask_id": ask_id,
        "note": note,
    }
    if escalation is not None:
        content["escalation"] = escalation
    result = control.write(writer, SUPERVISION, content)
    if isinstance(result, Written):
        return True
    if result.cause is RejectionCause.DUPLICATE:
        return False
    raise SupervisionError(f"the board refused the {kind} record of {key!r}: {result.reason}")


def _rows(board: Blackboard | Model | BoardReader, kind: str) -> list[Mapping[str, Any]]:
    reader = board.model.reader if isinstance(board, Blackboard) else board
    reader = reader.reader if isinstance(reader, Model) else reader
    return [
        content
        for _, content in BoardIndex(reader).rows()
        if content.get("kind") == kind and isinstance(content.get("key"), str)
    ]

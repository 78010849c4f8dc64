"""Answers back: each person's answer applied once, as an out-of-band resolution."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from blackboard import RejectionCause, Written
from pybb import Controller, Escalation, Resolution
from pybb.human import Answer, AskState, AskStatus, ask_states
from pybb.supervision._effects import DecisionEffect, NoEffect
from pybb.supervision._errors import SupervisionError
from pybb.supervision._records import SUPERVISION, SUPERVISOR_WRITER, AppliedAnswer, BoardIndex
from pybb.supervision._supervisor import escalation_of

__all__ = ["AnswerWatcher"]

_log = logging.getLogger("pybb.supervision")


class AnswerWatcher:
    """Applies the answers people wrote on the board, each exactly once.

    An answer is on the ``answers`` level only if ``pybb.human.answer_rule`` admitted
    it: written by ``human:<name>`` in their own name, to an open ask, naming one of
    its options; the store admits one per ask. For each answered ask this wiring
    posted and has not yet applied, :meth:`apply` resolves the entry out of band with
    ``Controller.resolve(key, option, by=answer.by, at=answer.at)`` (and the effect's
    new measurement, if any) under the idempotency key ``answer/<ask id>``, runs the
    application's effect, and records
    ``applied:<ask id>`` on the ``supervision`` level. An answer given while no
    controller ran is applied at the next :meth:`apply`; one applied before a crash
    is recognised by its resolution (same decision, person and time) and not resolved
    twice.

    Args:
        controller: The run's controller (its blackboard holds the asks).
        effect: What a decision does beyond resolving the entry.
        writer: The writer name of the ``applied`` records.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        effect: DecisionEffect | None = None,
        writer: str = SUPERVISOR_WRITER,
    ) -> None:
        self.controller = controller
        self.effect: DecisionEffect = NoEffect() if effect is None else effect
        self._writer = writer
        self._index = BoardIndex(controller.blackboard.model.reader)

    def pending(self) -> Iterator[tuple[AskState, Escalation]]:
        """The answered asks of this wiring whose answers are not applied yet."""
        board = self.controller.blackboard
        for state in ask_states(board.model.reader):
            if state.status is not AskStatus.ANSWERED or state.answer is None:
                continue
            if self._index.row(f"applied:{state.ask.ask_id}") is not None:
                continue
            escalation = escalation_of(board, state.ask)
            if escalation is not None:
                yield state, escalation

    def apply(self) -> tuple[AppliedAnswer, ...]:
        """Apply every pending answer; an answer that fails is logged and tried again later."""
        applied = []
        for state, escalation in list(self.pending()):
            assert state.answer is not None
            try:
                applied.append(self.apply_one(state.answer, escalation))
            except Exception:
                _log.exception(
                    "could not apply the answer to ask %s; it is retried", state.ask.ask_id
                )
        return tuple(applied)

    def applied(self) -> tuple[AppliedAnswer, ...]:
        """Every answer applied on this board, in board order."""
        return self._index.applied()

    def apply_one(self, answer: Answer, escalation: Escalation) -> AppliedAnswer:
        """Resolve the entry with ``answer``, run the effect, and record it applied.

        Raises:
            ResolutionError, SupervisionError, blackboard.StoreError: Nothing was
                recorded as applied; applying again is safe.
        """
        existing = self._index.row(f"applied:{answer.ask_id}")
        if existing is not None:
            return AppliedAnswer.from_json(existing[1], existing[0])
        if self.effect.defers(answer, escalation):
            # The entry stays escalated until what the answer waits for arrives; the
            # effect records the wait (idempotently) and the application resolves it.
            self.effect.apply(answer, escalation, self.controller)
            outcome, sequence = "awaiting", 0
        else:
            resolution = self._resolve(answer, escalation)
            outcome = "resolved" if _by(resolution, answer) else "superseded"
            if outcome == "resolved":
                self.effect.apply(answer, escalation, self.controller)
            sequence = resolution.sequence
        record = AppliedAnswer(
            answer.ask_id, escalation.id, escalation.key, answer.option, answer.by, answer.at,
            outcome, sequence,
        )  # fmt: skip
        return self._write(record)

    def _resolve(self, answer: Answer, escalation: Escalation) -> Resolution:
        self.controller.refresh()
        found = self.controller.blackboard.get_resolution(escalation.key)
        if found is not None:
            return found  # resolved before: by this answer (then a crash), or otherwise
        return self.controller.resolve(
            escalation.key,
            answer.option,
            by=answer.by,
            at=answer.at,
            measurement=self.effect.measurement(answer, escalation),
            idempotency_key=f"answer/{answer.ask_id}",
        )

    def _write(self, record: AppliedAnswer) -> AppliedAnswer:
        control = self.controller.blackboard.model.control
        result = control.write(self._writer, SUPERVISION, record.to_json())
        if isinstance(result, Written):
            return AppliedAnswer.from_json(record.to_json(), result.sequence)
        existing = self._index.row(f"applied:{record.ask_id}")
        if result.cause is RejectionCause.DUPLICATE and existing is not None:
            return AppliedAnswer.from_json(existing[1], existing[0])
        raise SupervisionError(
            f"the board refused the record of the answer to {record.ask_id!r}: {result.reason}"
        )


def _by(resolution: Resolution, answer: Answer) -> bool:
    """Whether the entry's resolution is this answer's."""
    return (resolution.decision, resolution.by, resolution.at) == (
        answer.option,
        answer.by,
        answer.at,
    )

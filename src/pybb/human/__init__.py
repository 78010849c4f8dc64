"""The board protocol of the human loop: asks, answers and closures on three levels.

A run with a human loop declares :data:`HUMAN_REGIONS` next to its own regions and
composes :func:`answer_rule` into its admission rule::

    model = create_model(
        regions=[*my_regions, *HUMAN_REGIONS],
        admission_rule=compose_rules(answer_rule, my_rule),
        store="sqlite:///run.db",
    )
    post_ask(model.control, Ask(...))
    answer(model.control, "human:alice", "ask-1", "quarantine")

Exactly one answer per ask is admitted, by the store's unique constraint on ``ask_id``;
:func:`answer_rule` admits an answer only from ``human:<name>`` in their own name, to an
open ask addressed to them, naming one of its options.
"""

from pybb.human._board import (
    ESCALATION_WRITER,
    AskState,
    AskStatus,
    answer,
    ask_state,
    ask_states,
    close_ask,
    open_asks,
    post_ask,
)
from pybb.human._errors import HumanLoopError, MalformedContentError
from pybb.human._protocol import (
    ANSWERS,
    ASK_CLOSURES,
    ASKS,
    HUMAN_PREFIX,
    HUMAN_REGIONS,
    MAX_OPTIONS,
    MIN_OPTIONS,
    Answer,
    Ask,
    Closure,
    Option,
    human_name,
    human_writer,
    is_valid_id,
)
from pybb.human._rule import Refusal, RefusalCode, answer_rule, compose_rules, judge_answer

__all__ = [
    "ANSWERS",
    "ASKS",
    "ASK_CLOSURES",
    "ESCALATION_WRITER",
    "HUMAN_PREFIX",
    "HUMAN_REGIONS",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "Answer",
    "Ask",
    "AskState",
    "AskStatus",
    "Closure",
    "HumanLoopError",
    "MalformedContentError",
    "Option",
    "Refusal",
    "RefusalCode",
    "answer",
    "answer_rule",
    "ask_state",
    "ask_states",
    "close_ask",
    "compose_rules",
    "human_name",
    "human_writer",
    "is_valid_id",
    "judge_answer",
    "open_asks",
    "post_ask",
]

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

Around the protocol: every ask has a deadline, at which its default decision is
written as its answer, ``by="deadline"``, exactly once (:class:`DeadlinePolicy`,
:func:`apply_deadlines`); people are told about asks and reminded before the deadline
over a :class:`Notifier` (:class:`WebhookNotifier`, :class:`EmailNotifier`), each
notification carrying a signed, single-use link (:func:`sign_link`,
:func:`redeem_link`), by :class:`NotificationDispatcher`, which respects their quiet
hours and lets the budget refuse; an :class:`AssignmentPolicy` routes asks to a person
or team, :func:`asks_for` lists a person's own first, :func:`reassign` is a person's
board write. The levels these write are :data:`PEOPLE_REGIONS`.
"""

from pybb.human._assign import (
    Assignment,
    AssignmentPolicy,
    AssignRule,
    asks_for,
    assignee,
    assignees,
    assignments,
    reassign,
    recipients,
)
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
from pybb.human._deadlines import (
    DEFAULT_DEADLINE,
    DeadlineApplied,
    DeadlinePolicy,
    DeadlineRule,
    apply_deadlines,
    ask_class,
    ask_reason,
)
from pybb.human._errors import HumanLoopError, LinkError, LinkProblem, MalformedContentError
from pybb.human._links import (
    LINK_WRITER,
    Link,
    link_use,
    redeem_link,
    sign_link,
    verify_link,
)
from pybb.human._notify import (
    NOTIFY_WRITER,
    Attempt,
    Charge,
    Delivery,
    DispatchReport,
    EmailNotifier,
    Notification,
    NotificationDispatcher,
    Notifier,
    WebhookNotifier,
    deliveries,
    webhook_signature,
)
from pybb.human._people import (
    ASSIGNMENTS,
    CHANNEL_KINDS,
    DELIVERIES,
    LINK_USES,
    NOTIFICATIONS,
    PEOPLE,
    PEOPLE_REGIONS,
    TEAM_PREFIX,
    Channel,
    Person,
    QuietHours,
    directory,
    set_person,
    team_name,
)
from pybb.human._protocol import (
    ANSWERS,
    ASK_CLOSURES,
    ASKS,
    DEADLINE_BY,
    DEADLINE_WRITER,
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
    "ASSIGNMENTS",
    "CHANNEL_KINDS",
    "DEADLINE_BY",
    "DEADLINE_WRITER",
    "DEFAULT_DEADLINE",
    "DELIVERIES",
    "ESCALATION_WRITER",
    "HUMAN_PREFIX",
    "HUMAN_REGIONS",
    "LINK_USES",
    "LINK_WRITER",
    "MAX_OPTIONS",
    "MIN_OPTIONS",
    "NOTIFICATIONS",
    "NOTIFY_WRITER",
    "PEOPLE",
    "PEOPLE_REGIONS",
    "TEAM_PREFIX",
    "Answer",
    "Ask",
    "AskState",
    "AskStatus",
    "AssignRule",
    "Assignment",
    "AssignmentPolicy",
    "Attempt",
    "Channel",
    "Charge",
    "Closure",
    "DeadlineApplied",
    "DeadlinePolicy",
    "DeadlineRule",
    "Delivery",
    "DispatchReport",
    "EmailNotifier",
    "HumanLoopError",
    "Link",
    "LinkError",
    "LinkProblem",
    "MalformedContentError",
    "Notification",
    "NotificationDispatcher",
    "Notifier",
    "Option",
    "Person",
    "QuietHours",
    "Refusal",
    "RefusalCode",
    "WebhookNotifier",
    "answer",
    "answer_rule",
    "apply_deadlines",
    "ask_class",
    "ask_reason",
    "ask_state",
    "ask_states",
    "asks_for",
    "assignee",
    "assignees",
    "assignments",
    "close_ask",
    "compose_rules",
    "deliveries",
    "directory",
    "human_name",
    "human_writer",
    "is_valid_id",
    "judge_answer",
    "link_use",
    "open_asks",
    "post_ask",
    "reassign",
    "recipients",
    "redeem_link",
    "set_person",
    "sign_link",
    "team_name",
    "verify_link",
    "webhook_signature",
]

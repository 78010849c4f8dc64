"""The human loop's wiring: escalations through ``buddhi``, asks to the inbox, answers back.

An entry the ``pybb`` controller escalates becomes a ``buddhi`` item carrying its tier's
report; :class:`Supervisor` decides it with :func:`buddhi.evaluate_item` and writes the
decision and its reasons on the board (``DISCARDED``, ``CONVERGED``, ``MODEL_HANDLED``,
``INVALID_ASK``, ``RESOLVED_OOB``, ``ESCALATED`` or ``DENIED`` with the scope and bar
that denied it). Escalated asks go to the board's ``asks`` level through
:class:`BoardTransport`, where the inbox (``pybb inbox``) shows them; a person's answer
comes back through :class:`AnswerWatcher` as an out-of-band resolution, and the
application's :class:`DecisionEffect` makes it take effect. In one call::

    from pybb.supervision import SupervisedRun, SupervisionSettings

    run = SupervisedRun.open("sqlite:///run.db", "fleet", SupervisionSettings(...))
    run.blackboard.write_entries(...)
    run.controller.route_predicate(...)
    run.run_until_answered(timeout=3600)

``import pybb`` does not load this package (nor ``buddhi``); import it by name. See
``docs/human-loop.md``.
"""

from pybb.supervision._answers import AnswerWatcher
from pybb.supervision._board import (
    SUPERVISION_PREMISES,
    SUPERVISION_REGIONS,
    supervised_blackboard,
    supervision_rule,
)
from pybb.supervision._budget import OPEN_ASKS_SCOPE, AskCapReached, OncePerItemStore
from pybb.supervision._effects import (
    QUARANTINE_KIND,
    REMEASURE_KIND,
    DecisionEffect,
    NoEffect,
    quarantine_entry,
    quarantined,
    remeasure_requests,
    request_remeasure,
)
from pybb.supervision._errors import SupervisionError
from pybb.supervision._human_record import (
    BUDGET_DECISIONS,
    BudgetSummary,
    HumanDecision,
    HumanRecord,
    budget_summary,
    human_record,
)
from pybb.supervision._items import ItemFactory, ask_id_for, escalation_item
from pybb.supervision._records import (
    SUPERVISION,
    SUPERVISOR_WRITER,
    AppliedAnswer,
    SupervisionRecord,
    applied_answers,
    supervision_records,
)
from pybb.supervision._run import SupervisedRun
from pybb.supervision._settings import DEFAULT_CEILING, NotifySettings, SupervisionSettings
from pybb.supervision._supervisor import OOB_REASON, Supervisor
from pybb.supervision._transport import (
    AskComposer,
    AskContext,
    BoardOOBSource,
    BoardTransport,
    ScopeRule,
    compose_ask,
)

__all__ = [
    "BUDGET_DECISIONS",
    "DEFAULT_CEILING",
    "OOB_REASON",
    "OPEN_ASKS_SCOPE",
    "QUARANTINE_KIND",
    "REMEASURE_KIND",
    "SUPERVISION",
    "SUPERVISION_PREMISES",
    "SUPERVISION_REGIONS",
    "SUPERVISOR_WRITER",
    "AnswerWatcher",
    "AppliedAnswer",
    "AskCapReached",
    "AskComposer",
    "AskContext",
    "BoardOOBSource",
    "BoardTransport",
    "BudgetSummary",
    "DecisionEffect",
    "HumanDecision",
    "HumanRecord",
    "ItemFactory",
    "NoEffect",
    "NotifySettings",
    "OncePerItemStore",
    "ScopeRule",
    "SupervisedRun",
    "SupervisionError",
    "SupervisionRecord",
    "SupervisionSettings",
    "Supervisor",
    "applied_answers",
    "ask_id_for",
    "budget_summary",
    "compose_ask",
    "escalation_item",
    "human_record",
    "quarantine_entry",
    "quarantined",
    "remeasure_requests",
    "request_remeasure",
    "supervised_blackboard",
    "supervision_records",
    "supervision_rule",
]

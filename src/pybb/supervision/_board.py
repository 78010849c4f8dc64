"""The regions a supervised run declares, the rule that guards them, and its blackboard."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from blackboard import (
    Accept,
    AdmissionRule,
    BoardReader,
    Level,
    Model,
    ProposedContribution,
    ProposedWrite,
    Region,
    Reject,
)
from blackboard.stores import Store as BoardBackend
from buddhi.board import (
    ADMISSIONS_LEVEL,
    BUDGET_PREMISE,
    BUDGET_PREMISES,
    BUDGET_REGIONS,
    EXCLUSIONS_PREMISE,
)
from pybb import Blackboard
from pybb.human import (
    ANSWERS,
    HUMAN_PREFIX,
    HUMAN_REGIONS,
    PEOPLE_REGIONS,
    answer_rule,
    compose_rules,
)
from pybb.supervision._errors import SupervisionError
from pybb.supervision._records import SUPERVISION

__all__ = [
    "SUPERVISION_PREMISES",
    "SUPERVISION_REGIONS",
    "check_regions",
    "supervised_blackboard",
    "supervision_rule",
]

SUPERVISION_REGIONS: tuple[Region, ...] = (
    *HUMAN_REGIONS,
    *PEOPLE_REGIONS,
    *BUDGET_REGIONS,
    Level(SUPERVISION, unique="id"),
)
"""Every region a supervised run declares beside pybb's: the human loop's three levels
(``asks``, ``answers``, ``ask_closures``), the people side's (``people``,
``assignments``, ``notifications``, ``deliveries``, ``link_uses``), the budget's
(``budget``, ``exclusions``, ``admissions``) and the wiring's own ``supervision`` level."""

SUPERVISION_PREMISES: Mapping[str, Any] = MappingProxyType(dict(BUDGET_PREMISES))
"""The opening values of the premises among :data:`SUPERVISION_REGIONS`."""

_MACHINE_ONLY = frozenset({SUPERVISION, BUDGET_PREMISE, EXCLUSIONS_PREMISE, ADMISSIONS_LEVEL})


def supervision_rule(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    """Refuse a person's write to the wiring's or the budget's regions.

    People write answers (judged by ``pybb.human.answer_rule``); the decisions, the
    budget and its audit trail are written only by the supervisor and its store.
    """
    region = proposed.level if isinstance(proposed, ProposedContribution) else proposed.premise
    if region in _MACHINE_ONLY and proposed.writer.startswith(HUMAN_PREFIX):
        return Reject(
            f"{proposed.writer} may not write {region!r}: people answer asks on "
            f"{ANSWERS!r}; the supervisor keeps the decisions and the budget"
        )
    return Accept()


def supervised_blackboard(
    store: str | BoardBackend | None = None,
    board_id: str = "pybb",
    *,
    regions: Iterable[Region] = (),
    premises: Mapping[str, Any] | None = None,
    admission_rule: AdmissionRule | None = None,
    writer: str = "app",
) -> Blackboard:
    """A pybb blackboard that also holds the human loop, the budget and the decisions.

    Declares :data:`SUPERVISION_REGIONS` beside the application's ``regions`` and
    composes ``pybb.human.answer_rule`` and :func:`supervision_rule` before the
    application's ``admission_rule``. Reopening the same board resumes it.

    Args:
        store: As for ``pybb.Blackboard``: ``None``, a URL, or a kernel store.
        board_id: Which board in the store (pybb's default board by default).
        regions: The application's own regions.
        premises: The opening values of the application's premises.
        admission_rule: The application's rule, asked after the human loop's.
        writer: The writer name of the blackboard's own writes.
    """
    rules: list[AdmissionRule] = [answer_rule, supervision_rule]
    if admission_rule is not None:
        rules.append(admission_rule)
    return Blackboard(
        store,
        board_id,
        writer=writer,
        admission_rule=compose_rules(*rules),
        regions=[*SUPERVISION_REGIONS, *regions],
        premises={**SUPERVISION_PREMISES, **(premises or {})},
    )


def check_regions(model: Model, *, budget: bool, people: bool = False) -> None:
    """Refuse a board that lacks the regions the wiring writes.

    Args:
        model: The board.
        budget: The budget is kept on it.
        people: Notifications are sent from it (they write ``PEOPLE_REGIONS``).

    Raises:
        SupervisionError: A region is missing or declared differently.
    """
    needed: list[Region] = [*HUMAN_REGIONS, Level(SUPERVISION, unique="id")]
    if budget:
        needed += BUDGET_REGIONS
    if people:
        needed += PEOPLE_REGIONS
    missing = [r.name for r in needed if model.regions.get(r.name) != r]
    if missing:
        raise SupervisionError(
            f"board {model.board_id!r} lacks the regions {missing} that supervision writes; "
            "open it with pybb.supervision.supervised_blackboard (or declare "
            "SUPERVISION_REGIONS with SUPERVISION_PREMISES)"
        )

"""How one application's escalations are supervised: its pack, budget, caps and effect."""

from __future__ import annotations

from dataclasses import dataclass, field

from buddhi import BudgetTree, PolicyPack, Router, ScopePath
from buddhi.reference import ReferencePack, StaticRouter
from pybb import Escalation
from pybb.supervision._effects import DecisionEffect, NoEffect
from pybb.supervision._errors import SupervisionError
from pybb.supervision._items import ItemFactory, escalation_item
from pybb.supervision._transport import AskComposer, ScopeRule, compose_ask

__all__ = ["DEFAULT_CEILING", "SupervisionSettings"]

DEFAULT_CEILING = 10
"""The default budget: one global pool of ten asks."""


def _default_budget() -> BudgetTree:
    return BudgetTree.single_pool(DEFAULT_CEILING)


@dataclass(frozen=True, slots=True)
class SupervisionSettings:
    """Everything an application configures about supervising its escalations.

    Attributes:
        policy: buddhi's policy pack: thresholds, the ask's phrasing and options.
        router: buddhi's Router (model and effort per item).
        budget: The budget tree, installed in the store when the supervisor starts.
        scope: The scope every ask is charged to, or a function of the escalation;
            ``None`` charges the budget's root.
        max_open_asks: The most asks open on the board at once (past it an
            escalation is ``DENIED`` with scope ``open-asks``); ``None`` for no cap.
        item: Builds the buddhi item of an escalation (default
            :func:`~pybb.supervision.escalation_item`).
        compose: Builds the board's ask from buddhi's (default
            :func:`~pybb.supervision.compose_ask`).
        effect: What a person's decision does beyond resolving the entry.
    """

    policy: PolicyPack = field(default_factory=ReferencePack)
    router: Router = field(default_factory=StaticRouter)
    budget: BudgetTree = field(default_factory=_default_budget)
    scope: ScopePath | ScopeRule | None = None
    max_open_asks: int | None = None
    item: ItemFactory = escalation_item
    compose: AskComposer = compose_ask
    effect: DecisionEffect = field(default_factory=NoEffect)

    def __post_init__(self) -> None:
        cap = self.max_open_asks
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise SupervisionError(
                f"max_open_asks must be a whole number >= 0 or None, got {cap!r}"
            )
        if not isinstance(self.budget, BudgetTree):
            raise SupervisionError(f"budget must be a buddhi.BudgetTree, got {self.budget!r}")
        scope = self.scope
        if scope is not None and not callable(scope) and not _is_path(scope):
            raise SupervisionError(
                f"scope must be a scope path (a tuple of names), a function of the "
                f"escalation, or None, got {scope!r}"
            )

    def scope_of(self, escalation: Escalation) -> ScopePath:
        """The scope the escalation's ask is charged to."""
        if self.scope is None:
            return self.budget.root.path
        if callable(self.scope):
            return self.scope(escalation)
        return self.scope


def _is_path(value: object) -> bool:
    return isinstance(value, tuple) and bool(value) and all(isinstance(n, str) for n in value)

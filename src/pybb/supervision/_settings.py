"""How one application's escalations are supervised: its pack, budget, caps and effect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from buddhi import BudgetTree, PolicyPack, Router, ScopePath
from buddhi.reference import ReferencePack, StaticRouter
from pybb import Escalation
from pybb.human import AssignmentPolicy, DeadlinePolicy, Notifier
from pybb.supervision._effects import DecisionEffect, NoEffect
from pybb.supervision._errors import SupervisionError
from pybb.supervision._items import ItemFactory, escalation_item
from pybb.supervision._transport import AskComposer, ScopeRule, compose_ask

__all__ = ["DEFAULT_CEILING", "NotifySettings", "SupervisionSettings"]

DEFAULT_CEILING = 10
"""The default budget: one global pool of ten asks."""


def _default_budget() -> BudgetTree:
    return BudgetTree.single_pool(DEFAULT_CEILING)


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """How a supervised run notifies people (see ``pybb.human.NotificationDispatcher``).

    Attributes:
        notifiers: A notifier per channel kind (``"webhook"``, ``"email"``); the caller
            owns them (closes them).
        link_secret: The key of the links in notifications; give the inbox the same
            (``InboxSettings.link_secret``) so it accepts them.
        base_url: The inbox's address, e.g. ``"https://inbox.example.org"``.
    """

    notifiers: Mapping[str, Notifier]
    link_secret: bytes
    base_url: str

    def __post_init__(self) -> None:
        if not isinstance(self.link_secret, bytes) or len(self.link_secret) < 16:
            raise SupervisionError("NotifySettings.link_secret must be at least 16 bytes")
        if not self.base_url.startswith(("http://", "https://")):
            raise SupervisionError(
                "NotifySettings.base_url must be the inbox's http(s) address, got "
                f"{self.base_url!r}"
            )


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
        deadlines: Every ask's deadline and the default applied at it (by default 24
            hours and the ask's recommended option); each ask is posted carrying both.
        assignment: Who each ask is for (a person or a team); by default nobody.
        notify: How people are told about asks and reminded before the deadline;
            ``None``: nobody is notified.
    """

    policy: PolicyPack = field(default_factory=ReferencePack)
    router: Router = field(default_factory=StaticRouter)
    budget: BudgetTree = field(default_factory=_default_budget)
    scope: ScopePath | ScopeRule | None = None
    max_open_asks: int | None = None
    item: ItemFactory = escalation_item
    compose: AskComposer = compose_ask
    effect: DecisionEffect = field(default_factory=NoEffect)
    deadlines: DeadlinePolicy = field(default_factory=DeadlinePolicy)
    assignment: AssignmentPolicy = field(default_factory=AssignmentPolicy)
    notify: NotifySettings | None = None

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

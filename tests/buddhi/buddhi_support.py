"""Helpers shared by the buddhi tests: snapshots, policies, and recording seams."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from buddhi import (
    Ask,
    ConvergencePolicy,
    EffortScale,
    EscalationTransport,
    ExclusionCause,
    Item,
    Resolution,
    RouterPick,
    ScopeCounter,
    Seams,
    Spend,
    Store,
)
from buddhi.reference import (
    DEFAULT_POLICY,
    CollectingTransport,
    Policy,
    ReferencePack,
    StaticRouter,
    build_seams,
)

Snapshot = dict[tuple[str, ...], ScopeCounter]


def snapshot(store: Store) -> Snapshot:
    """Every scope's counters, to prove a bad input moved none."""
    return {scope.path: store.counter(scope.path) for scope in store.scopes()}


def policy(**changes: Any) -> Policy:
    """The default reference policy with some fields changed."""
    fields: dict[str, Any] = {
        "confidence_threshold": DEFAULT_POLICY.confidence_threshold,
        "question": DEFAULT_POLICY.question,
        "options": DEFAULT_POLICY.options,
        "recommended": DEFAULT_POLICY.recommended,
    }
    fields.update(changes)
    return Policy(**fields)


@dataclass
class Log:
    """The seam members called, in order."""

    calls: list[str] = field(default_factory=list)


class RecordingPack:
    """A ReferencePack that logs each member the kernel reads; ``build`` overrides asks."""

    def __init__(
        self,
        log: Log,
        inner: ReferencePack | None = None,
        build: Callable[[Item, Spend], Ask] | None = None,
    ) -> None:
        self.log, self.inner, self.build = log, inner or ReferencePack(), build

    @property
    def confidence_threshold(self) -> float:
        self.log.calls.append("confidence_threshold")
        return self.inner.confidence_threshold

    @property
    def efforts(self) -> EffortScale:
        self.log.calls.append("efforts")
        return self.inner.efforts

    @property
    def iteration_budget(self) -> int:
        self.log.calls.append("iteration_budget")
        return self.inner.iteration_budget

    @property
    def convergence(self) -> ConvergencePolicy:
        self.log.calls.append("convergence")
        return self.inner.convergence

    @property
    def bar(self) -> Callable[[float], float]:
        self.log.calls.append("bar")
        return self.inner.bar

    @property
    def exclusion_causes(self) -> Mapping[str, ExclusionCause]:
        return self.inner.exclusion_causes

    def detect_trigger(self, item: Item) -> str | None:
        return self.inner.detect_trigger(item)

    def worth_acting(self, item: Item) -> bool:
        self.log.calls.append("worth_acting")
        return self.inner.worth_acting(item)

    def build_ask(self, item: Item, spend: Spend) -> Ask:
        self.log.calls.append("build_ask")
        return self.build(item, spend) if self.build else self.inner.build_ask(item, spend)


class RecordingRouter:
    def __init__(self, log: Log, effort: str = "medium") -> None:
        self.log, self.inner = log, StaticRouter(effort=effort)

    def recommend(self, item: Item) -> RouterPick:
        self.log.calls.append("recommend")
        return self.inner.recommend(item)


class RecordingOOB:
    def __init__(self, log: Log, resolved: bool = False) -> None:
        self.log, self.resolved = log, resolved

    def can_observe_oob(self) -> bool:
        self.log.calls.append("can_observe_oob")
        return True

    def resolved_out_of_band(self, item: Item) -> Resolution | None:
        self.log.calls.append("resolved_out_of_band")
        return Resolution(item.id, "ops", "fixed by hand") if self.resolved else None


class RecordingTransport(EscalationTransport):
    def __init__(self, log: Log) -> None:
        self.log, self.inner = log, CollectingTransport()

    def deliver(self, ask: Ask) -> None:
        self.log.calls.append("deliver")
        self.inner.deliver(ask)


def recording_seams(
    ceiling: int = 10,
    resolved: bool = False,
    build: Callable[[Item, Spend], Ask] | None = None,
    inner: ReferencePack | None = None,
) -> tuple[Seams, Log]:
    log = Log()
    base = build_seams(ceiling=ceiling)
    store = base.store
    original = store.admit

    def admit(request: Any) -> Any:
        log.calls.append("admit")
        return original(request)

    store.admit = admit  # type: ignore[method-assign]
    seams = Seams(
        policy=RecordingPack(log, inner, build),
        router=RecordingRouter(log),
        store=store,
        transport=RecordingTransport(log),
        oob=RecordingOOB(log, resolved),
    )
    log.calls.clear()  # building the seams validated the pack, which read its members
    return seams, log

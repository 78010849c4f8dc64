"""The five seams the controller reads from, the bundle that carries them, and the context.

Single-call seams (``Router``, ``OOBSource``, the trigger hook) are Protocols, so a
plain object or function fits; the policy source is a Protocol of read-only members;
the stateful seams with a lifecycle (``Store``, ``EscalationTransport``) are ABCs with
``close()``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self

from buddhi._asks import Ask
from buddhi._budget import GLOBAL_SCOPE, Bar, ScopePath
from buddhi._convergence import ConvergencePolicy
from buddhi._effort import EffortScale, RouterPick, Spend
from buddhi._errors import PolicyError, SeamError
from buddhi._items import Item
from buddhi._store import ExclusionCause, Store

__all__ = [
    "Context",
    "EscalationTransport",
    "OOBSource",
    "PolicyPack",
    "Resolution",
    "Router",
    "Seams",
    "TriggerHook",
]


class PolicyPack(Protocol):
    """The single runtime-neutral policy source: thresholds, phrasings, taxonomies, rules.

    Attributes:
        confidence_threshold: At or above this item confidence the model handles the
            item (``route_judgment``); below it the item is a question for a person.
        efforts: The effort taxonomy the Router's picks are named from.
        iteration_budget: The most iterations any one item may be given in all.
        convergence: The stop detector's parameters.
        bar: The graduated admission bar of the budget.
        exclusion_causes: The exclusion taxonomy, by name, each with its tier.
    """

    @property
    def confidence_threshold(self) -> float: ...

    @property
    def efforts(self) -> EffortScale: ...

    @property
    def iteration_budget(self) -> int: ...

    @property
    def convergence(self) -> ConvergencePolicy: ...

    @property
    def bar(self) -> Bar: ...

    @property
    def exclusion_causes(self) -> Mapping[str, ExclusionCause]: ...

    def detect_trigger(self, item: Item) -> str | None:
        """Stage 0's hook: a flag to record on the item, or ``None``."""
        ...

    def worth_acting(self, item: Item) -> bool:
        """The cheap discard gate: ``False`` discards the item."""
        ...

    def build_ask(self, item: Item, spend: Spend) -> Ask:
        """Pre-reason the ask: phrase the question, 2–4 options, one starred."""
        ...


class Router(Protocol):
    """Per-item model and effort selection."""

    def recommend(self, item: Item) -> RouterPick:
        """Return the model and effort to spend on ``item``."""
        ...


@dataclass(frozen=True, slots=True)
class Resolution:
    """An out-of-band resolution: the item was settled outside the loop.

    Attributes:
        item_id: The resolved item.
        by: Who or what resolved it.
        note: How, in a sentence.
        at: When, if known.
    """

    item_id: str
    by: str
    note: str = ""
    at: datetime | None = None


class OOBSource(Protocol):
    """Whether the substrate can ever observe a resolution made out of band.

    The seam is one method, ``can_observe_oob() -> bool``, and a source that has only
    that fits it: ``Seams`` accepts it, and ``check_oob_resolution`` asks it nothing
    more while it answers ``False``.

    A source that can observe answers ``True`` and also offers the optional method
    ``resolved_out_of_band(item) -> Resolution | None``, which reports, per item, the
    resolution it saw; it is asked only of a source that answered ``True``. A source
    that answers ``True`` but offers no ``resolved_out_of_band`` cannot say what it
    saw, so ``check_oob_resolution`` raises :class:`~buddhi.errors.SeamError` for that
    item (before the budget is asked, so nothing is spent); implement the method, or
    answer ``False``. The reference ``RecordedResolutions`` is such an observing source.
    """

    def can_observe_oob(self) -> bool:
        """Return whether this substrate can ever observe an out-of-band resolution."""
        ...


class EscalationTransport(ABC):
    """Delivers an admitted, pre-reasoned ask to a person."""

    @abstractmethod
    def deliver(self, ask: Ask) -> None:
        """Deliver one ask; raise on failure."""

    def close(self) -> None:  # noqa: B027 - a transport without resources needs no cleanup
        """Release the transport's resources; closing twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class TriggerHook(Protocol):
    """Stage 0's trigger detection: return a flag for the item, or ``None``."""

    def __call__(self, item: Item) -> str | None:
        """Return the flag to record on ``item``, or ``None``."""
        ...


@dataclass(frozen=True, slots=True)
class Context:
    """Where in the closure an item is evaluated.

    Attributes:
        scope: The budget scope its escalations are charged to.
        effort_ceiling: The stream's effort ceiling; ``None`` allows the highest effort.
    """

    scope: ScopePath = GLOBAL_SCOPE
    effort_ceiling: str | None = None


@dataclass(frozen=True, slots=True)
class Seams:
    """The five seams one supervisor reads from, checked when the bundle is built.

    Attributes:
        policy: The policy pack.
        router: The Router.
        store: The budget store.
        transport: The escalation transport.
        oob: The out-of-band source.

    Raises:
        PolicyError: The pack lacks a threshold, phrasing or rule, or holds a bad value.
        SeamError: Another seam lacks a method the kernel always calls (for the
            OOBSource, only ``can_observe_oob``).
    """

    policy: PolicyPack
    router: Router
    store: Store
    transport: EscalationTransport
    oob: OOBSource

    def __post_init__(self) -> None:
        _require_members(self.router, "Router", ("recommend",))
        # Only the seam's one method: resolved_out_of_band is optional (see OOBSource).
        _require_members(self.oob, "OOBSource", ("can_observe_oob",))
        _require_instance(self.store, Store, "Store")
        _require_instance(self.transport, EscalationTransport, "EscalationTransport")
        _check_policy(self.policy)


_POLICY_MEMBERS = (
    "confidence_threshold",
    "efforts",
    "iteration_budget",
    "convergence",
    "bar",
    "exclusion_causes",
    "detect_trigger",
    "worth_acting",
    "build_ask",
)


def _require_members(seam: object, kind: str, members: tuple[str, ...]) -> None:
    missing = [name for name in members if not callable(getattr(seam, name, None))]
    if missing:
        raise SeamError(f"the {kind} {seam!r} lacks {missing}; implement them (see {kind})")


def _require_instance(seam: object, cls: type, kind: str) -> None:
    if not isinstance(seam, cls):
        raise SeamError(f"the {kind} must subclass buddhi.{kind}, got {seam!r}")


def _check_policy(policy: object) -> None:
    missing = [name for name in _POLICY_MEMBERS if not hasattr(policy, name)]
    if missing:
        raise PolicyError(
            f"the policy pack {policy!r} lacks {missing}; add them (see buddhi.PolicyPack)"
        )
    _require_threshold(policy.confidence_threshold)  # type: ignore[attr-defined]
    _require_typed(policy, "efforts", EffortScale)
    _require_typed(policy, "convergence", ConvergencePolicy)
    budget = policy.iteration_budget  # type: ignore[attr-defined]
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise PolicyError(
            f"the pack's iteration_budget must be a whole number >= 0, got {budget!r}"
        )
    if not callable(policy.bar):  # type: ignore[attr-defined]
        raise PolicyError(f"the pack's bar must be callable, got {policy.bar!r}")  # type: ignore[attr-defined]


def _require_threshold(threshold: object) -> None:
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not ok or not math.isfinite(threshold) or not 0.0 <= threshold <= 1.0:  # type: ignore[arg-type,operator]
        raise PolicyError(
            f"the pack's confidence_threshold must be a number in [0, 1], got {threshold!r}"
        )


def _require_typed(policy: object, name: str, cls: type) -> None:
    value = getattr(policy, name)
    if not isinstance(value, cls):
        raise PolicyError(f"the pack's {name} must be a buddhi.{cls.__name__}, got {value!r}")

"""buddhi's exception classes that carry no buddhi value: the leaf every module imports.

The public module is :mod:`buddhi.errors`, which re-exports these beside the two
errors that carry a value (``ScopeConflictError`` its ``StreamReport``, ``SourceExcluded``
its ``Exclusions``) and so live with those values. This module imports nothing of
buddhi, so no module that raises an error is imported back by the errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = [
    "AdmissionRefused",
    "BuddhiError",
    "BudgetError",
    "BudgetExhausted",
    "ConditioningError",
    "DeliveryError",
    "ExclusionError",
    "ItemError",
    "ItemTypeError",
    "PolicyError",
    "ScopeTreeError",
    "SeamError",
    "StoreError",
    "UnknownEffortError",
    "UnknownScopeError",
]


class BuddhiError(Exception):
    """The root of every error buddhi raises."""


class ItemError(BuddhiError, ValueError):
    """An :class:`~buddhi.Item`, :class:`~buddhi.Attempt` or stream has a bad field."""


class ItemTypeError(ItemError, TypeError):
    """A call that takes an :class:`~buddhi.Item` or :class:`~buddhi.Stream` got another type."""


class ConditioningError(BuddhiError, ValueError):
    """Stage 0 could not type a raw input.

    Attributes:
        index: The position of the offending raw input in the batch.
    """

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index


class PolicyError(BuddhiError, ValueError):
    """A policy pack lacks a threshold or phrasing, or holds a value out of range."""


class UnknownEffortError(PolicyError):
    """An effort named by a Router pick or a stream ceiling is not in the pack's scale.

    Attributes:
        effort: The unknown effort name.
        known: The efforts the pack's scale defines, lowest first.
    """

    def __init__(self, message: str, *, effort: str, known: Sequence[str]) -> None:
        super().__init__(message)
        self.effort = effort
        self.known = tuple(known)


class SeamError(BuddhiError, TypeError):
    """A seam object lacks a member the kernel calls, or returned a value of the wrong type."""


class BudgetError(BuddhiError, ValueError):
    """A budget, ceiling, weight, window or scope definition is invalid."""


class ScopeTreeError(BudgetError):
    """A declared scope tree has a cycle, an orphan, a duplicate, or not exactly one root."""


class UnknownScopeError(BudgetError, LookupError):
    """A scope path was used before the scope was opened in the store.

    Attributes:
        path: The unknown scope path.
    """

    def __init__(self, message: str, *, path: tuple[str, ...]) -> None:
        super().__init__(message)
        self.path = path


class ExclusionError(BuddhiError, ValueError):
    """An exclusion change would cross the permanent and transient tiers."""


class DeliveryError(BuddhiError):
    """The escalation transport failed to deliver an ask the budget had admitted.

    The admitted interrupt stays spent: refunding it could let a retry deliver twice.
    """


class StoreError(BuddhiError):
    """A store backend failed; durable fills raise this ``from`` their driver's error."""


class AdmissionRefused(BuddhiError):  # noqa: N818 - a refusal is a decision, see above
    """The budget refused an escalation: a decision of the run, reported as ``DENIED``.

    Attributes:
        item_id: The item whose escalation was refused.
    """

    def __init__(self, message: str, *, item_id: str) -> None:
        super().__init__(message)
        self.item_id = item_id


class BudgetExhausted(AdmissionRefused):
    """A scope on the path is at its ceiling, or its graduated bar is above the confidence.

    Attributes:
        item_id: The item whose escalation was refused.
        scope: The path of the scope that refused (the most loaded one on the path).
        spent: That scope's spend in its current window.
        ceiling: That scope's ceiling.
        required: The escalation confidence the bar required at that load.
        confidence: The escalation confidence the ask carried.
        limit: ``"ceiling"`` when the scope is full, ``"bar"`` when the bar was too high.
    """

    def __init__(
        self,
        *,
        item_id: str,
        scope: tuple[str, ...],
        spent: int,
        ceiling: int,
        required: float,
        confidence: float,
        limit: Literal["ceiling", "bar"],
    ) -> None:
        super().__init__(
            _exhausted_message(item_id, scope, spent, ceiling, required, confidence, limit),
            item_id=item_id,
        )
        self.scope = scope
        self.spent = spent
        self.ceiling = ceiling
        self.required = required
        self.confidence = confidence
        self.limit: Literal["ceiling", "bar"] = limit


def _exhausted_message(
    item_id: str,
    scope: tuple[str, ...],
    spent: int,
    ceiling: int,
    required: float,
    confidence: float,
    limit: str,
) -> str:
    where = "/".join(scope)
    head = f"escalation of item {item_id!r} refused: scope {where!r} has spent {spent} of {ceiling}"
    if limit == "ceiling":
        return f"{head} interrupts; raise its ceiling or wait for its next window"
    return (
        f"{head} interrupts, so the bar requires confidence {required:.3f} and the ask "
        f"carries {confidence:.3f}; only a more confident ask can interrupt now"
    )

"""The seven dispositions, the seven decisions, and what evaluating an item produced."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from buddhi._asks import Ask
from buddhi._budget import ScopePath
from buddhi._convergence import ConvergenceReport
from buddhi._effort import Spend
from buddhi._errors import AdmissionRefused, BudgetError
from buddhi._frozen import fast_init
from buddhi._items import Item
from buddhi._seams import Resolution
from buddhi._store import Admission

__all__ = [
    "Decision",
    "Disposition",
    "Finding",
    "InvalidAsk",
    "Outcome",
    "RouteJudgment",
    "ScopeConflictError",
    "StreamReport",
]


class Disposition(enum.Enum):
    """How an item ended: exactly one of seven."""

    DISCARDED = "discarded"
    """``worth_acting`` judged it not worth acting on."""
    CONVERGED = "converged"
    """``has_converged`` saw its iterations settle."""
    MODEL_HANDLED = "model_handled"
    """``route_judgment`` left it to the model (for a stream: budget granted)."""
    INVALID_ASK = "invalid_ask"
    """``validate_and_ask`` rejected the pack's ask as malformed."""
    RESOLVED_OOB = "resolved_oob"
    """``check_oob_resolution`` found it already resolved out of band."""
    ESCALATED = "escalated"
    """``aggregate_budget`` admitted the interrupt and the ask was delivered."""
    DENIED = "denied"
    """``aggregate_budget`` refused the interrupt."""


class Decision(enum.Enum):
    """The seven decisions, in the fixed order ``evaluate_item`` runs them."""

    WORTH_ACTING = "worth_acting"
    DECIDE_SPEND = "decide_spend"
    HAS_CONVERGED = "has_converged"
    ROUTE_JUDGMENT = "route_judgment"
    VALIDATE_AND_ASK = "validate_and_ask"
    CHECK_OOB_RESOLUTION = "check_oob_resolution"
    AGGREGATE_BUDGET = "aggregate_budget"


@fast_init
@dataclass(frozen=True, slots=True)
class RouteJudgment:
    """What ``route_judgment`` compared.

    Attributes:
        model_handles: Whether the model handles the item.
        confidence: The item's confidence.
        threshold: The pack's threshold.
    """

    model_handles: bool
    confidence: float
    threshold: float


@fast_init
@dataclass(frozen=True, slots=True)
class InvalidAsk:
    """A malformed ask, and what is wrong with it.

    Attributes:
        item_id: The item the ask was for.
        defects: Each defect, as a sentence saying what to fix.
        ask: What the pack returned.
    """

    item_id: str
    defects: tuple[str, ...]
    ask: object


Finding = InvalidAsk | Resolution | Admission | AdmissionRefused | None
"""What the ending decision found, beyond its annotation: see :attr:`Outcome.finding`."""


@fast_init
@dataclass(frozen=True, slots=True)
class Outcome:
    """How one item ended, which decision ended it and why, and what came before.

    The annotations are set by the decisions that ran: ``spend`` once
    ``decide_spend`` ran, ``convergence`` once ``has_converged`` ran, ``route`` once
    ``route_judgment`` ran, ``ask`` once ``validate_and_ask`` accepted one.
    ``trail`` is the record of which decisions ran, kept by :func:`~buddhi.evaluate_item`
    as it ran them; it is data, not derived from ``decided_by``.

    Attributes:
        item: The item.
        disposition: How it ended.
        decided_by: The decision that ended it.
        spend: ``decide_spend``'s annotation.
        convergence: ``has_converged``'s report.
        route: ``route_judgment``'s comparison.
        ask: The validated ask.
        finding: What the ending decision found when it was one of the last three: the
            :class:`InvalidAsk`, the :class:`~buddhi.Resolution`, the
            :class:`~buddhi.Admission`, or the refusal; ``None`` otherwise.
        trail: The decisions that ran for this item, in the order they ran, as
            ``evaluate_item`` recorded them while running them: every one up to and
            including ``decided_by``. Empty for an outcome built by hand, which no
            decision produced.
    """

    item: Item
    disposition: Disposition
    decided_by: Decision
    spend: Spend | None = None
    convergence: ConvergenceReport | None = None
    route: RouteJudgment | None = None
    ask: Ask | None = None
    finding: Finding = None
    trail: tuple[Decision, ...] = ()

    @property
    def reason(self) -> str:
        """Why the item ended, in a sentence."""
        return _REASONS[self.disposition](self)

    @property
    def admission(self) -> Admission | None:
        """The admitted interrupt, when the item was escalated."""
        return self.finding if isinstance(self.finding, Admission) else None

    @property
    def refusal(self) -> AdmissionRefused | None:
        """The budget's refusal, when the item was denied."""
        return self.finding if isinstance(self.finding, AdmissionRefused) else None

    @property
    def resolution(self) -> Resolution | None:
        """The out-of-band resolution, when one ended the item."""
        return self.finding if isinstance(self.finding, Resolution) else None

    @property
    def defects(self) -> tuple[str, ...]:
        """What was wrong with the ask, when it ended the item as ``INVALID_ASK``."""
        return self.finding.defects if isinstance(self.finding, InvalidAsk) else ()


def _discarded(outcome: Outcome) -> str:
    return "the pack's worth_acting rule judged it not worth acting on"


def _converged(outcome: Outcome) -> str:
    report = outcome.convergence
    assert report is not None
    reason = f"its last {report.counted} counted attempts settled"
    if report.transient_excluded:
        reason += f" ({report.transient_excluded} transient failures not counted)"
    return reason


def _model_handled(outcome: Outcome) -> str:
    route = outcome.route
    assert route is not None
    return (
        f"confidence {route.confidence:.3f} reaches the threshold {route.threshold:.3f}: "
        "the model handles it"
    )


def _invalid(outcome: Outcome) -> str:
    return "the pack's ask is malformed: " + "; ".join(outcome.defects)


def _resolved(outcome: Outcome) -> str:
    resolution = outcome.resolution
    assert resolution is not None
    note = f": {resolution.note}" if resolution.note else ""
    return f"already resolved out of band by {resolution.by}{note}"


def _escalated(outcome: Outcome) -> str:
    admission = outcome.admission
    assert admission is not None
    return (
        f"admitted in scope {'/'.join(admission.scope)!r} ({admission.spent} of "
        f"{admission.ceiling} spent; bar {admission.required:.3f} <= confidence "
        f"{admission.confidence:.3f}); the ask was delivered"
    )


def _denied(outcome: Outcome) -> str:
    return str(outcome.refusal)


_REASONS = {
    Disposition.DISCARDED: _discarded,
    Disposition.CONVERGED: _converged,
    Disposition.MODEL_HANDLED: _model_handled,
    Disposition.INVALID_ASK: _invalid,
    Disposition.RESOLVED_OOB: _resolved,
    Disposition.ESCALATED: _escalated,
    Disposition.DENIED: _denied,
}


@dataclass(frozen=True, slots=True)
class StreamReport:
    """What supervising one stream produced.

    Attributes:
        stream_id: The stream.
        scope: The budget scope its items were charged to.
        outcomes: One outcome per entry, in order; a child stream's is the outcome of
            judging it as an item.
        children: The reports of the child streams that were granted budget, in order.
    """

    stream_id: str
    scope: ScopePath
    outcomes: tuple[Outcome, ...]
    children: tuple[StreamReport, ...] = ()

    def walk(self) -> Iterator[Outcome]:
        """Yield every outcome of this stream and its granted children, depth first."""
        yield from self.outcomes
        for child in self.children:
            yield from child.walk()

    def counts(self) -> Counter[Disposition]:
        """Count the dispositions of every outcome :meth:`walk` yields."""
        return Counter(outcome.disposition for outcome in self.walk())

    def child(self, stream_id: str) -> StreamReport:
        """Return the report of the granted child stream with this id.

        Raises:
            KeyError: No granted child has that id.
        """
        for report in self.children:
            if report.stream_id == stream_id:
                return report
        raise KeyError(f"stream {self.stream_id!r} granted no child stream {stream_id!r}")


class ScopeConflictError(BudgetError):
    """A scope was opened again with a ceiling, weight or window unlike its first opening.

    Attributes:
        report: When the closure hit the conflict at a grant in the middle of a run, the
            report of what had run by then (asks delivered included): the
            :class:`~buddhi.StreamReport` the call would have returned so far.
            ``None`` otherwise, in particular when the closure refused the tree
            before anything of it ran.
    """

    def __init__(self, message: str, *, report: StreamReport | None = None) -> None:
        super().__init__(message)
        self.report = report

"""The item-level controller and the closure that runs it over streams of streams.

:func:`evaluate_item` is pure orchestration: it calls the seven decisions of
:mod:`buddhi.decisions` in their fixed order and returns the first disposition that
ends the item. :func:`supervise_stream` is the base case, running it over one stream;
:func:`supervise_stream_of_streams` is the closure operator, judging each child stream
through :meth:`~buddhi.Stream.as_item` with the identical function and, when a child
comes back ``MODEL_HANDLED``, granting it a scope derived from its parent's and
recursing into it. This is allocation recursion only: no locking, no coordination of
work between streams; the shared store accounts budget, nothing more.
"""

from __future__ import annotations

from buddhi._convergence import ConvergenceReport
from buddhi._effort import EffortScale, Spend
from buddhi._frozen import builder
from buddhi._items import Item, Stream
from buddhi._outcomes import (
    Decision,
    Disposition,
    InvalidAsk,
    Outcome,
    RouteJudgment,
    StreamReport,
)
from buddhi._seams import Context, Seams
from buddhi._store import Admission
from buddhi.decisions import (
    aggregate_budget,
    check_oob_resolution,
    decide_spend,
    has_converged,
    route_judgment,
    validate_and_ask,
    worth_acting,
)
from buddhi.errors import ItemTypeError

__all__ = ["evaluate_item", "supervise_stream", "supervise_stream_of_streams"]

_DEFAULT_CONTEXT = Context()
_outcome = builder(Outcome)  # Outcome(...) at half the cost: see buddhi._frozen

# Enum members read once: ``Disposition.DISCARDED`` goes through the enum metaclass
# (about 80 ns a read), and every item reads two of them.
_DISCARDED, _CONVERGED, _MODEL_HANDLED = (
    Disposition.DISCARDED,
    Disposition.CONVERGED,
    Disposition.MODEL_HANDLED,
)
_INVALID_ASK, _RESOLVED_OOB = Disposition.INVALID_ASK, Disposition.RESOLVED_OOB
_ESCALATED, _DENIED = Disposition.ESCALATED, Disposition.DENIED
_WORTH_ACTING, _HAS_CONVERGED = Decision.WORTH_ACTING, Decision.HAS_CONVERGED
_ROUTE_JUDGMENT, _VALIDATE_AND_ASK = Decision.ROUTE_JUDGMENT, Decision.VALIDATE_AND_ASK
_CHECK_OOB_RESOLUTION, _AGGREGATE_BUDGET = (
    Decision.CHECK_OOB_RESOLUTION,
    Decision.AGGREGATE_BUDGET,
)

# The trail each exit of evaluate_item records: the decisions its path called, in the
# order it called them. Written out call by call rather than sliced from Decision, so
# that each names what its path ran; a constant per exit rather than a tuple grown per
# decision, which would cost ~60 ns a decision on the hot path. The test
# test_the_trail_is_the_decisions_that_actually_ran_in_the_order_they_ran spies on the
# seven calls and holds every path's record to them.
_RAN_WORTH_ACTING = (_WORTH_ACTING,)
_RAN_HAS_CONVERGED = (_WORTH_ACTING, Decision.DECIDE_SPEND, _HAS_CONVERGED)
_RAN_ROUTE_JUDGMENT = (*_RAN_HAS_CONVERGED, _ROUTE_JUDGMENT)
_RAN_VALIDATE_AND_ASK = (*_RAN_ROUTE_JUDGMENT, _VALIDATE_AND_ASK)
_RAN_CHECK_OOB_RESOLUTION = (*_RAN_VALIDATE_AND_ASK, _CHECK_OOB_RESOLUTION)
_RAN_AGGREGATE_BUDGET = (*_RAN_CHECK_OOB_RESOLUTION, _AGGREGATE_BUDGET)


def evaluate_item(item: Item, seams: Seams, context: Context | None = None) -> Outcome:
    """Run the seven decisions over one item, in order, and return how it ended.

    Args:
        item: The item (for a stream, ``stream.as_item()``).
        seams: The seams to read from.
        context: The scope to charge and the stream's effort ceiling; by default the
            global pool and no ceiling.

    Returns:
        The outcome: the disposition, the decision that ended the item and why, the
        annotations of the decisions before it, and the trail of the decisions that
        ran, recorded by the path that ran them.

    Raises:
        ItemTypeError: ``item`` is not an :class:`~buddhi.Item`.
        UnknownEffortError: The Router's pick or the ceiling names an unknown effort.
        UnknownScopeError: The context's scope was never opened in the store.
    """
    if not isinstance(item, Item):
        raise ItemTypeError(
            f"evaluate_item takes a buddhi.Item, got {type(item).__name__} {item!r}; "
            "type raw input with buddhi.stage0.condition first"
        )
    ctx = context or _DEFAULT_CONTEXT
    policy = seams.policy
    if not worth_acting(item, policy):
        return _outcome(item, _DISCARDED, _WORTH_ACTING, trail=_RAN_WORTH_ACTING)
    spend = decide_spend(item, seams.router, policy, ctx.effort_ceiling)
    convergence = has_converged(item, policy)
    if convergence.converged:
        return _outcome(
            item, _CONVERGED, _HAS_CONVERGED, spend, convergence, trail=_RAN_HAS_CONVERGED
        )
    route = route_judgment(item, policy)
    if route.model_handles:
        return _outcome(
            item,
            _MODEL_HANDLED,
            _ROUTE_JUDGMENT,
            spend,
            convergence,
            route,
            trail=_RAN_ROUTE_JUDGMENT,
        )
    return _ask_a_person(item, seams, ctx, spend, convergence, route)


def supervise_stream(stream: Stream, seams: Seams, context: Context | None = None) -> StreamReport:
    """The base case: run :func:`evaluate_item` over every entry of one stream.

    An entry that is itself a stream is judged as an item and, if granted, recursed
    into, exactly as :func:`supervise_stream_of_streams` does; so nesting of any depth
    works from either entry point.

    Args:
        stream: The stream.
        seams: The seams to read from.
        context: The scope to charge and the effort ceiling; by default the global pool.

    Returns:
        One outcome per entry, and the reports of granted child streams.
    """
    _check_tree(stream, seams.policy.efforts)
    return _supervise(stream, seams, context or _DEFAULT_CONTEXT)


def _supervise(stream: Stream, seams: Seams, context: Context) -> StreamReport:
    ctx = _narrow(context, stream, seams.policy.efforts)
    outcomes: list[Outcome] = []
    children: list[StreamReport] = []
    for entry in stream.entries:
        if isinstance(entry, Stream):
            outcome, report = _judge_child(entry, seams, ctx)
            children.extend(report)
        else:
            outcome = evaluate_item(entry, seams, ctx)
        outcomes.append(outcome)
    return StreamReport(stream.id, ctx.scope, tuple(outcomes), tuple(children))


def supervise_stream_of_streams(
    streams: Stream, seams: Seams, context: Context | None = None
) -> StreamReport:
    """The closure operator: judge each child stream as an item, recurse where granted.

    Each child is viewed through :meth:`~buddhi.Stream.as_item` and run through the
    identical :func:`evaluate_item`. A child that comes back ``MODEL_HANDLED`` is
    granted a scope derived from the parent's (``floor(weight * parent ceiling)``),
    its items get the spend's effort as their ceiling, and it is supervised through
    :func:`supervise_stream`, which recurses again for streams nested deeper.

    Args:
        streams: A stream whose entries are all streams.
        seams: The seams to read from.
        context: The parent's scope and effort ceiling; by default the global pool.

    Returns:
        One outcome per child stream, and the reports of the granted ones.

    Raises:
        ItemTypeError: An entry is an item rather than a stream.
    """
    _check_tree(streams, seams.policy.efforts)
    for entry in streams.entries:
        if not isinstance(entry, Stream):
            raise ItemTypeError(
                f"stream {streams.id!r} holds item {entry.id!r}; supervise_stream_of_streams "
                "takes a stream of streams (use supervise_stream for items)"
            )
    ctx = _narrow(context or _DEFAULT_CONTEXT, streams, seams.policy.efforts)
    judged = [_judge_child(child, seams, ctx) for child in streams.entries]  # type: ignore[arg-type]
    outcomes = tuple(outcome for outcome, _ in judged)
    children = tuple(report for _, granted in judged for report in granted)
    return StreamReport(streams.id, ctx.scope, outcomes, children)


def _ask_a_person(
    item: Item,
    seams: Seams,
    ctx: Context,
    spend: Spend,
    report: ConvergenceReport,
    route: RouteJudgment,
) -> Outcome:
    ask = validate_and_ask(item, seams.policy, spend)
    if isinstance(ask, InvalidAsk):
        decision, ran = _VALIDATE_AND_ASK, _RAN_VALIDATE_AND_ASK
        return _outcome(item, _INVALID_ASK, decision, spend, report, route, None, ask, ran)
    resolution = check_oob_resolution(item, seams.oob)
    if resolution is not None:
        decision, ran = _CHECK_OOB_RESOLUTION, _RAN_CHECK_OOB_RESOLUTION
        return _outcome(item, _RESOLVED_OOB, decision, spend, report, route, ask, resolution, ran)
    verdict = aggregate_budget(item, ask, seams.store, seams.transport, seams.policy.bar, ctx.scope)
    ended = _ESCALATED if isinstance(verdict, Admission) else _DENIED
    decision, ran = _AGGREGATE_BUDGET, _RAN_AGGREGATE_BUDGET
    return _outcome(item, ended, decision, spend, report, route, ask, verdict, ran)


def _judge_child(
    child: Stream, seams: Seams, ctx: Context
) -> tuple[Outcome, tuple[StreamReport, ...]]:
    outcome = evaluate_item(child.as_item(), seams, ctx)
    if outcome.disposition is not Disposition.MODEL_HANDLED:
        return outcome, ()
    parent = seams.store.counter(ctx.scope).scope
    granted = parent.child(child.id, child.weight)
    seams.store.open_scope(granted)
    assert outcome.spend is not None  # decide_spend ran before route_judgment
    child_ctx = Context(granted.path, outcome.spend.effort)
    return outcome, (_supervise(child, seams, child_ctx),)


def _check_tree(stream: Stream, scale: EffortScale) -> None:
    """Refuse a bad stream tree before anything is judged, so nothing is half-spent."""
    if not isinstance(stream, Stream):
        raise ItemTypeError(f"supervising takes a buddhi.Stream, got {type(stream).__name__}")
    pending = [stream]
    while pending:
        current = pending.pop()
        if current.effort_ceiling is not None:
            scale.rank(current.effort_ceiling, named_by=f"stream {current.id!r}'s effort ceiling")
        pending.extend(entry for entry in current.entries if isinstance(entry, Stream))


def _narrow(ctx: Context, stream: Stream, scale: EffortScale) -> Context:
    ceiling = _lower(scale, ctx.effort_ceiling, stream.effort_ceiling)
    return ctx if ceiling == ctx.effort_ceiling else Context(ctx.scope, ceiling)


def _lower(scale: EffortScale, first: str | None, second: str | None) -> str | None:
    if first is None or second is None:
        return first if second is None else second
    named = "a stream's effort ceiling"
    return (
        first if scale.rank(first, named_by=named) <= scale.rank(second, named_by=named) else second
    )

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

from collections.abc import Iterator, Mapping

from buddhi._budget import Scope, ScopePath
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
from buddhi._store import Admission, Store
from buddhi.decisions import (
    aggregate_budget,
    check_oob_resolution,
    decide_spend,
    has_converged,
    route_judgment,
    validate_and_ask,
    worth_acting,
)
from buddhi.errors import ItemTypeError, ScopeConflictError

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
_RAN_WORTH_ACTING: tuple[Decision, ...] = (_WORTH_ACTING,)
_RAN_HAS_CONVERGED: tuple[Decision, ...] = (
    *_RAN_WORTH_ACTING,
    Decision.DECIDE_SPEND,
    _HAS_CONVERGED,
)
_RAN_ROUTE_JUDGMENT: tuple[Decision, ...] = (*_RAN_HAS_CONVERGED, _ROUTE_JUDGMENT)
_RAN_VALIDATE_AND_ASK: tuple[Decision, ...] = (*_RAN_ROUTE_JUDGMENT, _VALIDATE_AND_ASK)
_RAN_CHECK_OOB_RESOLUTION: tuple[Decision, ...] = (*_RAN_VALIDATE_AND_ASK, _CHECK_OOB_RESOLUTION)
_RAN_AGGREGATE_BUDGET: tuple[Decision, ...] = (*_RAN_CHECK_OOB_RESOLUTION, _AGGREGATE_BUDGET)


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
    # The trail is passed by position: a keyword costs ~100 ns more per item here.
    if not worth_acting(item, policy):
        ran = _RAN_WORTH_ACTING
        return _outcome(item, _DISCARDED, _WORTH_ACTING, None, None, None, None, None, ran)
    spend = decide_spend(item, seams.router, policy, ctx.effort_ceiling)
    convergence = has_converged(item, policy)
    if convergence.converged:
        ran = _RAN_HAS_CONVERGED
        return _outcome(item, _CONVERGED, _HAS_CONVERGED, spend, convergence, None, None, None, ran)
    route = route_judgment(item, policy)
    if route.model_handles:
        ended, ran = _MODEL_HANDLED, _RAN_ROUTE_JUDGMENT
        return _outcome(item, ended, _ROUTE_JUDGMENT, spend, convergence, route, None, None, ran)
    return _ask_a_person(item, seams, ctx, spend, convergence, route)


def supervise_stream(stream: Stream, seams: Seams, context: Context | None = None) -> StreamReport:
    """The base case: run :func:`evaluate_item` over every entry of one stream.

    An entry that is itself a stream is judged as an item and, if granted, recursed
    into, exactly as :func:`supervise_stream_of_streams` does; so nesting of any depth
    works from either entry point.

    Before anything is judged, the whole tree is checked, so that a bad tree is
    refused with nothing of it spent or delivered: every effort ceiling must be in the
    pack's scale, and the scope each nested stream would be granted must not conflict
    with a scope the store already holds under that path (see
    :func:`supervise_stream_of_streams`).

    Args:
        stream: The stream.
        seams: The seams to read from.
        context: The scope to charge and the effort ceiling; by default the global pool.

    Returns:
        One outcome per entry, and the reports of granted child streams.

    Raises:
        ItemTypeError: ``stream`` is not a :class:`~buddhi.Stream`.
        UnknownEffortError: A stream of the tree names an effort ceiling outside the scale.
        ScopeConflictError: A nested stream's grant would reopen a scope differently;
            raised before any entry is judged, or at the grant with what ran as its
            ``report`` (see :func:`supervise_stream_of_streams`).
        UnknownScopeError: The tree nests streams and the context's scope was never
            opened in the store.
    """
    _check_tree(stream, seams.policy.efforts)
    ctx = context or _DEFAULT_CONTEXT
    _check_grants(stream, seams.store, ctx.scope)
    return _supervise(stream, seams, ctx)


def _supervise(stream: Stream, seams: Seams, context: Context) -> StreamReport:
    return _run(stream, seams, _narrow(context, stream, seams.policy.efforts))


def _run(stream: Stream, seams: Seams, ctx: Context) -> StreamReport:
    outcomes: list[Outcome] = []
    children: list[StreamReport] = []
    try:
        for entry in stream.entries:
            if isinstance(entry, Stream):
                _judge_child(entry, seams, ctx, outcomes, children)
            else:
                outcomes.append(evaluate_item(entry, seams, ctx))
    except ScopeConflictError as conflict:
        # A grant conflicted after the checks passed (another writer opened the scope
        # differently meanwhile): what did run, asks delivered included, is kept on the
        # error, this level's report replacing the one of the level below it nests.
        conflict.report = StreamReport(stream.id, ctx.scope, tuple(outcomes), tuple(children))
        raise
    return StreamReport(stream.id, ctx.scope, tuple(outcomes), tuple(children))


def supervise_stream_of_streams(
    streams: Stream, seams: Seams, context: Context | None = None
) -> StreamReport:
    """The closure operator: judge each child stream as an item, recurse where granted.

    Each child is viewed through :meth:`~buddhi.Stream.as_item` and run through the
    identical :func:`evaluate_item`. A child that comes back ``MODEL_HANDLED`` is
    granted a scope derived from the parent's (``floor(weight * parent ceiling)``),
    its items get the spend's effort as their ceiling, and it is supervised through
    the public :func:`supervise_stream`, which recurses again for streams nested deeper.

    Nothing is half-spent: before any child is judged, the scope every stream of the
    tree would be granted is derived and compared with the scopes the store holds. A
    scope can never be reopened with another definition, so a stream whose grant would
    do that (say, rerun with another weight than it was first granted with) makes the
    whole call raise :class:`~buddhi.errors.ScopeConflictError` before anything of the
    tree is judged, charged or delivered; the error names every such stream. This
    holds whether or not this run would grant that stream, so that whether a tree is
    refused never depends on the items' confidences. The check reads the store as it
    is when the call starts (and again as each granted child starts). Should another
    writer open a scope differently while the run is under way, the grant still raises
    ``ScopeConflictError``, and then its ``report`` attribute holds the
    :class:`~buddhi.StreamReport` of what did run (asks delivered included), as this
    call would have returned it so far; ``report`` is ``None`` when the tree was
    refused before anything ran.

    Args:
        streams: A stream whose entries are all streams.
        seams: The seams to read from.
        context: The parent's scope and effort ceiling; by default the global pool.

    Returns:
        One outcome per child stream, and the reports of the granted ones.

    Raises:
        ItemTypeError: An entry is an item rather than a stream.
        UnknownEffortError: A stream of the tree names an effort ceiling outside the scale.
        ScopeConflictError: A stream's grant would reopen a scope differently; raised
            before any child is judged (``report`` is ``None``), or, should another
            writer open the scope meanwhile, at the grant (``report`` is what ran).
        UnknownScopeError: The context's scope was never opened in the store.
    """
    _check_tree(streams, seams.policy.efforts)
    for entry in streams.entries:
        if not isinstance(entry, Stream):
            raise ItemTypeError(
                f"stream {streams.id!r} holds item {entry.id!r}; supervise_stream_of_streams "
                "takes a stream of streams (use supervise_stream for items)"
            )
    context = context or _DEFAULT_CONTEXT
    _check_grants(streams, seams.store, context.scope)
    ctx = _narrow(context, streams, seams.policy.efforts)
    return _run(streams, seams, ctx)


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
    child: Stream,
    seams: Seams,
    ctx: Context,
    outcomes: list[Outcome],
    children: list[StreamReport],
) -> None:
    """Judge a child stream as an item and, if granted, supervise it: append both reports."""
    outcome = evaluate_item(child.as_item(), seams, ctx)
    outcomes.append(outcome)
    if outcome.disposition is not Disposition.MODEL_HANDLED:
        return
    parent = seams.store.counter(ctx.scope).scope
    granted = parent.child(child.id, child.weight)
    seams.store.open_scope(granted)
    assert outcome.spend is not None  # decide_spend ran before route_judgment
    child_ctx = Context(granted.path, outcome.spend.effort)
    try:
        # Through the public function, as the seed and supervise_stream_of_streams say:
        # the recursion is supervise_stream, checks included (they read the store now).
        children.append(supervise_stream(child, seams, child_ctx))
    except ScopeConflictError as conflict:
        if conflict.report is not None:  # what ran in the child before its conflict
            children.append(conflict.report)
        raise


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


def _check_grants(stream: Stream, store: Store, path: ScopePath) -> None:
    """Refuse a tree whose grants would reopen a scope differently, before anything runs.

    Each nested stream's grant is derived exactly as :func:`_judge_child` derives it
    (from the scope it would be granted under), and compared with what the store holds
    at that path; one read of the store's scopes serves the whole tree.
    """
    nested = _nested(stream)
    if not nested:
        return  # no grant to make: a flat stream never reads the store's scopes
    held = {scope.path: scope for scope in store.scopes()}
    # An unopened scope raises the store's own UnknownScopeError here, before anything.
    root = held.get(path) or store.counter(path).scope
    conflicts = list(_conflicts(nested, root, held))
    if conflicts:
        raise ScopeConflictError(
            "; ".join(conflicts) + f". A scope is never reopened with another definition, "
            f"so nothing of stream {stream.id!r} was judged, charged or delivered"
        )


def _conflicts(nested: list[Stream], root: Scope, held: Mapping[ScopePath, Scope]) -> Iterator[str]:
    """Describe each grant of the tree that ``held`` has under another definition."""
    pending = [(child, root) for child in reversed(nested)]
    while pending:  # depth first, in the tree's order
        child, parent = pending.pop()
        granted = parent.child(child.id, child.weight)
        existing = held.get(granted.path)
        if existing is not None and existing != granted:
            # Its subtree is not searched: a grant under a scope in conflict would be
            # derived from a definition the store does not hold, so it says nothing.
            yield _conflict(child, granted, existing)
            continue
        pending.extend((entry, granted) for entry in reversed(_nested(child)))


def _nested(stream: Stream) -> list[Stream]:
    return [entry for entry in stream.entries if isinstance(entry, Stream)]


def _conflict(child: Stream, granted: Scope, existing: Scope) -> str:
    where = "/".join(granted.path)
    if existing.weight != granted.weight:
        fix = f"give stream {child.id!r} the weight {existing.weight!r} the store holds"
    else:
        fix = f"open {where!r} as a grant derives it (or not at all)"
    return (
        f"stream {child.id!r} would be granted scope {where!r} as {_definition(granted)}, "
        f"but the store holds {where!r} as {_definition(existing)}: {fix}, or give the "
        "stream another id for a new scope"
    )


def _definition(scope: Scope) -> str:
    window = "" if scope.window is None else f", window {scope.window}"
    return f"weight {scope.weight!r}, ceiling {scope.ceiling}{window}"


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

"""The seven decisions, each usable alone; ``evaluate_item`` runs them in this order.

1. :func:`worth_acting`: the cheap discard gate.
2. :func:`decide_spend`: the Router's pick, clamped; annotates, never ends an item.
3. :func:`has_converged`: the stop detector.
4. :func:`route_judgment`: the model, or a person, by a confidence threshold.
5. :func:`validate_and_ask`: the pack's pre-reasoned ask, or why it is malformed.
6. :func:`check_oob_resolution`: was it already resolved out of band?
7. :func:`aggregate_budget`: admit the interrupt and deliver the ask, or refuse.
"""

from __future__ import annotations

from buddhi._asks import Ask, ask_defects
from buddhi._budget import Bar, ScopePath
from buddhi._convergence import _NO_HISTORY, ConvergenceReport, detect_convergence
from buddhi._effort import RouterPick, Spend
from buddhi._frozen import builder
from buddhi._items import Item
from buddhi._outcomes import InvalidAsk, RouteJudgment
from buddhi._seams import EscalationTransport, OOBSource, PolicyPack, Resolution, Router
from buddhi._store import Admission, AdmissionRequest, Store
from buddhi.errors import AdmissionRefused, DeliveryError, SeamError

__all__ = [
    "InvalidAsk",
    "aggregate_budget",
    "check_oob_resolution",
    "decide_spend",
    "has_converged",
    "route_judgment",
    "validate_and_ask",
    "worth_acting",
]


# The values built for every item, at half the cost of calling the class: see buddhi._frozen.
_spend = builder(Spend)
_route_judgment = builder(RouteJudgment)
_admission_request = builder(AdmissionRequest)


def worth_acting(item: Item, policy: PolicyPack) -> bool:
    """Decision 1: ask the pack's cheap rule whether the item is worth acting on.

    Raises:
        SeamError: The rule returned something other than a bool.
    """
    keep = policy.worth_acting(item)
    if not isinstance(keep, bool):
        raise SeamError(f"the pack's worth_acting returned {keep!r}; return True or False")
    return keep


def decide_spend(
    item: Item, router: Router, policy: PolicyPack, effort_ceiling: str | None = None
) -> Spend:
    """Decision 2: take the Router's pick and clamp it to the ceiling and iteration budget.

    The effort is lowered to ``effort_ceiling`` when above it. The iterations are the
    effort's, capped by what the item has left of the pack's iteration budget (its
    counted attempts are spent; transient failures have their own retry bound).

    Raises:
        UnknownEffortError: The pick or the ceiling names an effort outside the scale.
        SeamError: The Router returned something other than a RouterPick.
    """
    pick = router.recommend(item)
    if not isinstance(pick, RouterPick):
        raise SeamError(f"the Router returned {pick!r}; return a buddhi.RouterPick")
    scale = policy.efforts
    # Inline rather than in helpers: this runs for every item that is worth acting on.
    effort = pick.effort
    rank = scale.rank(effort)
    if effort_ceiling is not None and rank > scale.rank(effort_ceiling, named_by="the ceiling"):
        effort = effort_ceiling
    allowed = scale.iterations(effort)
    iterations = policy.iteration_budget
    history = item.history
    if history:
        used = 0
        for attempt in history:
            if not attempt.transient:
                used += 1
        iterations = max(0, iterations - used)
    clamped: tuple[str, ...]
    if iterations < allowed:
        clamped = _BOTH if effort != pick.effort else _BUDGET
    else:
        iterations = allowed
        clamped = _CEILING if effort != pick.effort else ()
    # A Router that hands out the same pick (the reference StaticRouter does) gets the
    # same frozen Spend back while nothing else differs, as every item without a
    # history shares one ConvergenceReport: equal, immutable, and not rebuilt.
    last = _last_spend
    if (
        last.requested is pick
        and last.effort is effort
        and last.iterations is iterations
        and last.clamped_by is clamped
    ):
        return last
    spend = _spend(pick.model, effort, iterations, pick, clamped)
    _remember_spend(spend)
    return spend


_CEILING = ("effort_ceiling",)
_BUDGET = ("iteration_budget",)
_BOTH = (*_CEILING, *_BUDGET)

_last_spend = Spend("", "", -1, RouterPick("", ""))
"""The last Spend built; a placeholder no pick is identical to, to begin with."""


def _remember_spend(spend: Spend) -> None:
    global _last_spend  # one reference replaced at once: safe across threads
    _last_spend = spend


def has_converged(item: Item, policy: PolicyPack) -> ConvergenceReport:
    """Decision 3: the stop detector, with transient failures left out of the count."""
    convergence = policy.convergence
    history = item.history
    if not history:  # what detect_convergence answers, without the call
        return _NO_HISTORY
    return detect_convergence(history, convergence)


def route_judgment(item: Item, policy: PolicyPack) -> RouteJudgment:
    """Decision 4: the model handles the item at or above the pack's confidence threshold."""
    threshold = policy.confidence_threshold
    confidence = item.confidence
    return _route_judgment(confidence >= threshold, confidence, threshold)


def validate_and_ask(item: Item, policy: PolicyPack, spend: Spend) -> Ask | InvalidAsk:
    """Decision 5: have the pack pre-reason the ask, and reject it if malformed.

    Returns:
        The ask when it has 2–4 options, exactly one starred, a question, and a
        finite confidence in [0, 1]; otherwise what is wrong with it.
    """
    ask = policy.build_ask(item, spend)
    if not isinstance(ask, Ask):
        return InvalidAsk(item.id, (f"the pack built {ask!r}, which is not a buddhi.Ask",), ask)
    defects = ask_defects(ask, item.id)
    return InvalidAsk(item.id, defects, ask) if defects else ask


def check_oob_resolution(item: Item, oob: OOBSource) -> Resolution | None:
    """Decision 6: ask the substrate, if it can observe at all, how the item was resolved.

    A source that cannot observe (``can_observe_oob()`` is false) is asked nothing
    more, and the answer is ``None``. One that can is asked its optional
    ``resolved_out_of_band(item)``.

    Raises:
        SeamError: The source can observe but has no ``resolved_out_of_band`` to ask, or
            returned something other than a Resolution or None.
    """
    if not oob.can_observe_oob():
        return None
    ask = getattr(oob, "resolved_out_of_band", None)
    if not callable(ask):
        raise SeamError(
            f"the OOBSource {oob!r} can observe out-of-band resolutions (can_observe_oob() "
            "returned True) but has no resolved_out_of_band(item) to say what it saw; "
            "implement resolved_out_of_band, or return False from can_observe_oob"
        )
    resolution = ask(item)
    if resolution is not None and not isinstance(resolution, Resolution):
        raise SeamError(f"the OOBSource returned {resolution!r}; return a Resolution or None")
    return resolution


def aggregate_budget(
    item: Item,
    ask: Ask,
    store: Store,
    transport: EscalationTransport,
    bar: Bar,
    scope: ScopePath,
) -> Admission | AdmissionRefused:
    """Decision 7: admit the interrupt against the scope, then deliver the ask.

    Returns:
        The admission (the ask was delivered), or the store's refusal (nothing spent).

    Raises:
        DeliveryError: The transport failed after admission; the interrupt stays spent.
        UnknownScopeError: The scope was never opened in the store.
    """
    request = _admission_request(scope, item.id, item.source, ask.confidence, bar)
    try:
        admission = store.admit(request)
    except AdmissionRefused as refusal:
        return refusal
    try:
        transport.deliver(ask)
    except Exception as exc:
        raise DeliveryError(
            f"the transport failed to deliver the ask for item {item.id!r} after the budget "
            f"admitted it ({exc}); the interrupt stays spent"
        ) from exc
    return admission

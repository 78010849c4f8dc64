"""Each of the seven decisions alone."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from buddhi_support import policy

from buddhi import (
    Admission,
    Ask,
    AskOption,
    Attempt,
    BudgetExhausted,
    ConvergencePolicy,
    InvalidAsk,
    Item,
    Resolution,
    RouterPick,
    Seams,
    SourceExcluded,
    Spend,
)
from buddhi.decisions import (
    aggregate_budget,
    check_oob_resolution,
    decide_spend,
    has_converged,
    route_judgment,
    validate_and_ask,
    worth_acting,
)
from buddhi.errors import DeliveryError, SeamError, UnknownEffortError
from buddhi.reference import (
    DEFAULT_CAUSES,
    BlindOOBSource,
    CollectingTransport,
    RecordedResolutions,
    ReferencePack,
    StaticRouter,
)

PACK = ReferencePack()
SPEND = Spend("m", "medium", 3, RouterPick("m", "medium"))
T = Attempt(transient=True)


def item(**fields: object) -> Item:
    base: dict[str, object] = {"id": "i", "source": "s"}
    base.update(fields)
    return Item(**base)  # type: ignore[arg-type]


def ask(options: int = 3, starred: tuple[int, ...] = (0,), **fields: object) -> Ask:
    opts = tuple(AskOption(f"o{n}", recommended=n in starred) for n in range(options))
    base: dict[str, object] = {"item_id": "i", "question": "Which?", "options": opts}
    base["confidence"] = 0.9
    base.update(fields)
    return Ask(**base)  # type: ignore[arg-type]


# 1. worth_acting


def test_worth_acting_keeps_everything_by_default() -> None:
    assert worth_acting(item(), PACK)
    assert worth_acting(item(source="anything", confidence=1.0), PACK)


def test_worth_acting_discards_listed_sources() -> None:
    pack = ReferencePack(policy(discard_sources=frozenset({"noise"})))
    assert not worth_acting(item(source="noise"), pack)
    assert worth_acting(item(source="signal"), pack)


def test_worth_acting_rejects_a_rule_that_returns_no_bool() -> None:
    class Sloppy(ReferencePack):
        def worth_acting(self, item: Item) -> bool:
            return 1  # type: ignore[return-value]

    with pytest.raises(SeamError, match="return True or False"):
        worth_acting(item(), Sloppy())


# 2. decide_spend


def test_decide_spend_passes_the_pick_through_when_nothing_clamps() -> None:
    spend = decide_spend(item(), StaticRouter("m", "medium"), PACK)
    assert (spend.model, spend.effort, spend.iterations, spend.clamped_by) == ("m", "medium", 3, ())
    assert spend.requested == RouterPick("m", "medium")


def test_decide_spend_clamps_to_the_stream_effort_ceiling() -> None:
    spend = decide_spend(item(), StaticRouter("m", "high"), PACK, effort_ceiling="low")
    assert (spend.effort, spend.iterations, spend.clamped_by) == ("low", 1, ("effort_ceiling",))
    assert decide_spend(item(), StaticRouter("m", "low"), PACK, "high").effort == "low"


def test_decide_spend_clamps_to_what_is_left_of_the_iteration_budget() -> None:
    used = tuple(Attempt(float(n)) for n in range(6))
    spend = decide_spend(item(history=used), StaticRouter("m", "high"), PACK)
    assert (spend.effort, spend.iterations, spend.clamped_by) == ("high", 2, ("iteration_budget",))
    spent = tuple(Attempt(float(n)) for n in range(9))
    assert decide_spend(item(history=spent), StaticRouter("m", "low"), PACK).iterations == 0


def test_transient_failures_do_not_use_the_iteration_budget() -> None:
    history = (*(Attempt(float(n)) for n in range(6)), T, T, T)
    assert decide_spend(item(history=history), StaticRouter("m", "low"), PACK).iterations == 1


def test_decide_spend_names_an_unknown_effort() -> None:
    with pytest.raises(UnknownEffortError, match=r"'extreme'.*\['low', 'medium', 'high'\]") as info:
        decide_spend(item(), StaticRouter("m", "extreme"), PACK)
    assert info.value.effort == "extreme"
    with pytest.raises(UnknownEffortError, match="the ceiling names effort 'max'"):
        decide_spend(item(), StaticRouter("m", "high"), PACK, effort_ceiling="max")


def test_decide_spend_rejects_a_router_that_returns_no_pick() -> None:
    class Bad:
        def recommend(self, item: Item) -> RouterPick:
            return ("m", "low")  # type: ignore[return-value]

    with pytest.raises(SeamError, match="RouterPick"):
        decide_spend(item(), Bad(), PACK)


# 3. has_converged


@pytest.mark.parametrize(
    ("history", "converged"),
    [
        ((), False),
        ((Attempt(1.0), Attempt(1.0)), False),
        ((Attempt(1.0), Attempt(1.0), Attempt(1.0)), True),
        ((Attempt(0.2), Attempt(1.0), Attempt(1.0), Attempt(1.0)), True),
        ((Attempt(1.0), Attempt(0.9), Attempt(1.0)), False),
        ((Attempt(1.0), Attempt(1.0), Attempt()), False),
    ],
)
def test_has_converged_needs_the_window_to_agree(
    history: tuple[Attempt, ...], converged: bool
) -> None:
    assert has_converged(item(history=history), PACK).converged is converged


def test_tolerance_widens_agreement() -> None:
    pack = ReferencePack(policy(convergence=ConvergencePolicy(window=2, tolerance=0.15)))
    assert has_converged(item(history=(Attempt(1.0), Attempt(0.9))), pack).converged
    assert not has_converged(item(history=(Attempt(1.0), Attempt(0.8))), pack).converged


def test_a_transient_failure_is_never_read_as_progress() -> None:
    # A detector that read the failure as a change would call this unsettled.
    report = has_converged(item(history=(Attempt(1.0), Attempt(1.0), T, Attempt(1.0))), PACK)
    assert report.converged
    assert (report.counted, report.transient_excluded, report.retries_exhausted) == (3, 1, False)


def test_a_transient_failure_is_never_read_as_agreement() -> None:
    # A detector that read "no new score" as "no change" would call this settled.
    report = has_converged(item(history=(Attempt(1.0), T, T)), PACK)
    assert not report.converged
    assert (report.counted, report.transient_excluded) == (1, 2)


def test_transient_failures_past_the_retry_bound_count_as_failures() -> None:
    pack = ReferencePack(policy(convergence=ConvergencePolicy(max_transient_retries=1)))
    settled = (Attempt(1.0), Attempt(1.0), Attempt(1.0))
    assert has_converged(item(history=(*settled[:2], T, settled[2])), pack).converged
    report = has_converged(item(history=(*settled, T, T)), pack)
    assert not report.converged
    assert report.retries_exhausted and report.transient_excluded == 1


# 4. route_judgment


def test_route_judgment_leaves_items_at_or_above_the_threshold_to_the_model() -> None:
    assert route_judgment(item(confidence=0.8), PACK).model_handles
    assert route_judgment(item(confidence=1.0), PACK).model_handles
    judged = route_judgment(item(confidence=0.79), PACK)
    assert not judged.model_handles
    assert (judged.confidence, judged.threshold) == (0.79, 0.8)


# 5. validate_and_ask


def test_validate_and_ask_returns_the_pack_ask() -> None:
    built = validate_and_ask(item(confidence=0.25), PACK, SPEND)
    assert isinstance(built, Ask)
    assert built.confidence == 0.75
    assert built.recommendation is not None
    assert built.recommendation.label == "Investigate by hand"
    assert 2 <= len(built.options) <= 4


@pytest.mark.parametrize(
    ("bad", "defect"),
    [
        (ask(options=1), "offers 1 options"),
        (ask(options=5), "offers 5 options"),
        (ask(starred=()), "stars 0 recommendations"),
        (ask(starred=(0, 1)), "stars 2 recommendations"),
        (ask(question="  "), "question is empty"),
        (ask(item_id="other"), "about item 'other'"),
        (ask(confidence=math.nan), "confidence must be a finite number"),
        (ask(confidence=1.5), "confidence must be a finite number"),
        (Ask("i", "Q", (AskOption("a", recommended=True), AskOption("a")), 0.5), "labels repeat"),
        (Ask("i", "Q", (AskOption(" ", recommended=True), AskOption("b")), 0.5), "empty label"),
        ("not an ask", "not a buddhi.Ask"),
    ],
)
def test_a_malformed_ask_is_an_invalid_ask_not_an_exception(bad: object, defect: str) -> None:
    class Builds(ReferencePack):
        def build_ask(self, item: Item, spend: Spend) -> Ask:
            return bad  # type: ignore[return-value]

    result = validate_and_ask(item(), Builds(), SPEND)
    assert isinstance(result, InvalidAsk)
    assert any(defect in sentence for sentence in result.defects), result.defects


def test_two_and_four_options_are_both_fine() -> None:
    class Builds(ReferencePack):
        def __init__(self, options: int) -> None:
            super().__init__()
            self.count = options

        def build_ask(self, item: Item, spend: Spend) -> Ask:
            return ask(options=self.count)

    assert isinstance(validate_and_ask(item(), Builds(2), SPEND), Ask)
    assert isinstance(validate_and_ask(item(), Builds(4), SPEND), Ask)


# 6. check_oob_resolution


def test_a_blind_substrate_is_never_asked_about_an_item() -> None:
    class Blind(BlindOOBSource):
        def resolved_out_of_band(self, item: Item) -> Resolution | None:
            raise AssertionError("a blind substrate must not be asked")

    assert check_oob_resolution(item(), Blind()) is None


def test_an_observing_substrate_reports_recorded_resolutions() -> None:
    oob = RecordedResolutions()
    assert check_oob_resolution(item(), oob) is None
    oob.record(Resolution("i", "ops", "patched"))
    assert check_oob_resolution(item(), oob) == Resolution("i", "ops", "patched")


def test_an_oob_source_returning_garbage_is_a_seam_error() -> None:
    class Bad(RecordedResolutions):
        def resolved_out_of_band(self, item: Item) -> Resolution | None:
            return "yes"  # type: ignore[return-value]

    with pytest.raises(SeamError, match="Resolution or None"):
        check_oob_resolution(item(), Bad())


# 7. aggregate_budget


def test_aggregate_budget_admits_and_delivers(seams: Seams) -> None:
    the_ask = ask()
    verdict = aggregate_budget(item(), the_ask, seams.store, seams.transport, PACK.bar, ("global",))
    assert isinstance(verdict, Admission)
    assert (verdict.spent, verdict.ceiling, verdict.required) == (1, 10, 0.5)
    assert isinstance(seams.transport, CollectingTransport)
    assert seams.transport.asks == (the_ask,)


def test_aggregate_budget_refuses_without_delivering(make_seams: Callable[..., Seams]) -> None:
    seams = make_seams(ceiling=0)
    verdict = aggregate_budget(item(), ask(), seams.store, seams.transport, PACK.bar, ("global",))
    assert isinstance(verdict, BudgetExhausted)
    assert verdict.limit == "ceiling"
    assert seams.transport.asks == ()  # type: ignore[attr-defined]


def test_aggregate_budget_refuses_below_the_bar(seams: Seams) -> None:
    verdict = aggregate_budget(
        item(), ask(confidence=0.4), seams.store, seams.transport, PACK.bar, ("global",)
    )
    assert isinstance(verdict, BudgetExhausted)
    assert (verdict.limit, verdict.required, verdict.confidence) == ("bar", 0.5, 0.4)
    assert seams.store.counter(("global",)).spent == 0


def test_aggregate_budget_refuses_an_excluded_source(seams: Seams) -> None:
    seams.store.exclude("s", DEFAULT_CAUSES[2])
    verdict = aggregate_budget(item(), ask(), seams.store, seams.transport, PACK.bar, ("global",))
    assert isinstance(verdict, SourceExcluded)
    assert "rate_limited" in str(verdict)


def test_a_failed_delivery_raises_and_the_interrupt_stays_spent(seams: Seams) -> None:
    seams.transport.close()
    with pytest.raises(DeliveryError, match="stays spent"):
        aggregate_budget(item(), ask(), seams.store, seams.transport, PACK.bar, ("global",))
    assert seams.store.counter(("global",)).spent == 1

"""evaluate_item: the order of the seven decisions, every disposition, and bad input."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from buddhi_support import Log, RecordingPack, policy, snapshot

from buddhi import (
    Ask,
    AskOption,
    Attempt,
    BudgetExhausted,
    Context,
    Decision,
    Disposition,
    Item,
    Outcome,
    Resolution,
    Seams,
    Spend,
    closure,
    evaluate_item,
)
from buddhi.errors import (
    ItemTypeError,
    PolicyError,
    SeamError,
    UnknownEffortError,
    UnknownScopeError,
)
from buddhi.reference import (
    BlindOOBSource,
    CollectingTransport,
    MemoryStore,
    RecordedResolutions,
    ReferencePack,
    StaticRouter,
)

SETTLED = (Attempt(0.5), Attempt(0.5), Attempt(0.5))

# Which decision reads each seam member: the log of members maps to decisions.
STEP = {
    "worth_acting": 1,
    "recommend": 2,
    "efforts": 2,
    "iteration_budget": 2,
    "convergence": 3,
    "confidence_threshold": 4,
    "build_ask": 5,
    "can_observe_oob": 6,
    "resolved_out_of_band": 6,
    "bar": 7,
    "admit": 7,
    "deliver": 7,
}


def malformed(item: Item, spend: Spend) -> Ask:
    return Ask(item.id, "Which?", (AskOption("only", recommended=True),), 0.9)


CASES: list[tuple[Disposition, dict[str, Any], dict[str, Any]]] = [
    (Disposition.DISCARDED, {"source": "noise"}, {}),
    (Disposition.CONVERGED, {"history": SETTLED}, {}),
    (Disposition.MODEL_HANDLED, {"confidence": 0.9}, {}),
    (Disposition.INVALID_ASK, {}, {"build": malformed}),
    (Disposition.RESOLVED_OOB, {}, {"resolved": True}),
    (Disposition.ESCALATED, {}, {}),
    (Disposition.DENIED, {}, {"ceiling": 0}),
]


@pytest.mark.parametrize(("disposition", "fields", "setup"), CASES, ids=lambda c: str(c))
def test_the_seven_decisions_run_in_order_and_stop_at_the_first_ending(
    recording: Callable[..., tuple[Seams, Log]],
    disposition: Disposition,
    fields: dict[str, Any],
    setup: dict[str, Any],
) -> None:
    inner = ReferencePack(policy(discard_sources=frozenset({"noise"})))
    seams, log = recording(inner=inner, **setup)
    outcome = evaluate_item(Item("i", **{"source": "s", **fields}), seams)
    assert outcome.disposition is disposition
    steps = [STEP[name] for name in log.calls]
    assert steps == sorted(steps), log.calls
    ended = list(Decision).index(outcome.decided_by) + 1
    assert sorted(set(steps)) == list(range(1, ended + 1)), log.calls
    assert outcome.trail == tuple(Decision)[:ended]


def test_the_full_call_sequence_of_an_escalation(
    recording: Callable[..., tuple[Seams, Log]],
) -> None:
    seams, log = recording()
    evaluate_item(Item("i", "s"), seams)
    assert log.calls == [
        "worth_acting",
        "recommend",
        "efforts",
        "iteration_budget",
        "convergence",
        "confidence_threshold",
        "build_ask",
        "can_observe_oob",
        "resolved_out_of_band",
        "bar",
        "admit",
        "deliver",
    ]


def test_each_disposition_says_which_decision_ended_it_and_why(
    make_seams: Callable[..., Seams],
) -> None:
    seams = make_seams(ceiling=1, discard_sources=frozenset({"noise"}))
    oob = RecordedResolutions()
    oob.record(Resolution("oob", "ops", "fixed by hand"))
    seams = Seams(seams.policy, seams.router, seams.store, seams.transport, oob)
    expected = {
        "noise": (Disposition.DISCARDED, Decision.WORTH_ACTING, "not worth acting"),
        "settled": (Disposition.CONVERGED, Decision.HAS_CONVERGED, "last 3 counted"),
        "sure": (Disposition.MODEL_HANDLED, Decision.ROUTE_JUDGMENT, "reaches the threshold"),
        "oob": (Disposition.RESOLVED_OOB, Decision.CHECK_OOB_RESOLUTION, "ops: fixed by hand"),
        "first": (Disposition.ESCALATED, Decision.AGGREGATE_BUDGET, "1 of 1 spent"),
        "second": (Disposition.DENIED, Decision.AGGREGATE_BUDGET, "spent 1 of 1"),
    }
    items = {
        "noise": Item("noise", "noise"),
        "settled": Item("settled", "s", history=SETTLED),
        "sure": Item("sure", "s", confidence=0.95),
        "oob": Item("oob", "s"),
        "first": Item("first", "s"),
        "second": Item("second", "s"),
    }
    for key, (disposition, decision, words) in expected.items():
        outcome = evaluate_item(items[key], seams)
        assert (outcome.disposition, outcome.decided_by) == (disposition, decision)
        assert words in outcome.reason, outcome.reason


def test_an_outcome_carries_the_earlier_annotations(seams: Seams) -> None:
    outcome = evaluate_item(Item("i", "s", confidence=0.3), seams)
    assert outcome.disposition is Disposition.ESCALATED
    assert outcome.spend is not None and outcome.spend.effort == "medium"
    assert outcome.convergence is not None and not outcome.convergence.converged
    assert outcome.route is not None and outcome.route.threshold == 0.8
    assert outcome.ask is not None and outcome.ask.confidence == pytest.approx(0.7)
    assert outcome.admission is not None and outcome.admission.scope == ("global",)
    assert outcome.refusal is None and outcome.resolution is None and outcome.defects == ()
    discarded = evaluate_item(
        Item("n", "noise"),
        Seams(
            ReferencePack(policy(discard_sources=frozenset({"noise"}))),
            StaticRouter(),
            seams.store,
            seams.transport,
            BlindOOBSource(),
        ),
    )
    assert (discarded.spend, discarded.convergence, discarded.route, discarded.ask) == (None,) * 4


def test_a_denied_outcome_carries_the_typed_refusal(make_seams: Callable[..., Seams]) -> None:
    outcome = evaluate_item(Item("i", "s"), make_seams(ceiling=0))
    assert isinstance(outcome.refusal, BudgetExhausted)
    assert (outcome.refusal.scope, outcome.refusal.spent, outcome.refusal.ceiling) == (
        ("global",),
        0,
        0,
    )
    assert outcome.refusal.limit == "ceiling"


def test_an_invalid_ask_lists_its_defects_and_spends_nothing(
    recording: Callable[..., tuple[Seams, Log]],
) -> None:
    seams, log = recording(build=malformed)
    before = snapshot(seams.store)
    outcome = evaluate_item(Item("i", "s"), seams)
    assert outcome.disposition is Disposition.INVALID_ASK
    assert outcome.defects == ("it offers 1 options; offer 2 to 4",)
    assert "malformed" in outcome.reason
    assert snapshot(seams.store) == before
    assert "deliver" not in log.calls


def test_the_stream_effort_ceiling_reaches_decide_spend(seams: Seams) -> None:
    outcome = evaluate_item(Item("i", "s", confidence=0.9), seams, Context(effort_ceiling="low"))
    assert outcome.spend is not None
    assert (outcome.spend.effort, outcome.spend.clamped_by) == ("low", ("effort_ceiling",))


# Bad input: a clear error, and no counter moves.


@pytest.mark.parametrize("bad", [{"id": "i", "source": "s"}, "item", None, 42])
def test_an_item_of_the_wrong_type_is_refused(seams: Seams, bad: object) -> None:
    before = snapshot(seams.store)
    with pytest.raises(ItemTypeError, match=r"takes a buddhi\.Item.*condition"):
        evaluate_item(bad, seams)  # type: ignore[arg-type]
    assert snapshot(seams.store) == before


def test_a_router_pick_naming_an_unknown_effort_is_refused(seams: Seams) -> None:
    seams = Seams(seams.policy, StaticRouter("m", "turbo"), seams.store, seams.transport, seams.oob)
    before = snapshot(seams.store)
    with pytest.raises(UnknownEffortError, match="'turbo'"):
        evaluate_item(Item("i", "s"), seams)
    assert snapshot(seams.store) == before
    assert seams.transport.asks == ()  # type: ignore[attr-defined]


def test_an_unopened_scope_is_named(seams: Seams) -> None:
    with pytest.raises(UnknownScopeError, match="'elsewhere' was never opened"):
        evaluate_item(Item("i", "s"), seams, Context(scope=("elsewhere",)))


class NoThreshold:
    """A pack that forgot its confidence threshold."""

    efforts = ReferencePack().efforts
    iteration_budget = 3
    convergence = ReferencePack().convergence
    bar = ReferencePack().bar
    exclusion_causes: ClassVar[dict[str, Any]] = {}

    def detect_trigger(self, item: Item) -> None:
        return None

    def worth_acting(self, item: Item) -> bool:
        return True

    def build_ask(self, item: Item, spend: Spend) -> Ask:
        raise NotImplementedError


def test_a_pack_missing_a_threshold_is_refused_when_the_seams_are_built() -> None:
    with pytest.raises(PolicyError, match=r"lacks \['confidence_threshold'\]"):
        Seams(NoThreshold(), StaticRouter(), MemoryStore(), CollectingTransport(), BlindOOBSource())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("confidence_threshold", 1.5, "confidence_threshold must be a number in"),
        ("confidence_threshold", float("nan"), "confidence_threshold must be a number in"),
        ("iteration_budget", -1, "iteration_budget must be a whole number"),
        ("efforts", {"low": 1}, "efforts must be a buddhi.EffortScale"),
        ("bar", 0.5, "bar must be callable"),
    ],
)
def test_a_pack_with_a_bad_value_is_refused(attribute: str, value: object, message: str) -> None:
    pack = RecordingPack(Log())

    class Bad(type(pack)):  # type: ignore[misc]
        pass

    setattr(Bad, attribute, value)
    with pytest.raises(PolicyError, match=message):
        Seams(Bad(Log()), StaticRouter(), MemoryStore(), CollectingTransport(), BlindOOBSource())


def test_seams_missing_a_method_are_refused() -> None:
    store, transport = MemoryStore(), CollectingTransport()
    with pytest.raises(SeamError, match=r"Router .* lacks \['recommend'\]"):
        Seams(ReferencePack(), object(), store, transport, BlindOOBSource())  # type: ignore[arg-type]

    class AsksOnly:  # resolved_out_of_band alone is not the seam: can_observe_oob is
        def resolved_out_of_band(self, item: Item) -> Resolution | None:
            return None

    with pytest.raises(SeamError, match=r"OOBSource .* lacks \['can_observe_oob'\]"):
        Seams(ReferencePack(), StaticRouter(), store, transport, AsksOnly())  # type: ignore[arg-type]
    with pytest.raises(SeamError, match=r"must subclass buddhi\.Store"):
        Seams(ReferencePack(), StaticRouter(), object(), transport, BlindOOBSource())  # type: ignore[arg-type]
    with pytest.raises(SeamError, match=r"must subclass buddhi\.EscalationTransport"):
        Seams(ReferencePack(), StaticRouter(), store, [], BlindOOBSource())  # type: ignore[arg-type]


# The trail is recorded as the decisions run.

DECISION_NAMES = [decision.value for decision in Decision]


@pytest.mark.parametrize(("disposition", "fields", "setup"), CASES, ids=lambda c: str(c))
def test_the_trail_is_the_decisions_that_actually_ran_in_the_order_they_ran(
    recording: Callable[..., tuple[Seams, Log]],
    monkeypatch: pytest.MonkeyPatch,
    disposition: Disposition,
    fields: dict[str, Any],
    setup: dict[str, Any],
) -> None:
    ran: list[Decision] = []
    for name in DECISION_NAMES:
        real = getattr(closure, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> Any:
            ran.append(Decision(_name))
            return _real(*args)

        monkeypatch.setattr(closure, name, spy)
    inner = ReferencePack(policy(discard_sources=frozenset({"noise"})))
    seams, _ = recording(inner=inner, **setup)
    outcome = evaluate_item(Item("i", **{"source": "s", **fields}), seams)
    assert outcome.disposition is disposition
    assert outcome.trail == tuple(ran)


def test_the_trail_is_recorded_not_derived_from_the_ending_decision(seams: Seams) -> None:
    outcome = evaluate_item(Item("i", "s", confidence=0.0), seams)
    assert outcome.trail == tuple(Decision)
    # Relabelling the ending does not rewrite the record of what ran ...
    relabelled = dataclasses.replace(outcome, decided_by=Decision.WORTH_ACTING)
    assert relabelled.trail == tuple(Decision)
    # ... and an outcome built by hand, which no decision produced, records none.
    by_hand = Outcome(Item("h", "s"), Disposition.ESCALATED, Decision.AGGREGATE_BUDGET)
    assert by_hand.trail == ()


# The OOBSource seam is can_observe_oob() -> bool; resolved_out_of_band is optional.


class SeesOnlyWhether:
    """The seed's OOBSource: ``can_observe_oob`` and nothing else."""

    def __init__(self, observes: bool) -> None:
        self.observes = observes

    def can_observe_oob(self) -> bool:
        return self.observes


def test_a_source_with_only_can_observe_oob_fits_the_seam(seams: Seams) -> None:
    blind = Seams(seams.policy, seams.router, seams.store, seams.transport, SeesOnlyWhether(False))
    outcome = evaluate_item(Item("i", "s"), blind)
    assert outcome.disposition is Disposition.ESCALATED
    assert Decision.CHECK_OOB_RESOLUTION in outcome.trail


def test_a_source_that_observes_but_cannot_be_asked_is_a_clear_seam_error(
    seams: Seams,
) -> None:
    sees = SeesOnlyWhether(True)
    bundle = Seams(seams.policy, seams.router, seams.store, seams.transport, sees)
    before = snapshot(seams.store)
    with pytest.raises(SeamError) as raised:
        evaluate_item(Item("i", "s"), bundle)
    assert "can_observe_oob() returned True" in str(raised.value)
    assert "resolved_out_of_band(item)" in str(raised.value)
    assert "return False from can_observe_oob" in str(raised.value)
    assert snapshot(seams.store) == before  # refused before the budget was asked
    assert seams.transport.asks == ()  # type: ignore[attr-defined]

"""Every kind of bad input: a clear error naming what to fix (INVALID_ASK for asks), and no
counter, exclusion or delivery moves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from buddhi_support import policy, snapshot

from buddhi import (
    AdmissionRequest,
    Ask,
    AskOption,
    BudgetTree,
    Disposition,
    GraduatedBar,
    Item,
    Scope,
    ScopeSpec,
    Seams,
    Spend,
    Stream,
    condition,
    evaluate_item,
    supervise_stream_of_streams,
)
from buddhi.errors import BuddhiError
from buddhi.reference import (
    BlindOOBSource,
    CollectingTransport,
    Policy,
    ReferencePack,
    StaticRouter,
    build_seams,
)


@dataclass
class World:
    seams: Seams

    def state(self) -> tuple[object, ...]:
        transport = self.seams.transport
        assert isinstance(transport, CollectingTransport)
        return snapshot(self.seams.store), self.seams.store.exclusions("s"), transport.asks


@pytest.fixture
def world() -> World:
    """Seams whose pool already spent one interrupt, so 'unchanged' is not 'zero'."""
    seams = build_seams(ceiling=5)
    assert evaluate_item(Item("warm-up", "s"), seams).disposition is Disposition.ESCALATED
    return World(seams)


def with_pack(seams: Seams, pack: object) -> Callable[[], object]:
    return lambda: Seams(pack, seams.router, seams.store, seams.transport, seams.oob)  # type: ignore[arg-type]


def ask_with(options: int, starred: tuple[int, ...]) -> Callable[[Item, Spend], Ask]:
    def build(item: Item, spend: Spend) -> Ask:
        opts = tuple(AskOption(f"o{n}", recommended=n in starred) for n in range(options))
        return Ask(item.id, "Which?", opts, 0.9)

    return build


def bad_calls(seams: Seams) -> dict[str, tuple[Callable[[], object], str]]:
    missing_phrasing = {"confidence_threshold": 0.8, "options": ("a", "b"), "recommended": "a"}
    return {
        "raw input Stage 0 cannot type": (
            lambda: condition([{"id": "ok", "source": "s"}, {"payload": 1}]),
            r"raw input #1 lacks \['id', 'source'\]",
        ),
        "an item of the wrong type": (
            lambda: evaluate_item({"id": "x", "source": "s"}, seams),  # type: ignore[arg-type]
            r"takes a buddhi\.Item, got dict",
        ),
        "a pack missing a threshold": (
            lambda: Policy.from_mapping(
                {"question": "Q", "options": ("a", "b"), "recommended": "a"}
            ),
            r"missing \['confidence_threshold'\]",
        ),
        "a pack missing a phrasing": (
            lambda: Policy.from_mapping(missing_phrasing),
            r"missing \['question'\]",
        ),
        "a pack object lacking a member": (with_pack(seams, object()), "lacks"),
        "a negative budget": (lambda: BudgetTree.single_pool(-3), "got -3"),
        "a non-finite budget": (lambda: BudgetTree.single_pool(math.inf), "got inf"),  # type: ignore[arg-type]
        "a scope tree with a cycle": (
            lambda: BudgetTree.from_specs(
                [ScopeSpec("g", ceiling=3), ScopeSpec("a", "b"), ScopeSpec("b", "a")]
            ),
            "cycle",
        ),
        "a scope tree with an orphan": (
            lambda: BudgetTree.from_specs([ScopeSpec("g", ceiling=3), ScopeSpec("a", "nowhere")]),
            "'nowhere', which is not declared",
        ),
        "a scope reopened with another ceiling": (
            lambda: seams.store.open_scope(Scope(("global",), 99)),
            "cannot be reopened",
        ),
        "a Router pick naming an unknown effort": (
            lambda: evaluate_item(
                Item("x", "s"),
                Seams(
                    seams.policy,
                    StaticRouter("m", "ludicrous"),
                    seams.store,
                    seams.transport,
                    seams.oob,
                ),
            ),
            "'ludicrous'",
        ),
        "an admission with a NaN confidence": (
            lambda: seams.store.admit(
                AdmissionRequest(("global",), "x", "s", math.nan, GraduatedBar())
            ),
            r"finite number in \[0, 1\]",
        ),
        "a nested stream naming an unknown effort ceiling": (
            lambda: supervise_stream_of_streams(
                Stream(
                    "top",
                    (
                        Stream("first", (Item("x", "s"),)),
                        Stream("second", (Stream("deep", (), effort_ceiling="max"),)),
                    ),
                ),
                seams,
            ),
            "stream 'deep'.s effort ceiling names effort 'max'",
        ),
        "a stream of streams holding an item": (
            lambda: supervise_stream_of_streams(Stream("top", (Item("x", "s"),)), seams),
            "holds item 'x'",
        ),
    }


CASES = list(bad_calls(build_seams()))


@pytest.mark.parametrize("case", CASES)
def test_bad_input_raises_a_clear_error_and_moves_nothing(world: World, case: str) -> None:
    call, message = bad_calls(world.seams)[case]
    before = world.state()
    with pytest.raises(BuddhiError, match=message):
        call()
    assert world.state() == before


@pytest.mark.parametrize(
    ("options", "starred", "defect"),
    [
        (1, (0,), "offers 1 options"),
        (5, (0,), "offers 5 options"),
        (3, (), "stars 0 recommendations"),
        (3, (0, 2), "stars 2 recommendations"),
    ],
)
def test_a_malformed_ask_is_invalid_ask_and_moves_nothing(
    world: World, options: int, starred: tuple[int, ...], defect: str
) -> None:
    class Builds(ReferencePack):
        def build_ask(self, item: Item, spend: Spend) -> Ask:
            return ask_with(options, starred)(item, spend)

    seams = world.seams
    before = world.state()
    outcome = evaluate_item(
        Item("x", "s"),
        Seams(Builds(), seams.router, seams.store, seams.transport, BlindOOBSource()),
    )
    assert outcome.disposition is Disposition.INVALID_ASK
    assert any(defect in sentence for sentence in outcome.defects)
    assert world.state() == before


def test_the_reference_policy_refuses_a_bad_ask_configuration_up_front() -> None:
    with pytest.raises(BuddhiError, match="offer 2 to 4"):
        policy(options=("a", "b", "c", "d", "e"), recommended="a")

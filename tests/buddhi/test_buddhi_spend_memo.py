"""decide_spend hands back the last Spend when nothing differs: it must never answer stale.

``buddhi.decisions.decide_spend`` reuses the Spend it built last when the Router's pick
is the same object and the effort, iterations and clamps are the same (the reference
StaticRouter hands out one pick). Every answer here is held to the Spend written out by
hand, whatever came before it.
"""

from __future__ import annotations

import itertools

import pytest
from buddhi_support import policy

from buddhi import Attempt, EffortScale, Item, RouterPick, Spend
from buddhi.decisions import decide_spend
from buddhi.reference import ReferencePack, StaticRouter

MEDIUM = StaticRouter()
HIGH = StaticRouter(effort="high")
PACK = ReferencePack()
TIGHT = ReferencePack(policy(iteration_budget=2))
USED = (Attempt(0.1), Attempt(transient=True), Attempt(0.2))
WIDE = ReferencePack(
    policy(efforts=EffortScale((("low", 1), ("medium", 5), ("high", 8))), iteration_budget=3)
)
BUDGET = ("iteration_budget",)
BOTH = ("effort_ceiling", "iteration_budget")
M = MEDIUM.recommend(Item("any", "s"))
H = HIGH.recommend(Item("any", "s"))

# (router, pack, ceiling, history) -> the Spend decide_spend must return.
CASES = {
    "medium": (MEDIUM, PACK, None, (), Spend("reference", "medium", 3, M)),
    "medium, ceiling low": (
        MEDIUM,
        PACK,
        "low",
        (),
        Spend("reference", "low", 1, M, ("effort_ceiling",)),
    ),
    "medium, ceiling high": (MEDIUM, PACK, "high", (), Spend("reference", "medium", 3, M)),
    "medium, 2 used of 8": (MEDIUM, PACK, None, USED, Spend("reference", "medium", 3, M)),
    "medium, 2 used of 2": (
        MEDIUM,
        TIGHT,
        None,
        USED,
        Spend("reference", "medium", 0, M, ("iteration_budget",)),
    ),
    "high": (HIGH, PACK, None, (), Spend("reference", "high", 8, H)),
    # Only the effort differs from the next case, and only the clamps from "medium".
    "high, ceiling low, none left": (
        HIGH,
        TIGHT,
        "low",
        USED,
        Spend("reference", "low", 0, H, BOTH),
    ),
    "high, ceiling medium, none left": (
        HIGH,
        TIGHT,
        "medium",
        USED,
        Spend("reference", "medium", 0, H, BOTH),
    ),
    "medium of 5, budget 3": (MEDIUM, WIDE, None, (), Spend("reference", "medium", 3, M, BUDGET)),
    "high, ceiling medium, budget 2": (
        HIGH,
        TIGHT,
        "medium",
        (),
        Spend("reference", "medium", 2, H, ("effort_ceiling", "iteration_budget")),
    ),
}


@pytest.mark.parametrize(("before", "after"), list(itertools.product(CASES, repeat=2)))
def test_a_spend_never_depends_on_the_one_before(before: str, after: str) -> None:
    for name in (before, after, after):
        router, pack, ceiling, history, expected = CASES[name]
        spend = decide_spend(Item("i", "s", history=history), router, pack, ceiling)
        assert spend == expected
        assert spend.requested is router.recommend(Item("i", "s"))


def test_an_equal_but_new_pick_gets_its_own_spend() -> None:
    class NewPicks:
        def recommend(self, item: Item) -> RouterPick:
            return RouterPick("reference", "medium")

    first = decide_spend(Item("i", "s"), NewPicks(), PACK)
    second = decide_spend(Item("i", "s"), NewPicks(), PACK)
    assert first == second and first.requested is not second.requested

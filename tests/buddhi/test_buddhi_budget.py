"""Budget scopes: declared trees, derived ceilings, the bar, windows, and bad budgets."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from buddhi_support import snapshot

from buddhi import (
    AdmissionRequest,
    BudgetExhausted,
    BudgetTree,
    GraduatedBar,
    Scope,
    ScopeSpec,
)
from buddhi._budget import window_start
from buddhi.errors import BudgetError, ScopeConflictError, ScopeTreeError, UnknownScopeError
from buddhi.reference import MemoryStore
from buddhi.testing import FakeClock


def test_the_default_tree_is_one_global_pool() -> None:
    tree = BudgetTree.single_pool(10)
    assert tree.scopes == (Scope(("global",), 10),)
    assert tree.root.parent is None


def test_children_derive_their_ceiling_from_weight_times_the_parent() -> None:
    tree = BudgetTree.from_specs(
        [
            ScopeSpec("b1", parent="b", weight=0.5),
            ScopeSpec("org", ceiling=9),
            ScopeSpec("a", parent="org", weight=0.34),
            ScopeSpec("b", parent="org", weight=1.0, window=timedelta(hours=1)),
        ]
    )
    ceilings = {s.path: (s.ceiling, s.window) for s in tree.scopes}
    assert ceilings == {
        ("org",): (9, None),
        ("org", "a"): (3, None),
        ("org", "b"): (9, timedelta(hours=1)),
        ("org", "b", "b1"): (4, timedelta(hours=1)),
    }
    assert tree.scopes[0].path == ("org",)
    assert tree.scope("b1").parent == ("org", "b")
    with pytest.raises(ScopeTreeError, match="no scope named 'zz'"):
        tree.scope("zz")


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([ScopeSpec("r", ceiling=1), ScopeSpec("r", parent="r")], "two scopes are named 'r'"),
        ([ScopeSpec("r", ceiling=1), ScopeSpec("s", ceiling=1)], r"exactly one root.*\['r', 's'\]"),
        ([ScopeSpec("a", parent="b"), ScopeSpec("b", parent="a")], r"exactly one root.*\[\]"),
        ([ScopeSpec("r")], "root scope 'r' needs a ceiling"),
        (
            [ScopeSpec("r", ceiling=1), ScopeSpec("x", parent="ghost")],
            "parent 'ghost'.*not declared",
        ),
        (
            [ScopeSpec("r", ceiling=1), ScopeSpec("a", parent="b"), ScopeSpec("b", parent="a")],
            "cycle that never reaches the root: a -> b -> a",
        ),
        (
            [ScopeSpec("r", ceiling=1), ScopeSpec("a", parent="a")],
            "cycle that never reaches the root: a -> a",
        ),
        ([ScopeSpec("r", ceiling=4), ScopeSpec("c", parent="r", ceiling=2)], "give it a weight"),
        (["r"], "built from ScopeSpec values"),
    ],
)
def test_a_bad_tree_is_refused_with_what_to_fix(specs: list[ScopeSpec], message: str) -> None:
    with pytest.raises(ScopeTreeError, match=message):
        BudgetTree.from_specs(specs)


@pytest.mark.parametrize("ceiling", [-1, math.inf, -math.inf, math.nan, 2.5, True, "10"])
def test_a_negative_or_non_finite_budget_is_refused(ceiling: object) -> None:
    with pytest.raises(BudgetError, match="finite, non-negative whole number"):
        BudgetTree.single_pool(ceiling)  # type: ignore[arg-type]
    with pytest.raises(BudgetError, match="finite, non-negative whole number"):
        BudgetTree.from_specs([ScopeSpec("r", ceiling=ceiling)])  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [-0.1, 1.01, math.nan, math.inf])
def test_a_bad_weight_is_refused(weight: float) -> None:
    with pytest.raises(BudgetError, match=r"weight must be a number in \[0, 1\]"):
        BudgetTree.from_specs([ScopeSpec("r", ceiling=3), ScopeSpec("c", "r", weight=weight)])
    with pytest.raises(BudgetError, match="weight"):
        Scope(("r",), 3).child("c", weight)


@pytest.mark.parametrize("window", [timedelta(0), timedelta(seconds=-1), 3600])
def test_a_bad_window_is_refused(window: object) -> None:
    with pytest.raises(BudgetError, match="positive timedelta"):
        BudgetTree.single_pool(3, window)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", [(), ("",), ["a"], ("a", 3)])
def test_a_bad_scope_path_is_refused(path: object) -> None:
    with pytest.raises(BudgetError, match="scope path"):
        Scope(path, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("floor", "rise"), [(0.5, 0.5), (-0.1, 2.0), (1.1, 1.0), (0.5, math.nan)])
def test_a_bar_that_does_not_close_at_the_ceiling_is_refused(floor: float, rise: float) -> None:
    with pytest.raises(BudgetError, match="bar"):
        GraduatedBar(floor, rise)


def test_the_default_bar_rises_from_half_to_impossible() -> None:
    bar = GraduatedBar()
    assert bar(0.0) == 0.5
    assert bar(0.5) == pytest.approx(0.8)
    assert bar(1.0) > 1.0


def test_windows_align_to_the_epoch() -> None:
    now = datetime(2030, 1, 1, 10, 42, tzinfo=UTC)
    assert window_start(now, timedelta(hours=1)) == datetime(2030, 1, 1, 10, tzinfo=UTC)
    assert window_start(now, timedelta(days=1)) == datetime(2030, 1, 1, tzinfo=UTC)


def test_a_windowed_budget_refills_each_window_and_keeps_its_total() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    BudgetTree.single_pool(2, timedelta(minutes=10)).install(store)
    bar = GraduatedBar(0.0, 1.01)
    grants = []
    for _window in range(3):
        granted = 0
        for n in range(4):
            try:
                store.admit(AdmissionRequest(("global",), f"i{n}", "s", 1.0, bar))
                granted += 1
            except BudgetExhausted:
                pass
        grants.append(granted)
        clock.advance(timedelta(minutes=10))
    assert grants == [2, 2, 2]
    counter = store.counter(("global",))
    assert (counter.spent, counter.total) == (0, 6)


def test_a_scope_reopened_differently_or_before_its_parent_is_refused() -> None:
    store = MemoryStore()
    with pytest.raises(UnknownScopeError, match="its parent 'p' was never opened"):
        store.open_scope(Scope(("p", "c"), 1))
    store.open_scope(Scope(("p",), 4))
    before = snapshot(store)
    with pytest.raises(ScopeConflictError, match="cannot be reopened"):
        store.open_scope(Scope(("p",), 5))
    assert snapshot(store) == before


@pytest.mark.parametrize("confidence", [math.nan, math.inf, -0.1, 1.1, True, "0.9"])
def test_an_admission_with_a_bad_confidence_is_refused(confidence: object) -> None:
    with pytest.raises(BudgetError, match=r"finite number in \[0, 1\]"):
        AdmissionRequest(("global",), "i", "s", confidence, GraduatedBar())  # type: ignore[arg-type]


def test_a_bar_returning_nan_refuses_rather_than_admits() -> None:
    store = MemoryStore()
    BudgetTree.single_pool(5).install(store)
    with pytest.raises(BudgetExhausted, match="bar requires"):
        store.admit(AdmissionRequest(("global",), "i", "s", 1.0, lambda load: math.nan))
    assert store.counter(("global",)).spent == 0

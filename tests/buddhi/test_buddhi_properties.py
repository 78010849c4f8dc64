"""Hypothesis properties of budget scopes, the bar, and the exclusion lattice."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from buddhi import (
    Admission,
    AdmissionRequest,
    BudgetExhausted,
    BudgetTree,
    ExclusionCause,
    Exclusions,
    GraduatedBar,
    ScopeSpec,
    Tier,
)
from buddhi.errors import ExclusionError
from buddhi.reference import MemoryStore

PROPERTY = settings(max_examples=150, deadline=None)


@st.composite
def bars(draw: st.DrawFn) -> GraduatedBar:
    floor = draw(st.floats(0.0, 1.0))
    rise = draw(st.floats(1.0 - floor + 1e-6, 3.0))
    return GraduatedBar(floor, rise)


@st.composite
def trees(draw: st.DrawFn) -> BudgetTree:
    """A random tree: each scope's parent is drawn among the scopes before it (no cycles)."""
    size = draw(st.integers(1, 7))
    specs = [ScopeSpec("s0", ceiling=draw(st.integers(0, 20)))]
    for n in range(1, size):
        parent = f"s{draw(st.integers(0, n - 1))}"
        specs.append(ScopeSpec(f"s{n}", parent, weight=draw(st.floats(0.0, 1.0))))
    return BudgetTree.from_specs(specs)


requests = st.lists(st.tuples(st.integers(0, 6), st.floats(0.0, 1.0)), max_size=60)


@dataclass
class FlatPool:
    """The single pool, written independently: admit while below the ceiling and the bar."""

    ceiling: int
    bar: GraduatedBar
    spent: int = 0

    def admit(self, confidence: float) -> bool:
        load = 1.0 if self.ceiling == 0 else self.spent / self.ceiling
        if self.spent >= self.ceiling or confidence < self.bar(load):
            return False
        self.spent += 1
        return True


def run(store: MemoryStore, path: tuple[str, ...], confidence: float, bar: GraduatedBar) -> bool:
    try:
        store.admit(AdmissionRequest(path, "i", "s", confidence, bar))
    except BudgetExhausted:
        return False
    return True


@PROPERTY
@given(trees(), requests, bars())
def test_no_scope_ever_spends_past_its_ceiling_and_parents_sum_their_children(
    tree: BudgetTree, plan: list[tuple[int, float]], bar: GraduatedBar
) -> None:
    store = MemoryStore()
    tree.install(store)
    scopes = tree.scopes
    for index, confidence in plan:
        run(store, scopes[index % len(scopes)].path, confidence, bar)
        counters = {s.path: store.counter(s.path) for s in scopes}
        for path, counter in counters.items():
            assert counter.spent <= counter.scope.ceiling
            children = [c for p, c in counters.items() if p[:-1] == path and len(p) > 1]
            assert counter.total == counter.own + sum(child.total for child in children)


@PROPERTY
@given(st.integers(0, 20), st.lists(st.floats(0.0, 1.0), max_size=40), bars(), st.integers(1, 4))
def test_the_degenerate_tree_is_the_flat_pool(
    ceiling: int, confidences: list[float], bar: GraduatedBar, depth: int
) -> None:
    # The single scope, and a chain of weight-1 scopes charged at its leaf, both behave
    # exactly as one flat pool on every sequence of requests.
    single, chain = MemoryStore(), MemoryStore()
    BudgetTree.single_pool(ceiling).install(single)
    specs = [ScopeSpec("c0", ceiling=ceiling)]
    specs += [ScopeSpec(f"c{n}", f"c{n - 1}", weight=1.0) for n in range(1, depth)]
    tree = BudgetTree.from_specs(specs)
    tree.install(chain)
    pool = FlatPool(ceiling, bar)
    for confidence in confidences:
        expected = pool.admit(confidence)
        assert run(single, ("global",), confidence, bar) is expected
        assert run(chain, tree.scopes[-1].path, confidence, bar) is expected
    assert single.counter(("global",)).spent == pool.spent


@PROPERTY
@given(bars(), st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_the_bar_is_monotone_and_impossible_at_the_ceiling(
    bar: GraduatedBar, loads: list[float]
) -> None:
    ordered = sorted(loads)
    required = [bar(load) for load in ordered]
    assert required == sorted(required)
    assert bar(1.0) > 1.0


@PROPERTY
@given(st.integers(1, 30), bars(), st.lists(st.floats(0.0, 1.0), max_size=40))
def test_the_bar_an_admission_meets_never_falls_as_spend_rises(
    ceiling: int, bar: GraduatedBar, confidences: list[float]
) -> None:
    store = MemoryStore()
    BudgetTree.single_pool(ceiling).install(store)
    required = []
    for confidence in confidences:
        try:
            admission = store.admit(AdmissionRequest(("global",), "i", "s", confidence, bar))
        except BudgetExhausted as refusal:
            required.append(refusal.required)
        else:
            assert isinstance(admission, Admission)
            required.append(admission.required)
    assert required == sorted(required)


causes = st.sampled_from(["a", "b", "c", "d"])
operations = st.lists(
    st.tuples(st.sampled_from(["exclude", "retract"]), causes, st.sampled_from(list(Tier))),
    max_size=40,
)


@PROPERTY
@given(operations)
def test_exclusion_tiers_never_cross(ops: list[tuple[str, str, Tier]]) -> None:
    store = MemoryStore()
    tier_of: dict[str, Tier] = {}  # the model: the tier a cause name first entered
    permanent_seen: set[str] = set()
    for op, name, tier in ops:
        before = store.exclusions("src")
        cause = ExclusionCause(name, tier)
        crossing = name in before.permanent | before.transient and tier_of[name] is not tier
        illegal = op == "retract" and (tier is Tier.PERMANENT or name in before.permanent)
        try:
            after = getattr(store, op)("src", cause)
        except ExclusionError:
            assert (op == "exclude" and crossing) or illegal
            assert store.exclusions("src") == before
            continue
        assert not (op == "exclude" and crossing) and not illegal
        if op == "exclude":
            tier_of.setdefault(name, tier)
            if tier is Tier.PERMANENT:
                permanent_seen.add(name)
        assert not after.permanent & after.transient
        assert after.permanent == permanent_seen  # permanent causes only ever accumulate
        assert after.level is (
            Tier.PERMANENT if after.permanent else Tier.TRANSIENT if after.transient else None
        )
        for held in after.transient:
            tier_of[held] = Tier.TRANSIENT
        for gone in set(tier_of) - after.permanent - after.transient:
            del tier_of[gone]
    assert isinstance(store.exclusions("src"), Exclusions)

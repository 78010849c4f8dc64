"""RA-06 budget_never_exceeded, memory-store part, with its negative control.

16 contenders released together by a barrier each request one interrupt from a budget
B drawn from [0, 16]. In every trial: granted == min(B, 16), overshoot 0, and every
refusal is a typed BudgetExhausted. The negative control runs a deliberately racy
read-then-write store through the same harness and must overshoot at least once.
PR tier: 200 trials; nightly (PYBB_NIGHTLY=1): 2,000.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from buddhi_support import policy

from buddhi import (
    Admission,
    AdmissionRequest,
    BudgetExhausted,
    BudgetTree,
    Disposition,
    ExclusionCause,
    Exclusions,
    GraduatedBar,
    Item,
    Outcome,
    Scope,
    ScopeCounter,
    ScopePath,
    ScopeSpec,
    Seams,
    Store,
    assess_admission,
    evaluate_item,
)
from buddhi.errors import AdmissionRefused
from buddhi.reference import CollectingTransport, MemoryStore, ReferencePack, build_seams
from buddhi.testing import FakeClock

NIGHTLY = os.environ.get("PYBB_NIGHTLY") == "1"
TRIALS = 2_000 if NIGHTLY else 200
CONTROL_TRIALS = 200 if NIGHTLY else 20
CONTENDERS = 16
OPEN_BAR = GraduatedBar(0.0, 1.01)  # only the ceiling refuses a confidence-1 request


class RacyStore(Store):
    """NEGATIVE CONTROL: reads the counter, sleeps, then writes it; no lock, no atomicity."""

    def __init__(self) -> None:
        self.counters: dict[ScopePath, ScopeCounter] = {}

    def open_scope(self, scope: Scope) -> None:
        self.counters.setdefault(scope.path, ScopeCounter(scope))

    def admit(self, request: AdmissionRequest) -> Admission:
        counter = self.counters[request.scope]  # read ...
        verdict = assess_admission(request, [counter], Exclusions(request.source))
        if isinstance(verdict, AdmissionRefused):
            raise verdict
        time.sleep(0.001)  # ... widen the window ...
        self.counters[request.scope] = counter.charged(own=True)  # ... then write
        return verdict

    def counter(self, path: ScopePath) -> ScopeCounter:
        return self.counters[path]

    def scopes(self) -> tuple[Scope, ...]:
        return tuple(counter.scope for counter in self.counters.values())

    def exclude(self, source: str, cause: ExclusionCause) -> Exclusions:
        raise NotImplementedError

    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        raise NotImplementedError

    def exclusions(self, source: str) -> Exclusions:
        return Exclusions(source)


@dataclass
class Trial:
    budget: int
    granted: int = 0
    spent: int = 0
    refusals: list[BaseException] = field(default_factory=list)

    @property
    def overshoot(self) -> int:
        return max(0, self.granted - self.budget, self.spent - self.budget)


def contend(store: Store, path: ScopePath, trial: Trial) -> Trial:
    """Release CONTENDERS threads at once through a barrier, each asking one interrupt."""
    barrier = threading.Barrier(CONTENDERS)
    lock = threading.Lock()

    def contender(index: int) -> None:
        request = AdmissionRequest(path, f"c{index}", "src", 1.0, OPEN_BAR)
        barrier.wait()
        try:
            store.admit(request)
        except BaseException as exc:  # every outcome is tallied, and judged below
            with lock:
                trial.refusals.append(exc)
        else:
            with lock:
                trial.granted += 1

    threads = [threading.Thread(target=contender, args=(n,)) for n in range(CONTENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trial.spent = store.counter(path).spent
    return trial


def run_trials(make_store: Callable[[], Store], trials: int, seed: int) -> list[Trial]:
    rng = random.Random(seed)
    results = []
    for _ in range(trials):
        budget = rng.randint(0, CONTENDERS)
        store = make_store()
        BudgetTree.single_pool(budget).install(store)
        results.append(contend(store, ("global",), Trial(budget)))
    return results


def test_ra06_sixteen_contenders_never_overshoot_the_memory_store() -> None:
    results = run_trials(MemoryStore, TRIALS, seed=6)
    assert len(results) == TRIALS
    for trial in results:
        assert trial.granted == min(trial.budget, CONTENDERS), trial
        assert trial.spent == trial.granted and trial.overshoot == 0, trial
        assert all(type(exc) is BudgetExhausted for exc in trial.refusals), trial.refusals
        assert len(trial.refusals) == CONTENDERS - trial.granted


def test_ra06_negative_control_a_racy_store_overshoots() -> None:
    results = run_trials(RacyStore, CONTROL_TRIALS, seed=6)
    overshooting = [trial for trial in results if trial.overshoot > 0]
    assert len(overshooting) >= 1, "the harness failed to catch a read-then-write store"


def test_ra06_windowed_budgets_with_a_fake_clock() -> None:
    rng = random.Random(60)
    clock = FakeClock()
    store = MemoryStore(clock)
    hour = timedelta(hours=1)
    budget = rng.randint(1, CONTENDERS - 1)
    BudgetTree.single_pool(budget, hour).install(store)
    total = 0
    for _window in range(20):
        trial = contend(store, ("global",), Trial(budget))
        assert trial.granted == budget and trial.overshoot == 0, trial
        assert all(type(exc) is BudgetExhausted for exc in trial.refusals)
        total += trial.granted
        clock.advance(hour)
    assert store.counter(("global",)).total == total == 20 * budget


def test_ra06_contenders_racing_a_window_boundary_never_overshoot_either_window() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    hour = timedelta(hours=1)
    BudgetTree.single_pool(5, hour).install(store)

    def tick() -> None:
        time.sleep(0.0005)
        clock.advance(hour)

    for _ in range(20):
        ticker = threading.Thread(target=tick)
        ticker.start()
        trial = contend(store, ("global",), Trial(5))
        ticker.join()
        assert trial.granted <= 10 and store.counter(("global",)).spent <= 5, trial
        clock.advance(hour)


def test_sixteen_threads_escalating_at_once_never_overspend() -> None:
    rng = random.Random(16)
    for _ in range(30):
        budget = rng.randint(0, CONTENDERS)
        seams = build_seams(ceiling=budget, policy=ReferencePack(policy(bar=OPEN_BAR)))
        outcomes = escalate_together(seams)
        escalated = [o for o in outcomes if o.disposition is Disposition.ESCALATED]
        denied = [o for o in outcomes if o.disposition is Disposition.DENIED]
        assert len(escalated) == min(budget, CONTENDERS)
        assert len(denied) == CONTENDERS - len(escalated)
        assert all(isinstance(o.refusal, BudgetExhausted) for o in denied)
        assert isinstance(seams.transport, CollectingTransport)
        assert len(seams.transport.asks) == len(escalated)
        assert seams.store.counter(("global",)).spent == len(escalated)


def escalate_together(seams: Seams) -> list[Outcome]:
    barrier = threading.Barrier(CONTENDERS)
    outcomes: list[Outcome | None] = [None] * CONTENDERS

    def contender(index: int) -> None:
        item = Item(f"i{index}", "s", confidence=0.0)
        barrier.wait()
        outcomes[index] = evaluate_item(item, seams)

    threads = [threading.Thread(target=contender, args=(n,)) for n in range(CONTENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = [o for o in outcomes if o is not None]
    assert len(finished) == CONTENDERS, "a contender raised"
    return finished


def test_sixteen_threads_over_a_tree_keep_every_invariant() -> None:
    rng = random.Random(61)
    for _ in range(30):
        tree = BudgetTree.from_specs(
            [
                ScopeSpec("root", ceiling=rng.randint(0, 12)),
                ScopeSpec("a", "root", weight=rng.random()),
                ScopeSpec("b", "root", weight=rng.random()),
                ScopeSpec("a1", "a", weight=rng.random()),
            ]
        )
        store = MemoryStore()
        tree.install(store)
        paths = [rng.choice(tree.scopes).path for _ in range(CONTENDERS)]
        barrier = threading.Barrier(CONTENDERS)

        def contender(path: ScopePath, store: Store, barrier: threading.Barrier) -> None:
            barrier.wait()
            with contextlib.suppress(BudgetExhausted):
                store.admit(AdmissionRequest(path, "i", "s", 1.0, OPEN_BAR))

        threads = [threading.Thread(target=contender, args=(p, store, barrier)) for p in paths]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        counters = {s.path: store.counter(s.path) for s in tree.scopes}
        for path, counter in counters.items():
            assert counter.spent <= counter.scope.ceiling
            kids = [c.total for p, c in counters.items() if p[:-1] == path and len(p) > 1]
            assert counter.total == counter.own + sum(kids)

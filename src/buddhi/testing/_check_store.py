"""The Store conformance check a user's own (durable) store can run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

from buddhi._budget import BudgetTree, GraduatedBar, Scope, ScopePath, ScopeSpec
from buddhi._store import AdmissionRequest, Clock, ExclusionCause, ScopeCounter, Store, Tier
from buddhi.errors import (
    BudgetExhausted,
    ExclusionError,
    ScopeConflictError,
    SourceExcluded,
    UnknownScopeError,
)
from buddhi.testing._clock import FakeClock

__all__ = ["CONTENDERS", "StoreFactory", "check_store"]

StoreFactory = Callable[[Clock], Store]
"""Builds a fresh, empty store that reads time from the given clock."""

CONTENDERS = 16
"""How many threads the concurrency check releases at once."""

OPEN_BAR = GraduatedBar(0.0, 1.01)
"""A bar any confident ask clears below the ceiling, so only ceilings refuse."""

_PERMANENT = ExclusionCause("revoked", Tier.PERMANENT)
_TRANSIENT = ExclusionCause("muted", Tier.TRANSIENT)


def check_store(factory: StoreFactory) -> tuple[str, ...]:
    """Check that a Store keeps the contract; raise ``AssertionError`` at the first breach.

    Each check gets a fresh store from ``factory`` and closes it afterwards. The checks
    cover scopes, counters and their accrual up the path, ceilings, the graduated bar,
    the two exclusion tiers, time windows (with a fake clock), and 16 threads
    admitting at once against budgets from 0 to 16.

    Args:
        factory: Builds a fresh, empty store reading time from the clock it is given.

    Returns:
        The names of the checks, all passed.
    """
    for name, check in _CHECKS:
        clock = FakeClock()
        store = factory(clock)
        try:
            check(store, clock)
        except AssertionError as exc:
            raise AssertionError(f"check_store[{name}]: {exc}") from exc
        finally:
            store.close()
    return tuple(name for name, _ in _CHECKS)


def _request(
    path: ScopePath,
    item_id: str = "item",
    confidence: float = 1.0,
    source: str = "src",
    bar: GraduatedBar = OPEN_BAR,
) -> AdmissionRequest:
    return AdmissionRequest(path, item_id, source, confidence, bar)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _expect_raises(
    kind: type[BaseException], call: Callable[[], object], what: str
) -> BaseException:
    try:
        call()
    except kind as exc:
        return exc
    except Exception as exc:
        raise AssertionError(f"{what}: expected {kind.__name__}, got {exc!r}") from exc
    raise AssertionError(f"{what}: expected {kind.__name__}, nothing was raised")


def _snapshot(store: Store) -> dict[ScopePath, ScopeCounter]:
    return {scope.path: store.counter(scope.path) for scope in store.scopes()}


def _tree() -> BudgetTree:
    return BudgetTree.from_specs(
        [
            ScopeSpec("root", ceiling=10),
            ScopeSpec("a", parent="root", weight=0.5),
            ScopeSpec("a1", parent="a", weight=1.0),
            ScopeSpec("b", parent="root", weight=0.5),
        ]
    )


def _check_scopes(store: Store, clock: Clock) -> None:
    root = Scope(("root",), 4)
    orphan = Scope(("root", "missing", "x"), 1)
    _expect_raises(UnknownScopeError, lambda: store.open_scope(orphan), "opening an orphan")
    store.open_scope(root)
    store.open_scope(root)
    _expect_raises(ScopeConflictError, lambda: store.open_scope(Scope(("root",), 5)), "reopening")
    store.open_scope(root.child("a", 0.5))
    _expect([s.path for s in store.scopes()] == [("root",), ("root", "a")], "scopes() order")
    _expect(store.counter(("root", "a")).scope.ceiling == 2, "a derived ceiling is kept")
    _expect_raises(UnknownScopeError, lambda: store.counter(("nope",)), "counter of unknown")
    _expect_raises(UnknownScopeError, lambda: store.admit(_request(("nope",))), "admit unknown")


def _check_counters(store: Store, clock: Clock) -> None:
    _tree().install(store)
    for path in [("root", "a", "a1"), ("root", "a", "a1"), ("root", "a"), ("root",)]:
        store.admit(_request(path))
    expected = {
        ("root",): (4, 4, 1),
        ("root", "a"): (3, 3, 1),
        ("root", "a", "a1"): (2, 2, 2),
        ("root", "b"): (0, 0, 0),
    }
    for path, (spent, total, own) in expected.items():
        counter = store.counter(path)
        got = (counter.spent, counter.total, counter.own)
        _expect(
            got == (spent, total, own), f"{path}: (spent, total, own) {got} != {expected[path]}"
        )
    admission = store.admit(_request(("root", "b"), "last"))
    _expect((admission.item_id, admission.scope) == ("last", ("root", "b")), "admission fields")
    _expect((admission.spent, admission.ceiling) == (1, 5), f"admission counts {admission}")


def _check_ceilings(store: Store, clock: Clock) -> None:
    _tree().install(store)
    for _ in range(5):
        store.admit(_request(("root", "a", "a1")))
    before = _snapshot(store)
    refusal = _expect_raises(BudgetExhausted, lambda: store.admit(_request(("root", "a"))), "full")
    _expect(_snapshot(store) == before, "a refusal moved a counter")
    assert isinstance(refusal, BudgetExhausted)
    got = (refusal.limit, refusal.scope, refusal.spent, refusal.ceiling)
    _expect(got == ("ceiling", ("root", "a"), 5, 5), f"refusal fields {got}")
    for _ in range(5):
        store.admit(_request(("root", "b")))
    _expect_raises(BudgetExhausted, lambda: store.admit(_request(("root",))), "root full")
    _expect(store.counter(("root",)).spent == 10, "the root's spend is its subtree's")
    store.open_scope(Scope(("root", "zero"), 0))
    _expect_raises(BudgetExhausted, lambda: store.admit(_request(("root", "zero"))), "zero")


def _check_bar(store: Store, clock: Clock) -> None:
    store.open_scope(Scope(("root",), 10))
    bar = GraduatedBar(0.5, 0.6)
    store.admit(_request(("root",), confidence=0.55, bar=bar))
    before = _snapshot(store)
    low = _request(("root",), confidence=0.55, bar=bar)
    refusal = _expect_raises(BudgetExhausted, lambda: store.admit(low), "below the bar")
    _expect(_snapshot(store) == before, "a bar refusal moved a counter")
    assert isinstance(refusal, BudgetExhausted)
    _expect(refusal.limit == "bar" and abs(refusal.required - 0.56) < 1e-9, f"bar {refusal}")
    admission = store.admit(_request(("root",), confidence=0.9, bar=bar))
    _expect(abs(admission.required - 0.56) < 1e-9, f"admission.required {admission.required}")


def _check_lattice(store: Store, clock: Clock) -> None:
    store.open_scope(Scope(("root",), 10))
    _expect(not store.exclusions("src").excluded, "a never-excluded source is clear")
    store.exclude("src", _TRANSIENT)
    before = _snapshot(store)
    _expect_raises(SourceExcluded, lambda: store.admit(_request(("root",))), "transient")
    _expect(_snapshot(store) == before, "an exclusion refusal moved a counter")
    store.exclude("src", _PERMANENT)
    crossing = ExclusionCause(_PERMANENT.name, Tier.TRANSIENT)
    _expect_raises(ExclusionError, lambda: store.exclude("src", crossing), "cross to transient")
    crossing = ExclusionCause(_TRANSIENT.name, Tier.PERMANENT)
    _expect_raises(ExclusionError, lambda: store.exclude("src", crossing), "cross to permanent")
    _expect_raises(ExclusionError, lambda: store.retract("src", _PERMANENT), "retract permanent")
    after = store.retract("src", _TRANSIENT)
    _expect(after.level is Tier.PERMANENT and not after.transient, f"retracted: {after}")
    _expect(store.exclusions("src") == after, "exclusions() reads what retract returned")
    _expect_raises(SourceExcluded, lambda: store.admit(_request(("root",))), "still permanent")
    store.exclude("other", _TRANSIENT)
    store.retract("other", _TRANSIENT)
    store.admit(_request(("root",), source="other"))


def _check_windows(store: Store, clock: Clock) -> None:
    assert isinstance(clock, FakeClock)
    hour = timedelta(hours=1)
    BudgetTree.single_pool(2, hour, name="root").install(store)
    store.admit(_request(("root",)))
    store.admit(_request(("root",)))
    _expect_raises(BudgetExhausted, lambda: store.admit(_request(("root",))), "window full")
    clock.advance(hour)
    counter = store.counter(("root",))
    _expect((counter.spent, counter.total) == (0, 2), f"a new window restarts spent: {counter}")
    _expect(counter.window_start == clock.now(), f"window_start {counter.window_start}")
    store.admit(_request(("root",)))
    _expect(store.counter(("root",)).spent == 1, "the new window counts its own admits")


def _check_concurrency(store: Store, clock: Clock) -> None:
    for budget in (0, 1, 7, 15, 16):
        path = (f"run-{budget}",)
        store.open_scope(Scope(path, budget))
        granted, refusals = _contend(store, [path] * CONTENDERS)
        _expect(granted == min(budget, CONTENDERS), f"budget {budget}: granted {granted}")
        _expect(all(isinstance(r, BudgetExhausted) for r in refusals), f"refusals {refusals}")
        _expect(store.counter(path).spent == granted, f"budget {budget}: spent != granted")
    tree = BudgetTree.from_specs(
        [
            ScopeSpec("pool", ceiling=10),
            ScopeSpec("x", "pool", weight=0.6),
            ScopeSpec("y", "pool", weight=0.6),
        ]
    )
    tree.install(store)
    granted, refusals = _contend(store, [("pool", "x"), ("pool", "y")] * (CONTENDERS // 2))
    spent = (store.counter(("pool", "x")).spent, store.counter(("pool", "y")).spent)
    _expect(granted == 10 == sum(spent), f"the pool granted {granted}, children spent {spent}")
    _expect(max(spent) <= 6, f"a child overspent its ceiling of 6: {spent}")
    _expect(all(isinstance(r, BudgetExhausted) for r in refusals), f"refusals {refusals}")


def _contend(store: Store, paths: list[ScopePath]) -> tuple[int, list[BaseException]]:
    barrier = threading.Barrier(len(paths))
    lock = threading.Lock()
    granted: list[int] = []
    refusals: list[BaseException] = []

    def contender(index: int) -> None:
        barrier.wait()
        try:
            store.admit(_request(paths[index], f"contender-{index}"))
        except BaseException as exc:
            with lock:
                refusals.append(exc)
        else:
            with lock:
                granted.append(index)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(len(paths))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(granted), refusals


def _check_close(store: Store, clock: Clock) -> None:
    store.close()
    store.close()


_CHECKS: tuple[tuple[str, Callable[[Store, Clock], None]], ...] = (
    ("scopes", _check_scopes),
    ("counters", _check_counters),
    ("ceilings", _check_ceilings),
    ("bar", _check_bar),
    ("lattice", _check_lattice),
    ("windows", _check_windows),
    ("concurrency", _check_concurrency),
    ("close", _check_close),
)

"""Items per second through buddhi.evaluate_item, beside a bare loop of seven no-op calls.

Run: ``python bench/buddhi_items.py [--items N] [--repeat R] [--durable-items M]``. Both
loops run in the same process over the same items; the figure reported for each is the
best of R repeats. The item mix reaches every common disposition of the reference pack:
discarded, converged, model-handled, escalated and denied. Last, the same mix runs with
the durable ``buddhi.board.BoardStore`` on a SQLite file (``synchronous=FULL``, the
default: every admission decision is one fsynced transaction) over M items.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

from buddhi import Attempt, BudgetTree, Item, Seams, evaluate_item
from buddhi.reference import DEFAULT_POLICY, Policy, ReferencePack, build_seams

_SETTLED = (Attempt(0.9), Attempt(transient=True), Attempt(0.9), Attempt(0.9))


def make_items(count: int) -> list[Item]:
    """A deterministic mix: 10 % discarded, 20 % converged, 40 % model-handled, 30 % asks."""
    items = []
    for index in range(count):
        kind = index % 10
        source = "noise" if kind == 0 else f"sensor-{index % 7}"
        history = _SETTLED if kind in (1, 2) else ()
        confidence = 0.95 if kind in (3, 4, 5, 6) else 0.05
        items.append(Item(f"item-{index}", source, {"n": index}, confidence, history))
    return items


def make_seams(count: int) -> Seams:
    """The reference seams, with a pool that admits about half of the asks."""
    policy = Policy(
        confidence_threshold=DEFAULT_POLICY.confidence_threshold,
        question=DEFAULT_POLICY.question,
        options=DEFAULT_POLICY.options,
        recommended=DEFAULT_POLICY.recommended,
        discard_sources=frozenset({"noise"}),
    )
    return build_seams(ceiling=count // 5, policy=ReferencePack(policy))


def _noop(item: Item) -> None:
    return None


def bare_loop(items: Sequence[Item]) -> None:
    """Seven no-op function calls per item: the floor any orchestration pays."""
    d1 = d2 = d3 = d4 = d5 = d6 = d7 = _noop
    for item in items:
        d1(item)
        d2(item)
        d3(item)
        d4(item)
        d5(item)
        d6(item)
        d7(item)


def supervised_loop(items: Sequence[Item], seams: Seams) -> Counter[str]:
    """``evaluate_item`` over every item, counting dispositions."""
    counts: Counter[str] = Counter()
    for item in items:
        counts[evaluate_item(item, seams).disposition.value] += 1
    return counts


def best_rate(run: Callable[[], object], count: int, repeat: int) -> float:
    """The best items/s over ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return count / best


PATHS: dict[str, tuple[Callable[[int], Item], int]] = {
    "discarded (1 decision)": (lambda n: Item(f"d{n}", "noise"), 10),
    "model_handled (4)": (lambda n: Item(f"m{n}", "s", None, 0.95), 10),
    "converged (3)": (lambda n: Item(f"c{n}", "s", None, 0.05, _SETTLED), 10),
    "escalated (7)": (lambda n: Item(f"e{n}", "s", None, 0.0), 10**9),
    "denied (7)": (lambda n: Item(f"x{n}", "s", None, 0.0), 0),
}


def per_path(count: int, repeat: int, bare: float) -> None:
    """Print items/s and the ratio to the bare loop for each disposition path alone."""
    for name, (make, ceiling) in PATHS.items():
        items = [make(n) for n in range(count)]
        seams = build_seams(ceiling=ceiling, policy=make_seams(0).policy)
        rate = best_rate(partial(supervised_loop, items, seams), count, repeat)
        print(f"  {name:<24} {rate:>12,.0f} items/s  {bare / rate:>6.1f}x")


def durable_rate(items: Sequence[Item], repeat: int) -> tuple[float, float]:
    """Items/s through evaluate_item with BoardStore on SQLite, and decisions/s of its store.

    Imported here: ``import buddhi`` alone never loads ``buddhi.board`` or ``blackboard``.
    """
    from buddhi.board import BoardStore

    best, decisions = float("inf"), 0
    with tempfile.TemporaryDirectory() as workdir:
        url = f"sqlite:///{workdir}/budget.db"
        for _ in range(repeat):
            store = BoardStore(url, f"bench-{uuid.uuid4().hex[:8]}")
            BudgetTree.single_pool(len(items) // 5).install(store)
            seams = dataclasses.replace(make_seams(len(items)), store=store)
            start = time.perf_counter()
            mix = supervised_loop(items, seams)
            best = min(best, time.perf_counter() - start)
            decisions = mix["escalated"] + mix["denied"]
            store.close()
    return len(items) / best, decisions / best


def main(argv: Sequence[str] | None = None) -> None:
    """Run both loops and print items/s, the ratio, and the disposition mix."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--durable-items", type=int, default=2_000, help="0 skips the durable (SQLite) run"
    )
    args = parser.parse_args(argv)
    items = make_items(args.items)
    mix = supervised_loop(items, make_seams(args.items))
    # Interleaved, best of each: the machine's load drifts less between the two figures.
    bare, supervised = 0.0, 0.0
    for _ in range(args.repeat):
        bare = max(bare, best_rate(lambda: bare_loop(items), args.items, 3))
        supervised = max(
            supervised,
            best_rate(lambda: supervised_loop(items, make_seams(args.items)), args.items, 1),
        )
    print(f"items: {args.items}, best of {args.repeat} interleaved rounds")
    print(f"bare loop (7 no-op calls/item): {bare:>12,.0f} items/s")
    print(f"evaluate_item (reference pack):  {supervised:>12,.0f} items/s")
    print(f"ratio bare/evaluate_item:        {bare / supervised:>12.2f}x")
    print("dispositions:", dict(sorted(mix.items())))
    print("each path alone (ratio to the bare loop):")
    per_path(args.items // 2, args.repeat, bare)
    if args.durable_items <= 0:  # no items: no rate to report (it would divide by zero)
        print("evaluate_item (BoardStore, SQLite): skipped (--durable-items 0)")
        return
    durable, decisions = durable_rate(make_items(args.durable_items), min(args.repeat, 3))
    print(
        f"evaluate_item (BoardStore, SQLite, {args.durable_items} items, best of "
        f"{min(args.repeat, 3)}):"
    )
    print(
        f"  {durable:>12,.0f} items/s  ({decisions:,.0f} admission decisions/s, "
        f"{supervised / durable:,.0f}x below the in-memory figure)"
    )


if __name__ == "__main__":
    main()

"""The closure: streams viewed as items, budget granted down the tree, any depth."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from buddhi_support import policy, snapshot

from buddhi import (
    Attempt,
    BudgetTree,
    Context,
    Disposition,
    Item,
    Scope,
    Seams,
    Stream,
    StreamReport,
    closure,
    evaluate_item,
    supervise_stream,
    supervise_stream_of_streams,
)
from buddhi.errors import ItemError, ItemTypeError, ScopeConflictError
from buddhi.reference import MemoryStore, ReferencePack, build_seams


def asks(prefix: str, count: int) -> tuple[Item, ...]:
    """Items the model has no confidence in: each becomes an ask that clears any bar."""
    return tuple(Item(f"{prefix}-{n}", "s", confidence=0.0) for n in range(count))


def test_supervise_stream_is_evaluate_item_over_every_item(seams: Seams) -> None:
    items = (Item("a", "s", confidence=0.9), *asks("x", 2))
    report = supervise_stream(Stream("flat", items), seams)
    assert [o.item for o in report.outcomes] == list(items)
    assert [o.disposition for o in report.outcomes] == [
        evaluate_item(i, build_seams()).disposition for i in items
    ]
    assert report.scope == ("global",)
    assert report.children == ()


def test_stream_as_item_carries_the_stream() -> None:
    stream = Stream("s1", asks("x", 1), source="team", confidence=0.4, history=(Attempt(1.0),))
    item = stream.as_item()
    assert (item.id, item.source, item.confidence, item.history) == (
        "s1",
        "team",
        0.4,
        (Attempt(1.0),),
    )
    assert item.payload is stream


def test_a_stream_of_streams_of_streams(seams: Seams) -> None:
    leaf_a = Stream("leaf-a", asks("a", 3), weight=0.5)
    leaf_b = Stream("leaf-b", asks("b", 3), weight=0.5)
    middle = Stream("middle", (leaf_a, leaf_b), weight=0.8)
    top = Stream("top", (middle, Stream("side", asks("s", 1), weight=0.2)))
    report = supervise_stream_of_streams(top, seams)
    assert [o.disposition for o in report.outcomes] == [Disposition.MODEL_HANDLED] * 2
    middle_report = report.child("middle")
    assert middle_report.scope == ("global", "middle")
    assert middle_report.child("leaf-a").scope == ("global", "middle", "leaf-a")
    ceilings = {s.path: s.ceiling for s in seams.store.scopes()}
    assert ceilings == {
        ("global",): 10,
        ("global", "middle"): 8,
        ("global", "middle", "leaf-a"): 4,
        ("global", "middle", "leaf-b"): 4,
        ("global", "side"): 2,
    }
    counts = report.counts()
    assert counts[Disposition.ESCALATED] == 7
    assert counts[Disposition.MODEL_HANDLED] == 4  # the four streams, judged as items
    for path in ceilings:
        assert seams.store.counter(path).spent <= ceilings[path]


def test_a_parent_ceiling_bounds_its_subtree() -> None:
    seams = build_seams(ceiling=4)
    children = tuple(Stream(f"c{n}", asks(f"c{n}", 3), weight=1.0) for n in range(3))
    report = supervise_stream_of_streams(Stream("top", children), seams)
    assert report.counts()[Disposition.ESCALATED] == 4
    assert report.counts()[Disposition.DENIED] == 5
    spent = [seams.store.counter(("global", f"c{n}")).spent for n in range(3)]
    assert spent == [3, 1, 0]
    assert seams.store.counter(("global",)).spent == 4


def test_only_a_model_handled_child_is_granted_and_recursed_into(
    make_seams: Callable[..., Seams],
) -> None:
    seams = make_seams(discard_sources=frozenset({"noise"}))
    children = (
        Stream("granted", asks("g", 1)),
        Stream("unsure", asks("u", 1), confidence=0.1),
        Stream("noise", asks("n", 1), source="noise"),
        Stream("done", asks("d", 1), history=(Attempt(1.0),) * 3),
    )
    report = supervise_stream_of_streams(Stream("top", children), seams)
    assert [o.disposition for o in report.outcomes] == [
        Disposition.MODEL_HANDLED,
        Disposition.ESCALATED,
        Disposition.DISCARDED,
        Disposition.CONVERGED,
    ]
    assert [c.stream_id for c in report.children] == ["granted"]
    assert [s.path for s in seams.store.scopes()] == [("global",), ("global", "granted")]
    asked = [ask.item_id for ask in seams.transport.asks]  # type: ignore[attr-defined]
    assert asked == ["g-0", "unsure"]


def test_the_spend_on_a_stream_is_the_effort_ceiling_of_its_items(
    make_seams: Callable[..., Seams],
) -> None:
    seams = build_seams(router=None)
    child = Stream("child", (Item("i", "s", confidence=0.9),))
    report = supervise_stream_of_streams(
        Stream("top", (child,)), seams, Context(effort_ceiling="low")
    )
    item_outcome = report.child("child").outcomes[0]
    assert item_outcome.spend is not None
    assert item_outcome.spend.effort == "low"
    capped = Stream("capped", (Item("i", "s", confidence=0.9),), effort_ceiling="low")
    outcome = supervise_stream(capped, build_seams()).outcomes[0]
    assert outcome.spend is not None and outcome.spend.effort == "low"


def test_recursion_to_any_depth(seams: Seams) -> None:
    stream = Stream("depth-0", asks("leaf", 1))
    for depth in range(1, 60):
        stream = Stream(f"depth-{depth}", (stream,))
    report = supervise_stream_of_streams(stream, seams)
    levels = 0
    node: StreamReport = report
    while node.children:
        node = node.children[0]
        levels += 1
    assert levels == 59
    assert len(node.scope) == 60
    assert [o.disposition for o in node.outcomes] == [Disposition.ESCALATED]
    assert seams.store.counter(("global",)).spent == 1


def test_a_stream_may_mix_items_and_streams(seams: Seams) -> None:
    mixed = Stream("mixed", (*asks("x", 1), Stream("inner", asks("y", 1))))
    report = supervise_stream(mixed, seams)
    assert [o.disposition for o in report.outcomes] == [
        Disposition.ESCALATED,
        Disposition.MODEL_HANDLED,
    ]
    assert report.child("inner").outcomes[0].disposition is Disposition.ESCALATED
    with pytest.raises(KeyError, match="no child stream 'x-0'"):
        report.child("x-0")


def test_a_stream_of_streams_must_hold_only_streams(seams: Seams) -> None:
    with pytest.raises(ItemTypeError, match="holds item 'x-0'"):
        supervise_stream_of_streams(Stream("top", asks("x", 1)), seams)
    with pytest.raises(ItemTypeError, match=r"takes a buddhi\.Stream"):
        supervise_stream(asks("x", 1), seams)  # type: ignore[arg-type]


def test_bad_streams_are_refused_when_built() -> None:
    with pytest.raises(ItemTypeError, match="entries must be Item or Stream"):
        Stream("s", ({"id": "raw"},))  # type: ignore[arg-type]
    with pytest.raises(ItemError, match="two entries with id 'x-0'"):
        Stream("s", asks("x", 1) * 2)
    with pytest.raises(ItemError, match="weight must be a number in"):
        Stream("s", (), weight=1.5)


def test_reopening_a_granted_scope_on_a_rerun_is_harmless(seams: Seams) -> None:
    top = Stream("top", (Stream("c", asks("c", 1), weight=0.5),))
    supervise_stream_of_streams(top, seams)
    again = supervise_stream_of_streams(top, seams)
    assert again.child("c").outcomes[0].disposition is Disposition.ESCALATED
    assert seams.store.counter(("global", "c")).spent == 2


def test_the_same_function_judges_items_and_streams() -> None:
    pack = ReferencePack(policy(confidence_threshold=0.5))
    seams = build_seams(policy=pack)
    stream = Stream("s", (), confidence=0.4)
    direct = evaluate_item(stream.as_item(), seams)
    via_closure = supervise_stream_of_streams(Stream("top", (stream,)), build_seams(policy=pack))
    assert direct.disposition is via_closure.outcomes[0].disposition is Disposition.ESCALATED


def test_the_closure_recurses_through_the_public_supervise_stream(
    seams: Seams, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Context | None]] = []
    real = closure.supervise_stream

    def spy(stream: Stream, seams: Seams, context: Context | None = None) -> StreamReport:
        calls.append((stream.id, context))
        return real(stream, seams, context)

    monkeypatch.setattr(closure, "supervise_stream", spy)
    deep = Stream("deep", asks("d", 1))
    top = Stream(
        "top",
        (Stream("a", (deep,), weight=0.5), Stream("unsure", asks("u", 1), confidence=0.1)),
    )
    report = supervise_stream_of_streams(top, seams)
    assert calls == [
        ("a", Context(("global", "a"), "medium")),
        ("deep", Context(("global", "a", "deep"), "medium")),
    ]
    assert report.child("a").child("deep").outcomes[0].disposition is Disposition.ESCALATED


def test_a_scope_conflict_in_the_tree_is_refused_before_any_ask_is_delivered(
    seams: Seams,
) -> None:
    # A first run granted "b" half the pool; this run declares it with a quarter.
    seams.store.open_scope(Scope(("global", "b"), 5, 0.5))
    top = Stream("top", (Stream("a", asks("a", 2)), Stream("b", asks("b", 1), weight=0.25)))
    before = snapshot(seams.store)
    with pytest.raises(ScopeConflictError) as raised:
        supervise_stream_of_streams(top, seams)
    assert seams.transport.asks == ()  # type: ignore[attr-defined]
    assert snapshot(seams.store) == before  # not even "a"'s scope was opened
    message = str(raised.value)
    assert "stream 'b'" in message and "'global/b'" in message
    assert "weight 0.25" in message and "weight 0.5" in message


def test_a_conflict_deep_in_a_mixed_stream_is_refused_before_anything_runs(
    seams: Seams,
) -> None:
    seams.store.open_scope(Scope(("global", "mid"), 10))
    seams.store.open_scope(Scope(("global", "mid", "leaf"), 1, 0.1))
    leaf = Stream("leaf", asks("l", 1), weight=0.7)
    mixed = Stream("mixed", (*asks("x", 2), Stream("mid", (leaf,))))
    before = snapshot(seams.store)
    with pytest.raises(ScopeConflictError) as raised:
        supervise_stream(mixed, seams)
    assert seams.transport.asks == ()  # type: ignore[attr-defined]
    assert snapshot(seams.store) == before
    assert "stream 'leaf'" in str(raised.value) and "'global/mid/leaf'" in str(raised.value)


def test_every_conflicting_grant_is_named_whether_or_not_this_run_would_grant_it(
    seams: Seams,
) -> None:
    seams.store.open_scope(Scope(("global", "unsure"), 5, 0.5))
    seams.store.open_scope(Scope(("global", "mid"), 5, 0.5))
    top = Stream(
        "top",
        (
            Stream("a", asks("a", 1)),
            Stream("unsure", asks("u", 1), confidence=0.1, weight=0.3),  # would be asked
            Stream("mid", (Stream("leaf", asks("l", 1)),), weight=0.8),
        ),
    )
    with pytest.raises(ScopeConflictError) as raised:
        supervise_stream_of_streams(top, seams)
    assert seams.transport.asks == ()  # type: ignore[attr-defined]
    message = str(raised.value)
    assert "stream 'unsure'" in message and "stream 'mid'" in message
    assert "stream 'leaf'" not in message  # derived from a conflict, it says nothing
    assert "give stream 'mid' the weight 0.5 the store holds" in message


class RacedStore(MemoryStore):
    """A store in which another writer opens one scope its own way just before the grant."""

    def __init__(self, raced: Scope) -> None:
        super().__init__()
        self.raced = raced

    def open_scope(self, scope: Scope) -> None:
        if scope.path == self.raced.path and scope != self.raced:
            super().open_scope(self.raced)  # the other writer got there first
        super().open_scope(scope)


def test_a_conflict_that_arises_mid_run_carries_the_report_of_what_ran() -> None:
    store = RacedStore(Scope(("global", "mid", "b"), 1, 0.1))
    BudgetTree.single_pool(10).install(store)
    seams = build_seams()
    seams = Seams(seams.policy, seams.router, store, seams.transport, seams.oob)
    mid = Stream("mid", (Stream("a", asks("a", 2)), *asks("m", 1), Stream("b", asks("b", 1))))
    top = Stream("top", (Stream("first", asks("f", 1)), mid, Stream("after", asks("z", 1))))
    with pytest.raises(ScopeConflictError) as raised:
        supervise_stream_of_streams(top, seams)
    report = raised.value.report
    assert report is not None and report.stream_id == "top"
    delivered = [ask.item_id for ask in seams.transport.asks]  # type: ignore[attr-defined]
    assert delivered == ["f-0", "a-0", "a-1", "m-0"]
    escalated = [o.item.id for o in report.walk() if o.disposition is Disposition.ESCALATED]
    assert sorted(escalated) == sorted(delivered)  # the report accounts for every ask
    assert [o.item.id for o in report.outcomes] == ["first", "mid"]  # "after" never ran
    assert [o.item.id for o in report.child("mid").outcomes] == ["a", "m-0", "b"]
    assert [c.stream_id for c in report.child("mid").children] == ["a"]


def test_a_tree_refused_before_it_ran_has_no_report(seams: Seams) -> None:
    seams.store.open_scope(Scope(("global", "b"), 5, 0.5))
    with pytest.raises(ScopeConflictError) as raised:
        supervise_stream_of_streams(Stream("top", (Stream("b", (), weight=0.25),)), seams)
    assert raised.value.report is None

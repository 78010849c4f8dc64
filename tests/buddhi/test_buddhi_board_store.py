"""buddhi.board.BoardStore in one process: the Store contract on every backend, restart,
the premise shapes the inbox reads, the audit trail, sharing a board, and bad input."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

import pytest

from blackboard import Level, Premise, create_model
from blackboard.errors import StoreError as BoardStoreError
from blackboard.stores import MemoryStore as BoardMemory
from buddhi import (
    GLOBAL_SCOPE,
    AdmissionRequest,
    BudgetExhausted,
    BudgetTree,
    Clock,
    Context,
    Disposition,
    ExclusionCause,
    GraduatedBar,
    Item,
    Outcome,
    Scope,
    ScopeCounter,
    ScopeSpec,
    Seams,
    SourceExcluded,
    Tier,
    evaluate_item,
)
from buddhi.board import (
    ADMISSIONS_LEVEL,
    BUDGET_PREMISE,
    BUDGET_PREMISES,
    BUDGET_REGIONS,
    EXCLUSIONS_PREMISE,
    BoardStore,
)
from buddhi.errors import SeamError, StoreError
from buddhi.reference import (
    DEFAULT_POLICY,
    BlindOOBSource,
    CollectingTransport,
    Policy,
    ReferencePack,
    StaticRouter,
)
from buddhi.testing import FakeClock, check_store
from storekit import StoreSpec

OPEN_BAR = GraduatedBar(0.0, 1.01)
CONTENDERS = 16
REVOKED = ExclusionCause("revoked", Tier.PERMANENT)
MUTED = ExclusionCause("muted", Tier.TRANSIENT)
HOUR = timedelta(hours=1)
T = TypeVar("T")


def board_store(spec: StoreSpec, board: str | None = None, **kwargs: Any) -> BoardStore:
    """A BoardStore on the spec's storage: by URL when it has one (so the store owns it)."""
    where = spec.url if spec.url is not None else spec.open()
    return BoardStore(where, board or f"b-{uuid.uuid4().hex[:12]}", **kwargs)


def request(path: tuple[str, ...] = GLOBAL_SCOPE, item: str = "i", **kw: Any) -> AdmissionRequest:
    return AdmissionRequest(
        path, item, kw.get("source", "src"), kw.get("confidence", 1.0), OPEN_BAR
    )


def snapshot(store: BoardStore) -> dict[tuple[str, ...], ScopeCounter]:
    return {scope.path: store.counter(scope.path) for scope in store.scopes()}


def tree() -> BudgetTree:
    return BudgetTree.from_specs(
        [
            ScopeSpec("global", ceiling=10, window=HOUR),
            ScopeSpec("fleet-a", "global", weight=0.5),
            ScopeSpec("site-1", "fleet-a", weight=1.0),
            ScopeSpec("fleet-b", "global", weight=0.5, window=timedelta(minutes=30)),
        ]
    )


# -- the contract -------------------------------------------------------------------------


def test_check_store_passes_on_every_backend(store_spec: StoreSpec) -> None:
    names = check_store(lambda clock: board_store(store_spec, clock=clock))
    assert "concurrency" in names and "windows" in names


def test_check_store_passes_on_a_board_shared_with_an_application_model() -> None:
    shared = BoardMemory()

    def factory(clock: Clock) -> BoardStore:
        model = create_model(
            [Level("asks"), Premise("run_state"), *BUDGET_REGIONS],
            premises={"run_state": "open", **BUDGET_PREMISES},
            store=shared,
            board_id=f"run-{uuid.uuid4().hex[:12]}",
        )
        return BoardStore.on_model(model, clock=clock)

    assert check_store(factory)


# -- restart ------------------------------------------------------------------------------


def test_a_restart_keeps_every_counter_and_exclusion(store_spec: StoreSpec) -> None:
    clock = FakeClock()
    board = f"restart-{uuid.uuid4().hex[:12]}"
    store = board_store(store_spec, board, clock=clock)
    tree().install(store)
    for path in [("global", "fleet-a", "site-1")] * 3 + [("global", "fleet-b"), ("global",)]:
        store.admit(request(path))
    clock.advance(timedelta(minutes=40))  # fleet-b's 30-minute window has rolled, global's not
    store.admit(request(("global", "fleet-a")))
    store.exclude("noisy", MUTED)
    store.exclude("gone", REVOKED)
    store.exclude("back", MUTED)
    store.retract("back", MUTED)
    before = snapshot(store)
    exclusions = {s: store.exclusions(s) for s in ("noisy", "gone", "back", "never")}
    store.close()

    reopened = board_store(store_spec, board, clock=clock)
    assert snapshot(reopened) == before
    order = [s.path for s in reopened.scopes()]
    assert sorted(order) == sorted(s.path for s in tree().scopes)
    assert all(order.index(p[:-1]) < order.index(p) for p in order if len(p) > 1)
    assert {s: reopened.exclusions(s) for s in exclusions} == exclusions
    assert before[("global",)].spent == 6 and before[("global", "fleet-b")].spent == 0
    assert before[("global", "fleet-a")].own == 1 and before[("global", "fleet-a")].total == 4
    # The ceilings still hold after the restart: fleet-a has 5, and spent 4 of them.
    reopened.admit(request(("global", "fleet-a", "site-1")))
    with pytest.raises(BudgetExhausted) as refused:
        reopened.admit(request(("global", "fleet-a")))
    assert refused.value.scope == ("global", "fleet-a") and refused.value.spent == 5
    with pytest.raises(SourceExcluded):
        reopened.admit(request(source="gone"))
    reopened.close()


# -- what the board holds -------------------------------------------------------------------


def test_the_budget_premise_has_the_shape_the_inbox_reads() -> None:
    from pybb.inbox import PremiseBudgetView

    store = BoardStore(None, "shape", clock=FakeClock())
    tree().install(store)
    store.admit(request(("global", "fleet-a", "site-1")))
    value = store.model.reader.read_premise(BUDGET_PREMISE).value
    assert set(value) == {"global", "global/fleet-a", "global/fleet-a/site-1", "global/fleet-b"}
    assert value["global/fleet-a"] == {
        "path": ["global", "fleet-a"],
        "parent": "global",
        "spent": 1,
        "ceiling": 5,
        "total": 1,
        "own": 0,
        "weight": 0.5,
        "window_us": 3_600_000_000,
        "window_start": "2030-01-01T00:00:00+00:00",
    }
    usage = {u.scope: (u.spent, u.ceiling) for u in PremiseBudgetView(store.model.reader).usage()}
    assert usage == {
        "global": (1, 10),
        "global/fleet-a": (1, 5),
        "global/fleet-a/site-1": (1, 5),
        "global/fleet-b": (0, 5),
    }
    store.exclude("gone", REVOKED)
    store.exclude("gone", ExclusionCause("stale", Tier.TRANSIENT))
    exclusions = store.model.reader.read_premise(EXCLUSIONS_PREMISE).value
    assert exclusions == {"gone": {"permanent": ["revoked"], "transient": ["stale"]}}


def test_every_decision_and_change_leaves_one_audit_record() -> None:
    store = BoardStore(None, "audit", clock=FakeClock())
    BudgetTree.single_pool(2).install(store)
    store.admit(request(item="a"))
    store.admit(AdmissionRequest(GLOBAL_SCOPE, "b", "src", 0.9, GraduatedBar(0.5, 0.6)))
    with pytest.raises(BudgetExhausted):
        store.admit(request(item="c"))
    store.exclude("src", MUTED)
    with pytest.raises(SourceExcluded):
        store.admit(request(item="d"))
    records = [c.content for c in store.model.reader.read_level(ADMISSIONS_LEVEL)]
    kinds = [(r["kind"], r.get("decision")) for r in records]
    assert kinds == [
        ("open_scope", None),
        ("admission", "admitted"),
        ("admission", "admitted"),
        ("admission", "budget_exhausted"),
        ("exclude", None),
        ("admission", "source_excluded"),
    ]
    opened, first, second, full, _, excluded = records
    assert (opened["step"], opened["version"]) == ("budget@1", 2)
    assert (first["step"], first["version"]) == ("budget@2", 3)
    assert first["request"] == {
        "item_id": "a",
        "scope": "global",
        "source": "src",
        "confidence": 1.0,
    }
    assert first["counters"] == {"global": {"spent": 1, "ceiling": 2}}
    assert second["bar"] == {"load": 0.5, "required": pytest.approx(0.8)}
    assert second["counters"] == {"global": {"spent": 2, "ceiling": 2}}
    assert full["step"].startswith("budget@4#") and "version" not in full
    assert full["bar"]["limit"] == "ceiling" and full["refusal"] == {"scope": "global", "spent": 2}
    assert excluded["exclusions"] == {"permanent": [], "transient": ["muted"]}
    # The premise's versions and the audit steps of the changes tell one story.
    assert store.model.reader.read_premise(BUDGET_PREMISE).version == 4


def test_a_lost_compare_and_set_writes_no_audit_record() -> None:
    """A rival admits between our read and our write; we retry, and only winners are recorded."""
    store = BoardStore(None, "race", clock=FakeClock())
    rival = BoardStore.on_model(store.model)
    BudgetTree.single_pool(10).install(store)
    rivals = iter(range(3))

    def meddling_bar(load: float) -> float:
        # Read inside our attempt, after our read of the premise: the rival's admit lands first.
        if next(rivals, None) is not None:
            rival.admit(request(item="rival"))
        return 0.0

    mine = store.admit(AdmissionRequest(GLOBAL_SCOPE, "mine", "src", 1.0, meddling_bar))
    assert mine.spent == 4  # three rivals got in first; the fourth attempt won
    admissions = [c.content for c in store.model.reader.read_level(ADMISSIONS_LEVEL)][1:]
    assert [a["request"]["item_id"] for a in admissions] == ["rival"] * 3 + ["mine"]
    assert [a["step"] for a in admissions] == [f"budget@{v}" for v in (2, 3, 4, 5)]
    assert [a["counters"]["global"]["spent"] for a in admissions] == [1, 2, 3, 4]
    assert store.counter(GLOBAL_SCOPE).spent == 4


def test_a_foreign_write_to_the_premise_voids_the_orphaned_audit_record() -> None:
    store = BoardStore(None, "foreign", clock=FakeClock())
    BudgetTree.single_pool(10).install(store)
    control, reader = store.model.control, store.model.reader
    done: list[bool] = []

    def foreign_bar(load: float) -> float:
        if not done:  # someone sets the premise without an audit record, mid-attempt
            done.append(True)
            state = reader.read_premise(BUDGET_PREMISE)
            control.set_premise("ops", BUDGET_PREMISE, state.value, expected_version=state.version)
        return 0.0

    store.admit(AdmissionRequest(GLOBAL_SCOPE, "mine", "src", 1.0, foreign_bar))
    contributions = reader.read_level(ADMISSIONS_LEVEL)
    orphan = next(c for c in contributions if c.content["step"] == "budget@2")
    void = next(c for c in contributions if c.content["kind"] == "void")
    assert void.content["voids"] == orphan.sequence
    assert store.counter(GLOBAL_SCOPE).spent == 1
    steps = [c.content["step"] for c in contributions if c.content["kind"] == "admission"]
    assert steps == ["budget@2", "budget@3"]  # the void one, and the one that counted


def test_exhausted_retries_raise_store_error_and_charge_nothing() -> None:
    store = BoardStore(None, "contended", clock=FakeClock(), attempts=3)
    rival = BoardStore.on_model(store.model)
    BudgetTree.single_pool(10).install(store)

    def always_beaten(load: float) -> float:
        rival.admit(request(item="rival"))
        return 0.0

    with pytest.raises(StoreError, match="3 attempts") as failed:
        store.admit(AdmissionRequest(GLOBAL_SCOPE, "mine", "src", 1.0, always_beaten))
    assert "nothing was written" in str(failed.value)
    assert store.counter(GLOBAL_SCOPE).spent == 3  # the rivals' three, none of mine
    items = [
        c.content["request"]["item_id"] for c in store.model.reader.read_level("admissions")[1:]
    ]
    assert items == ["rival"] * 3


# -- concurrency and windows ---------------------------------------------------------------


def seams_on(store: BoardStore) -> Seams:
    policy = Policy(
        confidence_threshold=DEFAULT_POLICY.confidence_threshold,
        question=DEFAULT_POLICY.question,
        options=DEFAULT_POLICY.options,
        recommended=DEFAULT_POLICY.recommended,
        bar=OPEN_BAR,
    )
    return Seams(
        ReferencePack(policy), StaticRouter(), store, CollectingTransport(), BlindOOBSource()
    )


def together(count: int, work: Callable[[int], T]) -> list[T]:
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        results[index] = work(index)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_sixteen_threads_escalating_at_once_never_overspend(store_spec: StoreSpec) -> None:
    rng = random.Random(16)
    store = board_store(store_spec)
    seams = seams_on(store)
    for trial in range(8):
        budget = rng.randint(0, CONTENDERS)
        context = Context(scope=(f"pool-{trial}",))
        store.open_scope(Scope(context.scope, budget))
        items = [Item(f"{trial}-{n}", "s", None, 0.0) for n in range(CONTENDERS)]
        outcomes = together(CONTENDERS, partial(escalate, items, seams, context))
        escalated = [o for o in outcomes if o.disposition is Disposition.ESCALATED]
        denied = [o for o in outcomes if o.disposition is Disposition.DENIED]
        assert len(escalated) == min(budget, CONTENDERS)
        assert len(denied) == CONTENDERS - len(escalated)
        assert all(isinstance(o.refusal, BudgetExhausted) for o in denied)
        assert store.counter(context.scope).spent == len(escalated)
    assert isinstance(seams.transport, CollectingTransport)
    assert len(seams.transport.asks) == sum(store.counter(s.path).spent for s in store.scopes())
    store.close()


def escalate(items: list[Item], seams: Seams, context: Context, index: int) -> Outcome:
    return evaluate_item(items[index], seams, context)


def test_ra06_windowed_budgets_with_a_fake_clock(store_spec: StoreSpec) -> None:
    rng = random.Random(60)
    clock = FakeClock()
    store = board_store(store_spec, clock=clock)
    budget = rng.randint(1, CONTENDERS - 1)
    BudgetTree.single_pool(budget, HOUR).install(store)
    total = 0
    for _window in range(6):
        results = together(CONTENDERS, lambda n: _admit_or_refusal(store, f"w{n}"))
        granted = sum(1 for r in results if r is None)
        assert granted == budget, results
        assert all(type(r) is BudgetExhausted for r in results if r is not None)
        assert store.counter(GLOBAL_SCOPE).spent == budget
        total += granted
        clock.advance(HOUR)
        assert store.counter(GLOBAL_SCOPE).spent == 0
    assert store.counter(GLOBAL_SCOPE).total == total == 6 * budget
    store.close()


def _admit_or_refusal(store: BoardStore, item: str) -> BaseException | None:
    try:
        store.admit(request(item=item))
    except BaseException as exc:
        return exc
    return None


# -- sharing, closing, bad input -------------------------------------------------------------


def test_a_board_of_another_model_is_refused_with_the_way_out() -> None:
    shared = BoardMemory()
    create_model([Level("asks")], store=shared, board_id="run")
    with pytest.raises(StoreError, match="on_model"):
        BoardStore(shared, "run")
    model = create_model([Level("asks")], store=shared, board_id="run")
    with pytest.raises(StoreError, match="BUDGET_REGIONS"):
        BoardStore.on_model(model)
    wrong = create_model(
        [Premise("budget"), Premise("exclusions"), Level("admissions")],
        premises=BUDGET_PREMISES,
        store=shared,
        board_id="wrong",
    )
    with pytest.raises(StoreError, match="unique='step'"):
        BoardStore.on_model(wrong)
    with pytest.raises(SeamError):
        BoardStore.on_model("not a model")  # type: ignore[arg-type]


def test_bad_arguments_raise_typed_errors_and_write_nothing() -> None:
    with pytest.raises(StoreError, match="attempts"):
        BoardStore(None, attempts=0)
    store = BoardStore(None, "bad")
    store.open_scope(Scope(GLOBAL_SCOPE, 3))
    head = store.model.reader.head()
    with pytest.raises(SeamError):
        store.admit("an item")  # type: ignore[arg-type]
    with pytest.raises(SeamError):
        store.open_scope(("global",))  # type: ignore[arg-type]
    with pytest.raises(SeamError):
        store.exclude("", REVOKED)
    with pytest.raises(SeamError):
        store.counter("global")  # type: ignore[arg-type]
    assert store.model.reader.head() == head


def test_a_malformed_premise_raises_store_error_naming_the_scope() -> None:
    store = BoardStore(None, "malformed")
    store.open_scope(Scope(GLOBAL_SCOPE, 3))
    state = store.model.reader.read_premise(BUDGET_PREMISE)
    broken = {"global": {"spent": "many", "ceiling": 3}}
    store.model.control.set_premise("ops", BUDGET_PREMISE, broken, expected_version=state.version)
    with pytest.raises(StoreError, match="'global'"):
        store.admit(request())
    with pytest.raises(StoreError, match="malformed"):
        store.counter(GLOBAL_SCOPE)


def test_close_releases_only_what_the_store_opened(tmp_path: Any) -> None:
    from blackboard.stores import SQLiteStore

    handle = SQLiteStore(tmp_path / "board.db")
    store = BoardStore(handle, "mine")
    store.open_scope(Scope(GLOBAL_SCOPE, 3))
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.counter(GLOBAL_SCOPE)
    assert BoardStore(handle, "mine").counter(GLOBAL_SCOPE).scope.ceiling == 3  # still open
    handle.close()
    owned = BoardStore(f"sqlite:///{tmp_path / 'owned.db'}", "mine")
    owned.close()
    with pytest.raises(BoardStoreError):  # the store it opened by URL is closed with it
        owned.model.store.head("mine")


def test_importing_buddhi_loads_neither_the_board_module_nor_blackboard() -> None:
    code = (
        "import sys, buddhi\n"
        "print(sorted(m for m in sys.modules if m.startswith(('buddhi.board', 'blackboard'))))"
    )
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "[]"


def test_the_board_module_exports_a_sorted_and_complete_all() -> None:
    import buddhi.board

    exported = list(buddhi.board.__all__)
    key = lambda name: (0 if name.isupper() else 1 if name[0].isupper() else 2, name)  # noqa: E731
    assert exported == sorted(exported, key=key)
    assert all(hasattr(buddhi.board, name) for name in exported)

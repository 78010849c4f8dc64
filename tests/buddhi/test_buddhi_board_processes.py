"""RA-06 budget_never_exceeded on the durable BoardStore (SQLite and PostgreSQL), with
its negative control, and four processes escalating at once.

16 spawned processes, released together by a barrier, each request one interrupt from
a budget B drawn from [0, 16]: granted == min(B, 16), overshoot 0, every refusal a typed
BudgetExhausted, and the board agrees (spent == granted == admitted audit records).
Then trials where a random contender SIGKILLs itself inside its write transaction: the
rest are granted min(B, 15), the board still consistent. The negative control writes
the premise at a freshly re-read version (read-then-write) and must overshoot.
PR tier, per backend: 200 trials, 50 SIGKILL trials, 20 control trials (about 2 minutes
for both backends on 2 cores); nightly (PYBB_NIGHTLY=1): 2,000, 200 and 200. One pool of
16 spawned workers serves every trial; each trial is a new board_id.
"""

from __future__ import annotations

import random
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from test_buddhi_board_workers import Pool

from blackboard.stores import Store as BoardBackend
from buddhi import BudgetTree, ScopeSpec
from buddhi.board import BUDGET_PREMISE, BoardStore
from buddhi.testing import FakeClock
from storekit import StoreSpec, build, sized

CONTENDERS = 16
HOUR = timedelta(hours=1)
TRIALS = sized(200, 2_000)
KILL_TRIALS = sized(50, 200)
CONTROL_TRIALS = sized(20, 200)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    """Sixteen spawned workers, reused by every trial of the module."""
    workers = Pool(CONTENDERS)
    yield workers
    workers.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def durable_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    """The durable backends, each a URL every worker opens."""
    spec = build(request.param, tmp_path)
    yield spec
    spec.close_all()


@dataclass
class Trial:
    budget: int
    answers: list[tuple[str, str | None]] = field(default_factory=list)
    spent: int = 0
    admitted_records: int = 0
    refused_records: int = 0
    victim: int | None = None
    exit_code: int | None = None
    consistent: bool = False

    @property
    def granted(self) -> int:
        return sum(1 for kind, _ in self.answers if kind == "granted")

    @property
    def refusals(self) -> list[tuple[str, str | None]]:
        return [answer for answer in self.answers if answer[0] != "granted"]

    @property
    def overshoot(self) -> int:
        return max(0, self.granted - self.budget, self.spent - self.budget)


@pytest.fixture
def workers(pool: Pool, durable_spec: StoreSpec) -> Iterator[Pool]:
    """The pool, its store handles closed after the test (before its schema is dropped)."""
    yield pool
    pool.call_all("reset")
    pool.retire_spare()


@dataclass
class Backend:
    """A durable backend as the trials use it: its URL for the workers, one handle here."""

    url: str
    handle: BoardBackend


@pytest.fixture
def backend(durable_spec: StoreSpec) -> Backend:
    assert durable_spec.url is not None
    return Backend(durable_spec.url, durable_spec.open())


def run_trial(pool: Pool, backend: Backend, budget: int, command: str, victim: int | None) -> Trial:
    url, board = backend.url, f"ra06-{uuid.uuid4().hex[:12]}"
    with BoardStore(backend.handle, board) as store:
        BudgetTree.single_pool(budget).install(store)
    for index in range(CONTENDERS):
        args = (url, board, index) if command == "racy" else (url, board, index, index == victim)
        pool.send(index, command, *args)
    answering = [index for index in range(CONTENDERS) if index != victim]
    trial = Trial(budget, list(pool.gather(answering).values()), victim=victim)
    if victim is not None:
        trial.exit_code = pool.replace_dead(victim)
    return audit(trial, backend, board)


def audit(trial: Trial, backend: Backend, board: str) -> Trial:
    """What the board says after the trial: spent, and the audit records by decision."""
    with BoardStore(backend.handle, board) as store:
        trial.spent = store.counter(("global",)).spent
        records = store.model.reader.read_level("admissions")
        version = store.model.reader.read_premise(BUDGET_PREMISE).version
    decisions = Counter(r.content.get("decision") for r in records)
    trial.admitted_records = decisions["admitted"]
    trial.refused_records = decisions["budget_exhausted"]
    admitted = [r.content for r in records if r.content.get("decision") == "admitted"]
    # One story: the opening value is version 1, opening the pool made 2, and each
    # admission moved the premise by one, recorded once, with the count it reached.
    trial.consistent = (
        version == 2 + trial.spent
        and [a["step"] for a in admitted] == [f"budget@{v}" for v in range(2, 2 + trial.spent)]
        and [a["counters"]["global"]["spent"] for a in admitted] == list(range(1, trial.spent + 1))
    )
    return trial


def test_ra06_sixteen_processes_never_overshoot_the_board_store(
    backend: Backend, workers: Pool
) -> None:
    rng = random.Random(606)
    for number in range(TRIALS):
        budget = rng.randint(0, CONTENDERS)
        trial = run_trial(workers, backend, budget, "contend", None)
        assert trial.granted == min(budget, CONTENDERS), (number, trial)
        assert trial.overshoot == 0 and trial.spent == trial.granted, (number, trial)
        assert all(r == ("BudgetExhausted", "ceiling") for r in trial.refusals), trial
        assert trial.admitted_records == trial.granted and trial.consistent, trial
        assert trial.refused_records == CONTENDERS - trial.granted, trial


def test_ra06_a_contender_killed_mid_transaction_never_causes_an_overshoot(
    backend: Backend, workers: Pool
) -> None:
    rng = random.Random(6_009)
    workers.prepare_spare(backend.url)
    for number in range(KILL_TRIALS):
        budget = rng.randint(0, CONTENDERS)
        victim = rng.randrange(CONTENDERS)
        trial = run_trial(workers, backend, budget, "contend", victim)
        assert trial.exit_code == -signal.SIGKILL, (number, trial)
        # The victim's transaction rolled back: the other fifteen share the budget.
        assert trial.granted == min(budget, CONTENDERS - 1), (number, trial)
        assert trial.overshoot == 0 and trial.spent == trial.granted, (number, trial)
        assert all(r == ("BudgetExhausted", "ceiling") for r in trial.refusals), trial
        assert trial.admitted_records == trial.granted and trial.consistent, trial


def test_ra06_windowed_budgets_across_processes_with_a_fake_clock(
    backend: Backend, workers: Pool
) -> None:
    """Each process reads a fake clock set to the same moment; six windows, B per window."""
    rng = random.Random(61)
    budget, board = rng.randint(1, CONTENDERS - 1), f"window-{uuid.uuid4().hex[:12]}"
    clock = FakeClock()
    with BoardStore(backend.handle, board, clock=clock) as store:
        BudgetTree.single_pool(budget, HOUR).install(store)
    for window in range(6):
        now = clock.now() + window * HOUR + rng.random() * HOUR
        for index in range(CONTENDERS):
            workers.send(index, "contend", backend.url, board, index, False, now.isoformat())
        answers = list(workers.gather(list(range(CONTENDERS))).values())
        granted = sum(1 for kind, _ in answers if kind == "granted")
        assert granted == budget, (window, answers)
        assert all(a == ("BudgetExhausted", "ceiling") for a in answers if a[0] != "granted")
    clock.advance(5 * HOUR)
    with BoardStore(backend.handle, board, clock=clock) as store:
        counter = store.counter(("global",))
    assert counter.total == 6 * budget and counter.spent <= budget


def test_ra06_negative_control_a_read_then_write_budget_overshoots(
    backend: Backend, workers: Pool
) -> None:
    rng = random.Random(66)
    overshooting = 0
    for _ in range(CONTROL_TRIALS):
        budget = rng.randint(1, CONTENDERS // 2)
        trial = run_trial(workers, backend, budget, "racy", None)
        overshooting += trial.overshoot > 0
    print(f"negative control: {overshooting}/{CONTROL_TRIALS} trials overshot")
    assert overshooting >= 1, "the harness failed to catch a read-then-write budget"


def test_four_processes_escalating_at_once_never_overspend(durable_spec: StoreSpec) -> None:
    url = durable_spec.url
    assert url is not None
    board = f"fleet-{uuid.uuid4().hex[:12]}"
    tree = BudgetTree.from_specs(
        [
            ScopeSpec("fleet", ceiling=30),
            ScopeSpec("a", "fleet", weight=0.5),
            ScopeSpec("b", "fleet", weight=0.5),
            ScopeSpec("c", "fleet", weight=0.5),
            ScopeSpec("d", "fleet", weight=0.5),
        ]
    )
    with BoardStore(url, board) as store:
        tree.install(store)
    four = Pool(4)
    try:
        for index, team in enumerate("abcd"):
            four.send(index, "escalate", url, board, team, 12)
        tallies = list(four.gather([0, 1, 2, 3]).values())
        four.call_all("reset")
    finally:
        four.close()
    escalated = sum(t.get("escalated", 0) for t in tallies)
    denied = sum(t.get("denied", 0) for t in tallies)
    assert escalated == 30 and denied == 4 * 12 - 30, tallies
    assert all(t.get("escalated", 0) <= 15 for t in tallies), tallies  # each team's ceiling
    assert sum(t.get("BudgetExhausted", 0) for t in tallies) == denied, tallies
    assert sum(t["delivered"] for t in tallies) == escalated, tallies
    with BoardStore(url, board) as store:
        counters = {scope.path: store.counter(scope.path) for scope in store.scopes()}
    assert counters[("fleet",)].spent == 30
    assert sum(counters[("fleet", team)].spent for team in "abcd") == 30

"""The worker processes of the buddhi.board process tests, and a check of the pool itself.

``Pool(count)`` starts ``count`` spawned processes that share one
``multiprocessing.Barrier``; each takes ``(function name, args)`` from its own queue and
answers ``(index, ok, value)`` on a shared one. The functions below are the commands.
Each process opens a blackboard store once per URL and reuses it across trials, so a
trial costs a board (a new board_id), not a process. This module imports nothing from
the test suite, so a spawned child loads only what the commands need.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from blackboard.stores import Store as BoardBackend
from blackboard.stores import open_store
from buddhi import (
    GLOBAL_SCOPE,
    AdmissionRequest,
    Context,
    Exclusions,
    GraduatedBar,
    Item,
    Scope,
    ScopeCounter,
    Seams,
    assess_admission,
    evaluate_item,
)
from buddhi.errors import AdmissionRefused, BudgetExhausted
from buddhi.reference import (
    DEFAULT_POLICY,
    BlindOOBSource,
    CollectingTransport,
    Policy,
    ReferencePack,
    StaticRouter,
)
from buddhi.testing import FakeClock

OPEN_BAR = GraduatedBar(0.0, 1.01)  # only a ceiling refuses a confidence-1 request
BARRIER_TIMEOUT = 120.0

_barrier: Any = None
_backends: dict[str, BoardBackend] = {}


# -- commands --------------------------------------------------------------------------


def ping() -> int:
    return os.getpid()


def contend(
    url: str, board: str, index: int, kill: bool, now: str | None = None
) -> tuple[str, str | None]:
    """RA-06: wait at the barrier, then ask for one interrupt from the global pool.

    With ``kill`` the process SIGKILLs itself inside its first write transaction, after
    the store applied the writes and before it committed them. With ``now`` (ISO 8601)
    the store reads a fake clock stopped at that moment.
    """
    from buddhi.board import BoardStore

    clock = None if now is None else FakeClock(datetime.fromisoformat(now))
    store = BoardStore(backend(url), board, clock=clock)
    request = AdmissionRequest(GLOBAL_SCOPE, f"c{index}", "src", 1.0, OPEN_BAR)
    if kill:
        arm_kill(url)
    _barrier.wait(BARRIER_TIMEOUT)
    try:
        store.admit(request)
    except BudgetExhausted as exc:
        return type(exc).__name__, exc.limit
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "granted", None


def racy(url: str, board: str, index: int) -> tuple[str, str | None]:
    """NEGATIVE CONTROL: read the premise, assess, then write it at a freshly read version.

    The compare-and-set is defeated by re-reading the version just before writing, as a
    read-then-write store would; the 1 ms pause widens the window between the two.
    """
    from buddhi.board import BUDGET_PREMISE, BoardStore

    model = BoardStore(backend(url), board).model
    request = AdmissionRequest(GLOBAL_SCOPE, f"c{index}", "src", 1.0, OPEN_BAR)
    _barrier.wait(BARRIER_TIMEOUT)
    budget = model.reader.read_premise(BUDGET_PREMISE).value
    entry = budget["global"]
    counter = ScopeCounter(Scope(GLOBAL_SCOPE, entry["ceiling"]), entry["spent"], entry["total"])
    verdict = assess_admission(request, [counter], Exclusions("src"))
    if isinstance(verdict, AdmissionRefused):
        return type(verdict).__name__, None
    time.sleep(0.001)
    charged = counter.charged(own=True)
    value = {**budget, "global": {**entry, "spent": charged.spent, "total": charged.total}}
    version = model.reader.read_premise(BUDGET_PREMISE).version  # ignores what it read
    model.control.set_premise("racy", BUDGET_PREMISE, value, expected_version=version)
    return "granted", None


def escalate(url: str, board: str, team: str, count: int) -> dict[str, int]:
    """Four-process test: run ``count`` items through evaluate_item in the team's scope."""
    from buddhi.board import BoardStore

    store = BoardStore(backend(url), board)
    policy = Policy(
        confidence_threshold=DEFAULT_POLICY.confidence_threshold,
        question=DEFAULT_POLICY.question,
        options=DEFAULT_POLICY.options,
        recommended=DEFAULT_POLICY.recommended,
        bar=OPEN_BAR,
    )
    seams = Seams(
        ReferencePack(policy), StaticRouter(), store, CollectingTransport(), BlindOOBSource()
    )
    context = Context(scope=("fleet", team))
    items = [Item(f"{team}-{n}", team, None, 0.0) for n in range(count)]
    _barrier.wait(BARRIER_TIMEOUT)
    tally: Counter[str] = Counter()
    for item in items:
        outcome = evaluate_item(item, seams, context)
        tally[outcome.disposition.value] += 1
        if outcome.refusal is not None:
            tally[type(outcome.refusal).__name__] += 1
    assert isinstance(seams.transport, CollectingTransport)
    tally["delivered"] = len(seams.transport.asks)
    return dict(tally)


def warm(url: str) -> None:
    """Import what a trial needs and open the store, before this process is needed."""
    import buddhi.board  # noqa: F401 - imported for its cost, paid now

    backend(url)


def reset() -> None:
    """Close every store this process opened."""
    while _backends:
        _backends.popitem()[1].close()


# -- helpers ---------------------------------------------------------------------------------


def backend(url: str) -> BoardBackend:
    """This process's blackboard store for ``url``, opened on first use."""
    if url not in _backends:
        _backends[url] = open_store(url)
    return _backends[url]


def arm_kill(url: str) -> None:
    """Make this process SIGKILL itself inside its next write transaction, before COMMIT."""
    name = "_sqlite" if url.startswith("sqlite") else "_postgres"
    module = sys.modules[f"blackboard.stores.{name}"]
    apply_writes = module.apply_writes

    def dying(txn: Any, writes: Any, *rest: Any) -> Any:
        apply_writes(txn, writes, *rest)  # the writes are in the transaction, uncommitted
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")  # pragma: no cover

    vars(module)["apply_writes"] = dying  # the store module's global, looked up per call


# -- the pool ---------------------------------------------------------------------------------


def _serve(barrier: Any, commands: Any, answers: Any) -> None:
    global _barrier
    _barrier = barrier
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        command = commands.get()
        if command is None:
            reset()
            return
        slot, name, args = command
        try:
            answer = (slot, True, globals()[name](*args))
        except BaseException as exc:
            answer = (slot, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        if slot is not None:  # a spare's warm-up answers nobody
            answers.send(answer)


@dataclass
class _Worker:
    """One process: its command queue, the parent's end of its answer pipe, the process.

    Answers go over a pipe of the worker's own, written synchronously: a worker killed
    at any moment can break only its own pipe, never a lock other workers share (as the
    feeder thread of a shared ``multiprocessing.Queue`` would hold one).
    """

    commands: Any
    answers: Connection
    proc: Any

    def stop(self) -> None:
        self.commands.put(None)

    def close(self) -> None:
        self.commands.close()
        self.answers.close()


class Pool:
    """``count`` spawned workers sharing one barrier of ``count`` parties.

    A spare process, started ahead, takes the slot of a worker that killed itself, so
    a SIGKILL trial does not wait for a process to spawn and import.
    """

    def __init__(self, count: int) -> None:
        self._ctx = mp.get_context("spawn")
        self.barrier = self._ctx.Barrier(count)
        self._warm_args: tuple[Any, ...] = ()
        self._workers = [self._spawn() for _ in range(count)]
        self._spare: _Worker | None = None

    @property
    def size(self) -> int:
        return len(self._workers)

    def _spawn(self) -> _Worker:
        commands = self._ctx.Queue()
        mine, theirs = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_serve, args=(self.barrier, commands, theirs), daemon=True)
        proc.start()
        theirs.close()  # the child holds its own copy; EOF here once it dies
        if self._warm_args:
            commands.put((None, "warm", self._warm_args))
        return _Worker(commands, mine, proc)

    def send(self, slot: int, name: str, *args: Any) -> None:
        self._workers[slot].commands.put((slot, name, args))

    def gather(self, slots: list[int], timeout: float = 300.0) -> dict[int, Any]:
        """The answers of ``slots``; raises if one failed, died, or did not answer in time."""
        results: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while len(results) < len(slots):
            pending = {self._workers[s].answers: s for s in slots if s not in results}
            ready = wait(list(pending), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"workers {sorted(pending.values())} did not answer")
            for conn in cast("list[Connection]", ready):  # wait() returns some of its arguments
                results[pending[conn]] = self._receive(pending[conn], conn)
        return results

    def _receive(self, slot: int, conn: Any) -> Any:
        try:
            answered, ok, value = conn.recv()
        except EOFError:
            code = self._workers[slot].proc.exitcode
            raise RuntimeError(f"worker {slot} died (exit code {code}) before answering") from None
        if not ok:
            raise RuntimeError(f"worker {answered} failed: {value}")
        return value

    def call_all(self, name: str, *args: Any) -> list[Any]:
        for slot in range(self.size):
            self.send(slot, name, *args)
        answers = self.gather(list(range(self.size)))
        return [answers[slot] for slot in range(self.size)]

    def prepare_spare(self, *warm_args: Any) -> None:
        """Start a spare now; with ``warm_args`` (a URL) each spare runs ``warm`` at once."""
        self._warm_args = warm_args
        if self._spare is None:
            self._spare = self._spawn()

    def retire_spare(self) -> None:
        """Stop the spare (it may hold a store of a finished test) and warm no more."""
        self._warm_args = ()
        if self._spare is not None:
            spare, self._spare = self._spare, None
            spare.stop()
            spare.proc.join(timeout=10)
            spare.close()

    def replace_dead(self, slot: int, timeout: float = 60.0) -> int | None:
        """Join a worker that killed itself, put the spare in its slot; return its exit code.

        A new spare starts at once and spawns while the next trial runs.
        """
        dead = self._workers[slot]
        dead.proc.join(timeout)
        code: int | None = dead.proc.exitcode
        dead.close()
        self._workers[slot] = self._spare or self._spawn()
        self._spare = self._spawn()
        return code

    def close(self) -> None:
        everyone = [*self._workers, *([self._spare] if self._spare else [])]
        for worker in everyone:
            worker.stop()
        for worker in everyone:
            worker.proc.join(timeout=10)
            if worker.proc.is_alive():
                worker.proc.kill()
                worker.proc.join(timeout=5)
            worker.close()


def test_the_pool_starts_its_workers_and_replaces_a_dead_one() -> None:
    pool = Pool(2)
    try:
        first = pool.call_all("ping")
        assert len(set(first)) == 2
        os.kill(first[0], signal.SIGKILL)
        assert pool.replace_dead(0) == -signal.SIGKILL
        assert pool.call_all("ping")[0] not in first
    finally:
        pool.close()

"""RA-05 ``premise_cas_linearizable`` on PostgreSQL, with the in-repo WGL checker.

Eight spawned processes issue reads and compare-and-sets over several premises of one
board, logging a Jepsen-style history (invoke, then ok / fail / info). About 5 % of the
ops are killed mid-flight: their server session is terminated at a random moment on a
store that does not retry, and two worker processes are SIGKILLed mid-run; those ops are
``info`` (outcome unknown). Pass: every premise's history linearizable; every successful
CAS set version expected + 1; no two successful CASes with one expected version. The
checker is shown to reject three known-bad histories and accept three known-good ones,
and to reject a real history from a CAS without a version guard.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_harness import PgSpace, UnguardedCasStore, go_at, pg_space
from pg_wgl import Op, State, check, linearizable, read_histories
from pg_workers import Workers, open_model

from blackboard import Conflict, Premise, Written, create_model
from storekit import sized

__all__ = ["pg_space"]

PROCESSES = 8
OPS = sized(1_500, 10_000)
KILL_RATE = 0.09  # of ops run with a kill armed; about 5 % end cut off (info)
SIGKILLS = 2


# -- the checker's self-test ---------------------------------------------------------------

START: State = ("0", 1)


def _op(p: Any, f: str, status: str, t0: float, t1: float | None, **kw: Any) -> Op:
    return Op(p, f, "k", status, t0, t1, **kw)


BAD = {
    "stale read after a completed CAS": [
        _op(1, "cas", "ok", 0, 1, expected=1, value="a", result=2),
        _op(2, "read", "ok", 2, 3, result=[0, 1]),
    ],
    "two successful CASes from one version": [
        _op(1, "cas", "ok", 0, 2, expected=1, value="a", result=2),
        _op(2, "cas", "ok", 1, 3, expected=1, value="b", result=2),
    ],
    "lost update": [
        _op(1, "cas", "ok", 0, 1, expected=1, value="a", result=2),
        _op(2, "cas", "ok", 2, 3, expected=2, value="b", result=3),
        _op(3, "read", "ok", 4, 5, result=["a", 2]),
    ],
}

GOOD = {
    "sequential CAS, conflict, reads": [
        _op(1, "read", "ok", 0, 1, result=[0, 1]),
        _op(1, "cas", "ok", 2, 3, expected=1, value="a", result=2),
        _op(2, "cas", "fail", 4, 5, expected=1, value="b", result=2),
        _op(2, "read", "ok", 6, 7, result=["a", 2]),
    ],
    "concurrent CASes and a read that sees the later one": [
        _op(1, "cas", "ok", 0, 4, expected=1, value="a", result=2),
        _op(2, "cas", "fail", 1, 3, expected=2, value="b", result=1),
        _op(3, "read", "ok", 2, 5, result=["a", 2]),
        _op(2, "cas", "ok", 6, 7, expected=2, value="c", result=3),
    ],
    "info ops: one took effect, one never did": [
        _op(1, "cas", "info", 0, None, expected=1, value="a"),
        _op(2, "cas", "info", 1, None, expected=1, value="b"),
        _op(3, "read", "ok", 2, 3, result=["b", 2]),
        _op(3, "cas", "ok", 4, 5, expected=2, value="c", result=3),
        _op(4, "read", "info", 6, None),
    ],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_checker_rejects_a_known_bad_history(name: str) -> None:
    assert not linearizable(BAD[name], START)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_checker_accepts_a_known_good_history(name: str) -> None:
    assert linearizable(GOOD[name], START)


# -- the real thing ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers(PROCESSES)
    yield pool
    pool.close()


@pytest.mark.postgres
def test_premise_cas_histories_are_linearizable(
    workers: Workers, pg_space: PgSpace, tmp_path: Path
) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    keys = random.Random(seed).randint(4, 16)
    board = "ra05"
    open_model(f"registers:{keys}", pg_space.url, board).store.close()
    files = [tmp_path / f"history-{n}.jsonl" for n in range(PROCESSES + SIGKILLS)]
    start = go_at(1.0)
    for n in range(PROCESSES):
        args = (pg_space.url, board, keys, OPS, seed + n, str(files[n]), KILL_RATE, start)
        workers.send(n, "cas_history", *args)
    killed = _sigkill_some(workers, files, keys, board, pg_space, seed, start)
    workers.gather([n for n in range(PROCESSES) if n not in killed])
    workers.gather(list(killed))  # the replacements
    workers.reset_all()
    ops = read_histories(files)
    began = time.perf_counter()
    verdict = check(ops, {f"k{n}": ("0", 1) for n in range(keys)})
    took = time.perf_counter() - began
    counts = Counter(op.status for op in ops)
    print(f"RA-05 seed {seed}: {len(ops)} ops on {keys} premises, {dict(counts)}, "
          f"checked in {took:.1f}s")  # fmt: skip
    assert verdict.ok, f"seed {seed}: {verdict}"
    assert counts["info"] >= 0.03 * PROCESSES * OPS, "too few ops were killed mid-flight"
    _check_versions(ops, pg_space, board)


def _sigkill_some(
    workers: Workers, files: list[Path], keys: int, board: str, space: PgSpace, seed: int,
    start: float,
) -> dict[int, int]:  # fmt: skip
    """SIGKILL ``SIGKILLS`` workers mid-run; each replacement finishes their ops."""
    killed: dict[int, int] = {}
    for k, victim in enumerate(random.Random(seed).sample(range(PROCESSES), SIGKILLS)):
        path = files[victim]
        deadline = time.monotonic() + 300
        while time.time() < start or _lines(path) < OPS // (2 + k):
            assert time.monotonic() < deadline, f"worker {victim} made no progress"
            time.sleep(0.05)
        workers.kill(victim)
        done = sum('"invoke"' in line for line in path.read_text().splitlines())
        args = (space.url, board, keys, OPS - done, seed + 100 + k, str(files[PROCESSES + k]),
                KILL_RATE, 0.0)  # fmt: skip
        workers.send(victim, "cas_history", *args)
        killed[victim] = done
    return killed


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _check_versions(ops: list[Op], space: PgSpace, board: str) -> None:
    """Each successful CAS set expected + 1; no two succeeded from one version."""
    succeeded = [op for op in ops if op.f == "cas" and op.status == "ok"]
    assert all(op.expected is not None and op.result == op.expected + 1 for op in succeeded)
    twice = Counter((op.key, op.expected) for op in succeeded)
    assert [k for k, n in twice.items() if n > 1] == []
    assert space.violations(board) == []


# -- negative control: a CAS without a version guard ------------------------------------


@pytest.mark.postgres
def test_negative_control_cas_without_version_guard_is_not_linearizable(
    pg_space: PgSpace,
) -> None:
    ops = _threaded_history(pg_space, UnguardedCasStore, "unguarded")
    assert not check(ops, {"k0": ("0", 1)}).ok
    doubled = Counter(op.expected for op in ops if op.f == "cas" and op.status == "ok")
    assert max(doubled.values()) > 1, "the broken store never let two CASes through"


@pytest.mark.postgres
def test_the_same_threaded_workload_on_the_real_store_is_linearizable(pg_space: PgSpace) -> None:
    from blackboard.stores._postgres import PostgresStore

    ops = _threaded_history(pg_space, PostgresStore, "real")
    assert check(ops, {"k0": ("0", 1)}).ok


def _threaded_history(space: PgSpace, store_class: type, board: str) -> list[Op]:
    """4 threads, each with its own store, racing reads and CASes on one premise."""
    stores = [store_class(space.url) for _ in range(4)]
    models = [
        create_model([Premise("k0")], premises={"k0": 0}, store=s, board_id=board) for s in stores
    ]
    ops: list[Op] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        seen = 1
        for i in range(60):
            t0 = time.monotonic()
            if i % 2:
                state = models[n].reader.read_premise("k0")
                op = Op(n, "read", "k0", "ok", t0, time.monotonic(),
                        result=[state.value, state.version])  # fmt: skip
                seen = state.version
            else:
                result = models[n].control.set_premise("c", "k0", [n, i], expected_version=seen)
                status = "ok" if isinstance(result, Written) else "fail"
                assert isinstance(result, Written | Conflict)
                value = result.version if isinstance(result, Written) else result.current_version
                op = Op(n, "cas", "k0", status, t0, time.monotonic(), expected=seen,
                        value=[n, i], result=value)  # fmt: skip
            with lock:
                ops.append(op)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for store in stores:
            store.close()
    return ops

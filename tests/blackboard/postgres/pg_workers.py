"""What the PostgreSQL reliability tests run inside their worker processes.

``Workers`` starts real, spawned Python processes; each runs :func:`_serve`, which takes
``(function name, args)`` commands from its own queue and answers on a shared one. The
functions below are those commands: each opens (and caches) its own model on its own
``PostgresStore``, so every process has its own pool of connections, as a deployment has.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import queue
import random
import signal
import threading
import time
import traceback
from typing import Any

import psycopg

from blackboard import (
    Conflict,
    Level,
    Model,
    Premise,
    ProposedContribution,
    Rejected,
    RejectionCause,
    StoreError,
    Written,
    create_model,
)
from blackboard.errors import IdempotencyKeyError
from blackboard.stores._postgres import PostgresStore

# -- the models the tests share --------------------------------------------------------


def open_model(kind: str, url: str, board: str, **store_options: Any) -> Model:
    """Open a test model: ``levels``, ``counter`` (a level and ``p``) or ``registers:K``."""
    store = PostgresStore(url, **store_options)
    if kind == "levels":
        regions: list[Any] = [Level("events")]
        premises: dict[str, Any] = {}
    elif kind == "counter":
        regions, premises = [Level("events"), Premise("p")], {"p": 0}
    elif kind.startswith("registers:"):
        names = [f"k{n}" for n in range(int(kind.split(":")[1]))]
        regions, premises = [Premise(n) for n in names], dict.fromkeys(names, 0)
    else:
        raise ValueError(f"no test model {kind!r}")
    try:
        return create_model(regions, premises=premises, store=store, board_id=board)
    except BaseException:
        store.close()
        raise


_models: dict[tuple[str, str, str, str], Model] = {}


def _model(kind: str, url: str, board: str, variant: str = "") -> Model:
    key = (kind, url, board, variant)
    if key not in _models:
        options = {"retries": 0, "max_size": 1} if variant == "fragile" else {}
        if variant == "fragile":
            url = f"{url}&application_name={board[:40]}-fragile-{os.getpid()}"
        _models[key] = open_model(kind, url, board, **options)
    return _models[key]


def reset() -> bool:
    """Close every cached model (and its store)."""
    while _models:
        _, model = _models.popitem()
        model.store.close()
    return True


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


# -- RA-04: level writers and the closer -------------------------------------------------


def write_levels(
    url: str, board: str, writer: str, count: int, start_at: float, abort_every: int = 0
) -> dict[str, Any]:
    """Write ``count`` contributions; every ``abort_every``-th op is a batch that must abort.

    The aborting batch carries one idempotency key on two different writes: the store
    admits the first, then meets the reused key inside the same transaction and rolls the
    whole batch back, after the first write had taken its sequence number.
    """
    control = _model("levels", url, board).control
    return write_levels_on(control, writer, count, start_at, abort_every)


def write_levels_on(
    control: Any, writer: str, count: int, start_at: float, abort_every: int = 0
) -> dict[str, Any]:
    """:func:`write_levels` through a given control (the negative controls pass their own)."""
    report: dict[str, Any] = {"writer": writer, "acks": [], "closed": [], "errors": []}
    aborted = 0
    _sleep_until(start_at)
    started = time.perf_counter()
    for i in range(count):
        if abort_every and i % abort_every == abort_every - 1:
            aborted += _aborting_batch(control, writer, i, report)
        try:
            result = control.write(writer, "events", {"w": writer, "i": i})
        except Exception as exc:
            report["errors"].append(f"{type(exc).__name__}: {exc}")
            continue
        if isinstance(result, Written):
            report["acks"].append((i, result.sequence))
        elif isinstance(result, Rejected) and result.cause is RejectionCause.RUN_CLOSED:
            report["closed"].append(i)
            break
        else:
            report["errors"].append(repr(result))
    report["elapsed"] = time.perf_counter() - started
    report["aborted"] = aborted
    return report


def _aborting_batch(control: Any, writer: str, i: int, report: dict[str, Any]) -> int:
    key = f"{writer}-abort-{i}"
    batch = [
        ProposedContribution(writer, "events", {"w": writer, "abort": i, "n": n}) for n in (1, 2)
    ]
    try:
        control.write_all(batch, idempotency_keys=[key, key])
    except IdempotencyKeyError:
        return 1
    except Exception as exc:
        report["errors"].append(f"aborting batch: {type(exc).__name__}: {exc}")
    return 0


def close_at(url: str, board: str, at: float) -> int | None:
    """Abort the run at wall-clock time ``at``; return the close's sequence number."""
    control = _model("levels", url, board).control
    _sleep_until(at)
    return control.abort("the closer").sequence


# -- the test: levels and a compare-and-set premise from every process --------------


def levels_and_cas(
    url: str, board: str, writer: str, count: int, cas_every: int, start_at: float
) -> dict[str, Any]:
    """Make ``count`` accepted writes; every ``cas_every``-th is a CAS of ``p``, retried.

    Each CAS reads ``p``, then sets it expecting the version it read; a ``Conflict``
    (another process got there first) is recorded and the CAS tried again from a fresh
    read, until one is accepted.
    """
    model = _model("counter", url, board)
    control, reader = model.control, model.reader
    levels: list[tuple[int, int]] = []
    cas: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []
    errors: list[str] = []
    _sleep_until(start_at)
    started = time.perf_counter()
    for i in range(count):
        try:
            if i % cas_every == cas_every - 1:
                _cas_until_accepted(control, reader, writer, i, cas, conflicts)
            else:
                result = control.write(writer, "events", {"w": writer, "i": i})
                assert isinstance(result, Written), result
                levels.append((i, result.sequence))
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    elapsed = time.perf_counter() - started
    return {"writer": writer, "levels": levels, "cas": cas, "conflicts": conflicts,
            "errors": errors, "elapsed": elapsed}  # fmt: skip


def _cas_until_accepted(
    control: Any, reader: Any, writer: str, i: int, cas: list[Any], conflicts: list[Any]
) -> None:
    while True:
        expected = reader.read_premise("p").version
        value = {"w": writer, "i": i}
        result = control.set_premise(writer, "p", value, expected_version=expected)
        if isinstance(result, Written):
            cas.append({"i": i, "expected": expected, "seq": result.sequence,
                        "version": result.version})  # fmt: skip
            return
        assert isinstance(result, Conflict), result
        conflicts.append({"i": i, "expected": expected, "current": result.current_version})


# -- RA-05: reads and compare-and-sets with a history --------------------------------------


def cas_history(
    url: str,
    board: str,
    keys: int,
    ops: int,
    seed: int,
    history: str,
    kill_rate: float,
    start_at: float,
) -> int:
    """Run ``ops`` reads and CASes over ``keys`` premises, logging a Jepsen-style history.

    Every op appends ``invoke`` to the history file before it starts and ``ok``, ``fail``
    or ``info`` after it ends, each with one unbuffered write, so a SIGKILL leaves the op
    in flight as an invoke without completion. With probability ``kill_rate`` an op runs
    on a store that does not retry, while another thread terminates its server session
    at a random moment: the op ends in an error whose outcome the client cannot know
    (``info``), or completes if the kill came too late.
    """
    rng = random.Random(seed)
    kind = f"registers:{keys}"
    steady, fragile = _model(kind, url, board), _model(kind, url, board, "fragile")
    seen: dict[str, int] = {}
    fd = os.open(history, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    killer = _Killer(url)
    try:
        _sleep_until(start_at)
        for n in range(ops):
            doomed = rng.random() < kill_rate
            model = fragile if doomed else steady
            _one_op(fd, rng, model, keys, seen, n, doomed, killer)
    finally:
        killer.stop()
        os.close(fd)
    return ops


def _one_op(
    fd: int, rng: random.Random, model: Model, keys: int, seen: dict[str, int], n: int,
    doomed: bool, killer: _Killer,
) -> None:  # fmt: skip
    key = f"k{rng.randrange(keys)}"
    op: dict[str, Any] = {"p": os.getpid(), "n": n, "key": key}
    if rng.random() < 0.5:
        op.update(f="read")
    else:
        op.update(f="cas", expected=seen.get(key, 1), value=[os.getpid(), n])
    _log(fd, {**op, "type": "invoke", "t": time.monotonic()})
    if doomed:
        killer.arm(rng.uniform(0.0, 0.0015))
    try:
        result = _perform(model, op)
    except StoreError as exc:
        _log(fd, {**op, "type": "info", "t": time.monotonic(), "error": str(exc)[:200]})
        return
    finally:
        killer.disarm()
    status, value = result
    # What the client last heard of the key's version: a read's, a CAS's new or current one.
    seen[key] = value[1] if op["f"] == "read" else value
    _log(fd, {**op, "type": status, "result": value, "t": time.monotonic()})


def _perform(model: Model, op: dict[str, Any]) -> tuple[str, Any]:
    if op["f"] == "read":
        state = model.reader.read_premise(op["key"])
        return "ok", [state.value, state.version]
    result = model.control.set_premise(
        "client", op["key"], op["value"], expected_version=op["expected"]
    )
    if isinstance(result, Written):
        return "ok", result.version
    assert isinstance(result, Conflict), result
    return "fail", result.current_version


def _log(fd: int, event: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(event) + "\n").encode())


class _Killer:
    """Terminates the fragile store's server session after a delay, from its own thread."""

    def __init__(self, url: str) -> None:
        self._url = url.split("?")[0]
        self._app = f"%-fragile-{os.getpid()}"
        self._timer: threading.Timer | None = None

    def arm(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._kill)
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
            self._timer = None

    def stop(self) -> None:
        self.disarm()

    def _kill(self) -> None:
        try:
            with psycopg.connect(self._url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name LIKE %s",
                    (self._app,),
                )
        except psycopg.Error:
            pass


# -- the process pool ----------------------------------------------------------------------


def _serve(index: int, commands: Any, answers: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The kills are on purpose; psycopg's warnings about the connections they cut are not news.
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)
    while True:
        command = commands.get()
        if command is None:
            reset()
            return
        name, args = command
        try:
            answers.put((index, True, globals()[name](*args)))
        except BaseException as exc:
            answers.put((index, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class Workers:
    """``count`` spawned worker processes, each with its own command queue."""

    def __init__(self, count: int) -> None:
        self._ctx = mp.get_context("spawn")
        self._answers = self._ctx.Queue()
        self._queues: list[Any] = []
        self._procs: list[Any] = []
        for index in range(count):
            self._start(index)

    def _start(self, index: int) -> None:
        commands = self._ctx.Queue()
        proc = self._ctx.Process(target=_serve, args=(index, commands, self._answers))
        proc.start()
        if index < len(self._procs):
            self._queues[index], self._procs[index] = commands, proc
        else:
            self._queues.append(commands)
            self._procs.append(proc)

    def pid(self, index: int) -> int:
        return int(self._procs[index].pid)

    def send(self, index: int, name: str, *args: Any) -> None:
        self._queues[index].put((name, args))

    def gather(self, indexes: list[int], timeout: float = 600.0) -> dict[int, Any]:
        """The answers of ``indexes``; raises if one failed or did not answer in time."""
        results: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while len(results) < len(indexes):
            try:
                index, ok, value = self._answers.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                raise TimeoutError(
                    f"workers {set(indexes) - set(results)} did not answer"
                ) from None
            if not ok:
                raise RuntimeError(f"worker {index} failed: {value}")
            results[index] = value
        return results

    def call_all(self, name: str, args_for: Any, count: int | None = None) -> list[Any]:
        indexes = list(range(len(self._procs) if count is None else count))
        for index in indexes:
            self.send(index, name, *args_for(index))
        answers = self.gather(indexes)
        return [answers[i] for i in indexes]

    def kill(self, index: int) -> None:
        """SIGKILL one worker and start a fresh process in its place."""
        os.kill(self.pid(index), signal.SIGKILL)
        self._procs[index].join(timeout=10)
        self._start(index)

    def reset_all(self) -> None:
        self.call_all("reset", lambda _: ())

    def close(self) -> None:
        for commands in self._queues:
            commands.put(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        self._answers.close()
        for commands in self._queues:
            commands.close()

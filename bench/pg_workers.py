"""W1 entries per second on PostgreSQL with 1, 2 and 4 ``pybb worker`` processes.

Each run submits W1's N entries to a fresh board, then starts the worker processes
(spawned, imported and connected before a shared start time, so start-up is not timed);
a figure is N / (last worker's finish - start). The baseline is one plain controller
(``Controller.run``, no claims, no fences) on the same server over the same entries.
Every run is checked: W1's outcomes, and the entries' histories equal to the baseline's
(``pybb.testing.entries_digest``).

``--delay`` makes each knowledge-source attempt sleep that long first, as a source that
waits on something (a device, a service) does: then workers overlap their waiting, which
is what many of them are for. With no delay W1's sources are pure CPU and the board's
writes are serialised by design (one row lock orders the gap-free sequence), so on a
small machine the figure shows what claims and fences cost, not a speed-up.

    python bench/pg_workers.py [--url postgresql://postgres@127.0.0.1:5432/test]
                               [--entries 2000] [--workers 1,2,4] [--delay 0,0.002]
                               [--batch 256] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg

from blackboard.stores import open_store
from pybb import AppContext, Blackboard, BlackboardEntry, Controller, Worker, WorkerSettings
from pybb.testing import entries_digest
from pybb.workloads import Decrement, ZeroEven, less_than_3, w1_expected, w1_outcomes

_DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


class _Waiting:
    delay = 0.0

    def _wait(self) -> None:
        if self.delay:
            time.sleep(self.delay)


class WaitingDecrement(_Waiting, Decrement):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        self._wait()
        return super().execute(blackboard, key)


class WaitingZeroEven(_Waiting, ZeroEven):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        self._wait()
        return super().execute(blackboard, key)


def w1_app(context: AppContext) -> Controller:
    """W1 whose attempts first wait ``delay`` seconds (option), as a waiting source does."""
    delay = float(context.options.get("delay", "0"))
    sources: list[WaitingDecrement | WaitingZeroEven] = [
        WaitingDecrement("decrement", 3),
        WaitingZeroEven("zero_even", 1),
    ]
    for source in sources:
        source.delay = delay
    controller = Controller(Blackboard(context.store, context.board_id), max_cycles=100_000)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate("less_than_3", on_fail=sources)
    return controller


def _worker(url: str, board: str, delay: float, batch: int, start_at: float, out: Any) -> None:
    store = open_store(url)
    try:
        options = {"delay": str(delay)}
        controller = w1_app(AppContext(store, board, options))
        settings = WorkerSettings(lease=timedelta(seconds=30), batch=batch)
        worker = Worker(controller, settings=settings)
        _sleep_until(start_at)
        began = time.process_time()
        summary = worker.run()
        out.put((summary.cycles, time.time(), time.process_time() - began))
    finally:
        store.close()


def _single(url: str, board: str, delay: float, start_at: float, out: Any) -> None:
    store = open_store(url)
    try:
        controller = w1_app(AppContext(store, board, {"delay": str(delay)}))
        _sleep_until(start_at)
        began = time.process_time()
        controller.run()
        out.put((0, time.time(), time.process_time() - began))
    finally:
        store.close()


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def _submit(url: str, board: str, n: int) -> None:
    with Blackboard(url, board) as blackboard:
        blackboard.write_entries(
            {
                f"e{i}": BlackboardEntry(predicate="less_than_3", measurement=i % 10)
                for i in range(n)
            }
        )


def _timed(target: Any, args: list[tuple[Any, ...]], lead: float) -> tuple[float, float, int]:
    """Seconds from the shared start to the last finish, the processes' CPU-s, their cycles.

    The CPU time is the client processes' own from the start to their finish (the
    server's is not counted).
    """
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + lead
    processes = [ctx.Process(target=target, args=(*a, start_at, out)) for a in args]
    for process in processes:
        process.start()
    answers = [out.get(timeout=1800) for _ in processes]  # (cycles, finish time, CPU-s)
    for process in processes:
        process.join(timeout=60)
        if process.exitcode != 0:
            raise SystemExit(f"a process failed (exit code {process.exitcode})")
    finish = max(answer[1] for answer in answers)
    return finish - start_at, sum(a[2] for a in answers), sum(a[0] for a in answers)


def _check(url: str, board: str, n: int) -> str:
    with Blackboard(url, board) as blackboard:
        if w1_outcomes(blackboard) != w1_expected(n):
            raise SystemExit(f"board {board} did not end as W1 must: {w1_outcomes(blackboard)}")
        return entries_digest(blackboard)


def one_round(server: str, n: int, counts: list[int], delay: float, batch: int) -> dict[int, float]:
    """Entries/s of the plain controller (key 0) and of each worker count, on fresh boards."""
    return measured_round(server, n, counts, delay, batch)["entries_per_s"]


def measured_round(
    server: str, n: int, counts: list[int], delay: float, batch: int
) -> dict[str, dict[int, float]]:
    """:func:`one_round`'s entries/s, with the client processes' CPU-s and the cycles."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = f"{server}{'&' if '?' in server else '?'}schema={schema}"
    figures: dict[int, float] = {}
    cpu: dict[int, float] = {}
    cycles: dict[int, float] = {}
    try:
        _submit(url, "single", n)
        seconds, cpu[0], _ = _timed(_single, [(url, "single", delay)], 2.0)
        figures[0] = n / seconds
        reference = _check(url, "single", n)
        for count in counts:
            board = f"w{count}"
            _submit(url, board, n)
            args = [(url, board, delay, batch)] * count
            seconds, cpu[count], done = _timed(_worker, args, 2.0 + 0.4 * count)
            figures[count], cycles[count] = n / seconds, done
            if _check(url, board, n) != reference:
                raise SystemExit(f"{count} workers left other entry histories than one controller")
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return {"entries_per_s": figures, "cpu_s": cpu, "cycles": cycles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("PYBB_PG_URL", _DEFAULT_URL))
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--delay", default="0,0.002", help="seconds each attempt waits")
    parser.add_argument(
        "--batch", type=int, default=WorkerSettings().batch, help="entries a worker holds"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians shown")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    counts = [int(c) for c in args.workers.split(",")]
    print(
        f"W1, {args.entries} entries, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, batch {args.batch}, median of {args.rounds} rounds"
    )
    print(
        f"{'delay':>7} {'controller/s':>13} " + " ".join(f"{c} workers/s".rjust(12) for c in counts)
    )
    rows = []
    for delay in (float(d) for d in args.delay.split(",")):
        rounds = []
        for _ in range(args.rounds):
            done = measured_round(args.url, args.entries, counts, delay, args.batch)
            rounds.append(done)
            rates, cpu = done["entries_per_s"], done["cpu_s"]
            print(
                f"  round, {delay * 1000:.0f}ms, load {os.getloadavg()[0]:.1f}: "
                + ", ".join(
                    f"{c} workers {rates[c] / rates[0]:.2f}x ({done['cycles'][c]:.0f} cycles,"
                    f" {cpu[c]:.2f} CPU-s vs {cpu[0]:.2f})"
                    for c in counts
                ),
                flush=True,
            )
        medians = {
            k: statistics.median(r["entries_per_s"][k] for r in rounds)
            for k in rounds[0]["entries_per_s"]
        }
        ratios = {
            c: statistics.median(r["entries_per_s"][c] / r["entries_per_s"][0] for r in rounds)
            for c in counts
        }
        rows.append({"delay": delay, "entries_per_s": medians, "ratios": ratios, "rounds": rounds})
        line = f"{delay * 1000:>5.0f}ms {medians[0]:>13.0f} "
        print(
            line
            + " ".join(f"{medians[c]:>12.0f}" for c in counts)
            + "   median ratio per round: "
            + ", ".join(f"{c}: {ratios[c]:.2f}x" for c in counts),
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()

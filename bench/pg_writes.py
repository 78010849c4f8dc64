"""Accepted writes per second on PostgreSQL with 1, 2, 4 and 8 writer processes, then W1.

Each run writes the same rows twice, in the same server and the same minute: once through
the kernel (``control.write``: admission, the board's row lock, the gap-free sequence, the
NOTIFY) and once as raw psycopg INSERTs, one autocommit transaction per row, into a table
of the same shape with no sequence and no lock. The ratio says what the kernel's
guarantees cost over the floor the server sets.

Then the batched case, as a controller's cycle writes: ``--batch-procs`` processes (4)
write one board, each committing transactions of ``--batch`` writes (``control.write_all``,
one transaction per batch), beside raw psycopg writing the same rows in transactions of
the same size (``executemany`` then COMMIT, no sequence, no lock). ``--keyed`` gives every
kernel write an idempotency key, as a cycle's attempts carry.

    python bench/pg_writes.py [--url postgresql://postgres@127.0.0.1:5432/test]
                              [--writes 4000] [--procs 1,2,4,8] [--rounds 3] [--json out.json]
                              [--batch 100,1000] [--batch-writes 40000] [--batch-procs 4]
                              [--keyed]
                              [--w1-entries 2000] [--w1-workers 1,2,4] [--w1-delay 0,0.002]

Every process is spawned and connected before a shared start time, so start-up is not
timed; a figure is total writes / (last finish - start). Kernel and raw runs alternate,
``--rounds`` times each, and the table shows medians, so a machine busy with other work
skews both sides alike.

Then W1's entries/s with 1, 2 and 4 ``pybb worker`` processes beside one plain controller
on the same server (``bench/pg_workers.py``, which also runs alone; ``--w1-workers ""``
skips it).
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
from collections.abc import Callable
from typing import Any

import psycopg

from blackboard import Level, ProposedContribution, Written, create_model
from blackboard.stores._postgres import PostgresStore

BOARD = "bench"
RAW_TABLE = "raw_records"


def _kernel_writer(url: str, writer: str, count: int, start_at: float, out: Any) -> None:
    model = create_model([Level("events")], store=url, board_id=BOARD)
    try:
        payloads = [{"writer": writer, "i": i, "pad": "x" * 64} for i in range(count)]
        _sleep_until(start_at)
        for payload in payloads:
            result = model.control.write(writer, "events", payload)
            assert isinstance(result, Written), result
        out.put((writer, time.time()))
    finally:
        model.close()


def _raw_writer(
    server: str, schema: str, writer: str, count: int, start_at: float, out: Any
) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        payloads = [json.dumps({"writer": writer, "i": i, "pad": "x" * 64}) for i in range(count)]
        _sleep_until(start_at)
        for i, payload in enumerate(payloads):
            conn.execute(
                f"INSERT INTO {RAW_TABLE} (board_id, seq, kind, region, writer, payload, at)"
                " VALUES (%s, %s, 'level', 'events', %s, %s, now())",
                (writer, i + 1, writer, payload),
            )
        out.put((writer, time.time()))


def _kernel_batcher(
    url: str, writer: str, count: int, batch: int, keyed: bool, start_at: float, out: Any
) -> None:
    model = create_model([Level("events")], store=url, board_id=BOARD)
    try:
        control = model.control
        batches = []
        for first in range(0, count, batch):
            numbers = range(first, min(first + batch, count))
            proposals = [
                ProposedContribution(writer, "events", {"writer": writer, "i": i, "pad": "x" * 64})
                for i in numbers
            ]
            keys = [f"{writer}/{i}" for i in numbers] if keyed else None
            batches.append((proposals, keys))
        _sleep_until(start_at)
        for proposals, keys in batches:
            results = control.write_all(proposals, idempotency_keys=keys)
            assert all(isinstance(r, Written) for r in results), results[:3]
        out.put((writer, time.time()))
    finally:
        model.close()


def _raw_batcher(
    server: str, schema: str, writer: str, count: int, batch: int, start_at: float, out: Any
) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        rows = [
            (writer, i + 1, writer, json.dumps({"writer": writer, "i": i, "pad": "x" * 64}))
            for i in range(count)
        ]
        _sleep_until(start_at)
        for first in range(0, count, batch):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {RAW_TABLE} (board_id, seq, kind, region, writer, payload, at)"
                    " VALUES (%s, %s, 'level', 'events', %s, %s, now())",
                    rows[first : first + batch],
                )
        out.put((writer, time.time()))


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def _timed(ctx: Any, target: Any, args_for: Any, procs: int, lead: float) -> float:
    out = ctx.Queue()
    start_at = time.time() + lead
    workers = [ctx.Process(target=target, args=(*args_for(p), start_at, out)) for p in range(procs)]
    for w in workers:
        w.start()
    finishes: list[float] = [out.get(timeout=600)[1] for _ in workers]
    for w in workers:
        w.join(timeout=60)
        if w.exitcode != 0:
            raise SystemExit(f"a writer process failed (exit code {w.exitcode})")
    return max(finishes) - start_at


def _fresh_schema(server: str) -> str:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            f'CREATE TABLE "{schema}".{RAW_TABLE} (board_id text NOT NULL, seq bigint NOT NULL,'
            " kind text NOT NULL, region text, writer text NOT NULL, payload text NOT NULL,"
            " version bigint, at timestamptz NOT NULL, ikey text, fingerprint text,"
            " PRIMARY KEY (board_id, seq))"
        )
    return schema


def _drop_schema(server: str, schema: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _check_gap_free(url: str, total: int) -> None:
    store = PostgresStore(url)
    try:
        seqs = [r.sequence for r in store.read_log(BOARD)]
    finally:
        store.close()
    if seqs != list(range(1, total + 1)):
        raise SystemExit(f"the kernel's log is not exactly 1..{total}")


def run(
    server: str, writes: int, procs: int, rounds: int, batch: int | None = None, keyed: bool = False
) -> dict[str, Any]:
    """One row of a table: median kernel and raw writes/s with ``procs`` processes.

    Without ``batch``, every write is a transaction of its own; with it, each process
    commits ``batch`` writes a transaction (its row then says ``batch`` and ``keyed``:
    whether every kernel write carried an idempotency key).
    """
    kernel, raw = [], []
    for _ in range(rounds):
        k, r = _round(server, writes, procs, batch, keyed)
        kernel.append(k)
        raw.append(r)
    row: dict[str, Any] = {"processes": procs}
    if batch is not None:
        row |= {"batch": batch, "keyed": keyed}
    row |= {
        "writes": writes // procs * procs,
        "kernel_per_s": statistics.median(kernel),
        "raw_per_s": statistics.median(raw),
        "kernel_rounds": kernel,
        "raw_rounds": raw,
    }
    row["ratio"] = row["kernel_per_s"] / row["raw_per_s"]
    return row


def _round(
    server: str, writes: int, procs: int, batch: int | None, keyed: bool
) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    per = writes // procs
    schema = _fresh_schema(server)
    url = f"{server}{'&' if '?' in server else '?'}schema={schema}"
    try:
        create_model([Level("events")], store=url, board_id=BOARD).close()
        kernel_side: Callable[..., None]
        raw_side: Callable[..., None]
        if batch is None:
            lead = 1.5 + 0.3 * procs  # spawned interpreters import and connect before the start
            kernel_side, raw_side = _kernel_writer, _raw_writer
            kernel_more: tuple[Any, ...] = ()
            raw_more: tuple[Any, ...] = ()
        else:
            lead = 1.5 + 0.5 * procs + per / 20_000  # import, connect and build the proposals
            kernel_side, raw_side = _kernel_batcher, _raw_batcher
            kernel_more, raw_more = (batch, keyed), (batch,)
        kernel = _timed(ctx, kernel_side, lambda p: (url, f"w{p}", per, *kernel_more), procs, lead)
        _check_gap_free(url, per * procs)
        raw = _timed(
            ctx, raw_side, lambda p: (server, schema, f"w{p}", per, *raw_more), procs, lead
        )
    finally:
        _drop_schema(server, schema)
    return per * procs / kernel, per * procs / raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("PYBB_PG_URL", _DEFAULT_URL))
    parser.add_argument("--writes", type=int, default=4000, help="total writes per run")
    parser.add_argument("--procs", default="1,2,4,8", help='single-write runs ("": skip)')
    parser.add_argument("--rounds", type=int, default=3, help="runs per side; medians shown")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--batch", default="100,1000", help='writes per transaction ("": skip)')
    parser.add_argument("--batch-writes", type=int, default=40_000, help="total, batched runs")
    parser.add_argument("--batch-procs", type=int, default=4, help="processes, batched runs")
    parser.add_argument("--keyed", action="store_true", help="batched writes carry keys")
    parser.add_argument("--w1-entries", type=int, default=2000, help="W1's entries per run")
    parser.add_argument("--w1-workers", default="1,2,4", help='worker counts ("": skip W1)')
    parser.add_argument("--w1-delay", default="0,0.002", help="seconds each W1 attempt waits")
    parser.add_argument("--w1-batch", type=int, default=256, help="entries a worker holds")
    args = parser.parse_args()
    if args.w1_entries < 1:
        # W1 with no entries would wait on its workers for ever.
        parser.error('--w1-entries must be at least 1; skip W1 with --w1-workers ""')
    with psycopg.connect(args.url, autocommit=True) as conn:
        server_version = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    print(
        f"PostgreSQL {server_version[0] if server_version else '?'} "
        f"(synchronous_commit={sync[0] if sync else '?'}), {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.writes} writes per run"
    )
    rows = []
    if args.procs:
        print(f"{'processes':>9} {'kernel/s':>10} {'raw/s':>10} {'ratio':>7}")
    for procs in (int(p) for p in args.procs.split(",") if p):
        row = run(args.url, args.writes, procs, args.rounds)
        rows.append(row)
        print(
            f"{row['processes']:>9} {row['kernel_per_s']:>10.0f} {row['raw_per_s']:>10.0f}"
            f" {row['ratio']:>7.2f}",
            flush=True,
        )
    batched = _batched(args) if args.batch else []
    w1_rows = _w1_with_workers(args) if args.w1_workers else []
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"writes": rows, "batched": batched, "w1_workers": w1_rows}, handle, indent=2)


def _batched(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The batched table: one board, ``--batch-procs`` processes, a transaction per batch."""
    keys = "an idempotency key each" if args.keyed else "no idempotency keys"
    print(
        f"\n{args.batch_procs} processes writing one board, {args.batch_writes} writes per run,"
        f" a transaction per batch, {keys}, median of {args.rounds} rounds"
    )
    print(f"{'batch':>9} {'kernel/s':>10} {'raw/s':>10} {'ratio':>7}")
    rows = []
    for batch in (int(b) for b in args.batch.split(",")):
        row = run(args.url, args.batch_writes, args.batch_procs, args.rounds, batch, args.keyed)
        rows.append(row)
        print(
            f"{batch:>9} {row['kernel_per_s']:>10.0f} {row['raw_per_s']:>10.0f}"
            f" {row['ratio']:>7.2f}",
            flush=True,
        )
    return rows


def _w1_with_workers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """W1 entries/s with each worker count, beside one plain controller (pg_workers.py)."""
    import pg_workers  # bench/ is on sys.path when this file runs as a script

    counts = [int(c) for c in args.w1_workers.split(",")]
    print(
        f"\nW1, {args.w1_entries} entries, batch {args.w1_batch}, median of {args.rounds} rounds"
        " (entries/s)"
    )
    print(f"{'delay':>7} {'controller':>11} " + " ".join(f"{c} workers".rjust(16) for c in counts))
    rows = []
    for delay in (float(d) for d in args.w1_delay.split(",")):
        rounds = [
            pg_workers.one_round(args.url, args.w1_entries, counts, delay, args.w1_batch)
            for _ in range(args.rounds)
        ]
        medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        rows.append({"delay": delay, "entries_per_s": medians, "rounds": rounds})
        cells = [f"{medians[c]:>7.0f} ({medians[c] / medians[0]:.2f}x)" for c in counts]
        print(f"{delay * 1000:>5.0f}ms {medians[0]:>11.0f} " + " ".join(cells), flush=True)
    return rows


_DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

if __name__ == "__main__":
    main()

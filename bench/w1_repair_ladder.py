"""Benchmark W1, the repair ladder of issue 3, against a plain-Python loop and raw sqlite3.

W1: N entries ``e{i}`` with measurement ``i % 10`` and predicate ``less_than_3``, one
predicate route on_fail = [decrement (3 attempts, m - 1), zero_even (1 attempt, even -> 0)].
For N = 10,000: 3,000 pass at once, 3,000 are fixed by decrement, 2,000 by zero_even and
2,000 are escalated; every run is checked against that.

Each measurement runs in a fresh subprocess so its peak RSS is its own:

* ``pybb``: ``pybb.workloads.w1`` then ``Controller.run`` on the memory or SQLite store;
* ``plain``: the same decisions in a plain loop, keeping the same history as dicts;
* ``sqlite3``: the plain loop persisting that history with raw ``sqlite3`` (WAL,
  ``synchronous=FULL``, one transaction per controller cycle, as pybb commits).

Usage: ``python bench/w1_repair_ladder.py [--quick] [--results bench/RESULTS.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FULL = [
    ("memory", 10**4),
    ("memory", 10**5),
    ("memory", 10**6),
    ("sqlite", 10**4),
    ("sqlite", 10**5),
]
QUICK = [("memory", 10**3), ("memory", 10**4), ("sqlite", 10**3), ("sqlite", 10**4)]


# -- the three contenders (each run in its own process) -----------------------------------


def run_pybb(backend: str, n: int, db: str) -> dict[str, Any]:
    from pybb.workloads import w1, w1_expected, w1_outcomes

    store = None if backend == "memory" else f"sqlite:///{db}"
    started = time.perf_counter()
    board, controller = w1(n, store)
    summary = controller.run()
    elapsed = time.perf_counter() - started
    outcomes = w1_outcomes(board)
    assert outcomes == w1_expected(n), (outcomes, w1_expected(n))
    return {"seconds": elapsed, "records": board.head, "cycles": summary.cycles}


def plain_history(n: int) -> list[list[dict[str, Any]]]:
    """W1's decisions, keeping pybb's history as dicts; one list of events per cycle."""
    entries = [{"kind": "entry", "key": f"e{i}", "measurement": i % 10} for i in range(n)]
    cycles: list[list[dict[str, Any]]] = [entries, [], [], []]
    for i in range(n):
        _plain_entry(f"e{i}", i % 10, cycles)
    return cycles


def _plain_entry(key: str, m: int, cycles: list[list[dict[str, Any]]]) -> None:
    first = cycles[1]
    good = m < 3
    first.append({"kind": "verdict", "key": key, "result": good})
    first.append({"kind": "dispatch", "key": key, "chain": "on_pass" if good else "on_fail"})
    if good:
        return
    original, value = m, m
    for attempt in range(1, 4):
        value -= 1
        good = value < 3
        cycles[attempt].append(
            {
                "kind": "attempt",
                "key": key,
                "source": "decrement",
                "attempt": attempt,
                "writes": [[None, value]],
                "result": good,
            }
        )
        if good:
            return
    last = cycles[3]
    last.append({"kind": "restore", "key": key, "value": original})
    last.append({"kind": "handoff", "key": key, "from": "decrement", "to": "zero_even"})
    value = 0 if original % 2 == 0 else original
    good = value < 3
    last.append(
        {
            "kind": "attempt",
            "key": key,
            "source": "zero_even",
            "attempt": 1,
            "writes": [[None, value]],
            "result": good,
        }
    )
    if not good:
        last.append({"kind": "restore", "key": key, "value": original})
        last.append({"kind": "escalation", "key": key, "source": "zero_even"})


def run_plain(n: int) -> dict[str, Any]:
    started = time.perf_counter()
    cycles = plain_history(n)
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "records": sum(map(len, cycles))}


def run_sqlite3(n: int, db: str) -> dict[str, Any]:
    started = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE history (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT,"
        " payload TEXT NOT NULL)"
    )
    records = 0
    for cycle in plain_history(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO history (kind, key, payload) VALUES (?, ?, ?)",
            ((e["kind"], e["key"], json.dumps(e, sort_keys=True)) for e in cycle),
        )
        conn.execute("COMMIT")
        records += len(cycle)
    conn.close()
    return {"seconds": time.perf_counter() - started, "records": records}


def one(contender: str, backend: str, n: int) -> None:
    """Run one contender in this process and print its figures as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "w1.db")
        if contender == "pybb":
            figures = run_pybb(backend, n, db)
        elif contender == "plain":
            figures = run_plain(n)
        else:
            figures = run_sqlite3(n, db)
    figures["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


# -- the driver ------------------------------------------------------------------------------


def measure(contender: str, backend: str, n: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", contender, backend, str(n)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    figures["entries_per_s"] = n / figures["seconds"]
    return figures


def row(backend: str, n: int) -> dict[str, Any]:
    pybb = measure("pybb", backend, n)
    base = measure("plain" if backend == "memory" else "sqlite3", backend, n)
    return {
        "backend": backend,
        "n": n,
        "pybb": pybb,
        "baseline": "plain loop" if backend == "memory" else "raw sqlite3",
        "base": base,
        "ratio": pybb["seconds"] / base["seconds"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| store | N | pybb entries/s | pybb peak RSS | records | baseline | baseline entries/s "
        "| baseline RSS | pybb time / baseline time |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        p, b = r["pybb"], r["base"]
        lines.append(
            f"| {r['backend']} | {r['n']:,} | {p['entries_per_s']:,.0f} | {p['rss_mb']:,.0f} MB "
            f"| {p['records']:,} | {r['baseline']} | {b['entries_per_s']:,.0f} "
            f"| {b['rss_mb']:,.0f} MB | {r['ratio']:.1f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument("--results", type=Path, help="also write the table to this Markdown file")
    parser.add_argument(
        "--one", nargs=3, metavar=("CONTENDER", "BACKEND", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        one(args.one[0], args.one[1], int(args.one[2]))
        return
    rows = []
    for backend, n in QUICK if args.quick else FULL:
        rows.append(row(backend, n))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print()
    print(text)
    if args.results:
        machine = (
            f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs"
        )
        args.results.write_text(
            "# W1 repair ladder\n\n"
            f"Measured with `python bench/w1_repair_ladder.py` on {machine}.\n\n{text}\n"
        )


if __name__ == "__main__":
    main()

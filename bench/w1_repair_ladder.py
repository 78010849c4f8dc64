"""Benchmark W1, the repair ladder, against the shared baselines in the same run.

W1 (``../shared/bench/W1.md``): N entries ``e{i}`` with measurement ``i % 10``, predicate
``less_than_3``, one route on_fail = [decrement (3 attempts), zero_even (1 attempt)].
Every run is checked against the closed form (pybb's by ``w1_outcomes``, the baselines'
by their own ``ok``).

Contenders, each in a fresh process, interleaved round by round (so load falls on all
alike), the median of the rounds reported:

* ``pybb memory``: ``pybb.workloads.w1`` (entries by ``write_entries``) then ``run()``;
* ``pybb sqlite batch``: the same on a SQLite file;
* ``pybb sqlite entry``: the seed's loop, one ``write_entry`` per entry, then ``run()``;
* ``plain_python_w1.py N`` (the CPython limit);
* ``raw_sqlite_w1.py N --commit batch --batch 1000 --sync FULL`` (the durable limit);
* ``raw_sqlite_w1.py N --commit entry --sync FULL`` (one fsync'd commit per entry).

Each ratio is pybb's seconds over its baseline's: memory / plain, sqlite batch / raw
batch, sqlite entry / raw entry. Timing follows W1's rule: from just before the store is
made (after imports) to all entries done and durable. Resident memory per entry is the
peak RSS at the end of the timed section less the process's RSS before it, over N.

Usage: ``python bench/w1_repair_ladder.py [--sizes 10000 100000] [--rounds 3]
[--shared PATH] [--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PYBB = ("pybb memory", "pybb sqlite batch", "pybb sqlite entry")
BASELINES = {
    "pybb memory": ("plain_python", []),
    "pybb sqlite batch": ("raw_sqlite", ["--commit", "batch", "--batch", "1000", "--sync", "FULL"]),
    "pybb sqlite entry": ("raw_sqlite", ["--commit", "entry", "--sync", "FULL"]),
}


def shared_bench(given: Path | None) -> Path:
    """The shared baselines' folder: given, ``$PYBB_SHARED/bench``, or ``../shared/bench``."""
    candidates = [given] if given else []
    if os.environ.get("PYBB_SHARED"):
        candidates.append(Path(os.environ["PYBB_SHARED"]) / "bench")
    candidates += [HERE.parent.parent / "shared" / "bench", HERE.parent / "shared" / "bench"]
    for folder in candidates:
        if folder is not None and (folder / "plain_python_w1.py").exists():
            return folder
    raise SystemExit("cannot find the shared W1 baselines (plain_python_w1.py); give --shared PATH")


# -- pybb, in a process of its own -----------------------------------------------------------


def run_pybb(variant: str, n: int, db: str) -> dict[str, Any]:
    from pybb import BlackboardEntry
    from pybb.workloads import w1, w1_expected, w1_outcomes

    before = _rss_kib()
    started = time.perf_counter()
    if variant == "pybb memory":
        board, controller = w1(n, None)
    elif variant == "pybb sqlite batch":
        board, controller = w1(n, f"sqlite:///{db}")
    else:
        board, controller = w1(0, f"sqlite:///{db}")
        for i in range(n):
            entry = BlackboardEntry(predicate="less_than_3", measurement=i % 10)
            board.write_entry(f"e{i}", entry)
    controller.run()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes = w1_outcomes(board)
    assert outcomes == w1_expected(n), (outcomes, w1_expected(n))
    return {
        "seconds": seconds,
        "records": board.head,
        "kib_per_entry": (peak - before) / max(n, 1),
        "ok": True,
    }


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


# -- the driver ------------------------------------------------------------------------------


def measure(contender: str, n: int, shared: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        if contender in PYBB:
            command = [
                sys.executable,
                __file__,
                "--one",
                contender,
                str(n),
                str(Path(tmp) / "w1.db"),
            ]
        else:
            script, options = contender.split(" ", 1)[0], contender.split(" ")[1:]
            command = [sys.executable, str(shared / f"{script}_w1.py"), str(n), *options]
            if script == "raw_sqlite":
                command += ["--db", str(Path(tmp) / "raw.db")]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if not figures.get("ok", False):
        raise SystemExit(f"{contender} at N={n} did not produce W1's outcomes: {figures}")
    return figures


def baseline_name(variant: str) -> str:
    script, options = BASELINES[variant]
    return " ".join([script, *options])


def rounds(n: int, count: int, shared: Path) -> dict[str, list[dict[str, Any]]]:
    """Every contender ``count`` times, interleaved."""
    contenders = [*PYBB, *dict.fromkeys(baseline_name(v) for v in PYBB)]
    seen: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
    for _ in range(count):
        for contender in contenders:
            seen[contender].append(measure(contender, n, shared))
    return seen


def median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(run[key]) for run in runs))


def table(results: dict[int, dict[str, list[dict[str, Any]]]]) -> str:
    lines = [
        "| W1 | N | pybb s | pybb KiB/entry | baseline | baseline s | ratio |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for n, seen in results.items():
        for variant in PYBB:
            base = baseline_name(variant)
            pybb_s, base_s = median(seen[variant], "seconds"), median(seen[base], "seconds")
            kib = median(seen[variant], "kib_per_entry")
            lines.append(
                f"| {variant} | {n:,} | {pybb_s:.3f} | {kib:.1f} "
                f"| `{base}` | {base_s:.3f} | {pybb_s / base_s:.1f}x |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each contender (median)")
    parser.add_argument("--quick", action="store_true", help="N = 1,000 and 10,000, one round")
    parser.add_argument("--shared", type=Path, help="the shared bench folder (W1 baselines)")
    parser.add_argument("--results", type=Path, help="also append the table to this file")
    parser.add_argument("--one", nargs=3, metavar=("VARIANT", "N", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_pybb(args.one[0], int(args.one[1]), args.one[2])))
        return
    shared = shared_bench(args.shared)
    sizes, count = ([1_000, 10_000], 1) if args.quick else (args.sizes, args.rounds)
    results = {n: rounds(n, count, shared) for n in sizes}
    text = table(results)
    load = os.getloadavg()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = (
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    header = f"{stamp}, {machine}, load average {load[0]:.1f} / {load[1]:.1f}, median of {count}"
    print(header)
    print(text)
    if args.results:
        with args.results.open("a", encoding="utf-8") as out:
            out.write(f"\n{header}\n\n{text}\n")


if __name__ == "__main__":
    main()

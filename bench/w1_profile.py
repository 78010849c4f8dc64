"""Where a W1 entry's time goes, by module: the profile behind issue 13's missed targets.

Runs W1 (``pybb.workloads.w1``, then ``run()``) under cProfile and sums each function's
own time by the module it lives in, grouped into the layers the code is built from:
the engine (``pybb._engine``), the kernel (``blackboard``), its store
(``blackboard.stores``), the frozen records' builders, C functions (built-ins, dict and
list methods, orjson, sqlite3) and the rest. cProfile adds its own cost to every Python
call, so the shares lean toward call-heavy code; ``bench/w1_instructions.py`` counts
instructions without that bias, and its ``--by-library`` splits them by shared library.

Prints one table: each module's share of the profiled time, its Python-level calls per
entry and its share's microseconds per entry; then the layers' totals.

Usage: ``python bench/w1_profile.py [--store memory|sqlite] [--entries 10000]
[--top 25]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

LAYERS = (
    ("pybb._engine.", "engine"),
    ("pybb.", "pybb (workload, other)"),
    ("blackboard.stores.", "store"),
    ("blackboard.", "kernel"),
)


def module_of(filename: str, modules: dict[str, str]) -> str:
    """The module of a profiled Python function's file, as a dotted name or a group's label.

    ``modules`` maps a loaded module's file to its name: installed or run from a
    checkout, ``pybb`` and ``blackboard`` are named alike.
    """
    if filename == "<string>":  # the frozen records' builders are compiled from strings
        return "frozen builders"
    name = modules.get(os.path.realpath(filename))
    return name if name is not None else "stdlib " + Path(filename).stem


def loaded_modules() -> dict[str, str]:
    """Each loaded module's file (resolved), to the module's name."""
    files = {name: getattr(module, "__file__", None) for name, module in sys.modules.copy().items()}
    return {os.path.realpath(file): name for name, file in files.items() if isinstance(file, str)}


def layer_of(module: str) -> str:
    """The layer a module belongs to (see LAYERS)."""
    for prefix, layer in LAYERS:
        if module.startswith(prefix):
            return layer
    return module if module in ("C functions", "frozen builders") else "stdlib"


def profile(store: str, entries: int) -> tuple[dict[str, float], Counter[str], float]:
    """Own time (seconds) and calls by module, and the whole profiled time, of one W1 run."""
    from pybb.workloads import w1, w1_expected, w1_outcomes

    with tempfile.TemporaryDirectory() as tmp:
        where = None if store == "memory" else f"sqlite:///{os.path.join(tmp, 'w1.db')}"
        profiler = cProfile.Profile()
        profiler.enable()
        board, controller = w1(entries, where)
        controller.run()
        profiler.disable()
        if w1_outcomes(board) != w1_expected(entries):
            raise SystemExit("W1 did not end as its closed form says")
    modules = loaded_modules()
    own: defaultdict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    for entry in profiler.getstats():
        code = entry.code  # a C function's is its description, a str
        module = "C functions" if isinstance(code, str) else module_of(code.co_filename, modules)
        own[module] += entry.inlinetime
        calls[module] += entry.callcount
    return own, calls, sum(own.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=25, help="modules to list")
    args = parser.parse_args()
    if args.entries < 1:
        raise SystemExit("--entries must be at least 1")
    own, calls, total = profile(args.store, args.entries)
    n = args.entries
    python_calls = sum(c for m, c in calls.items() if m != "C functions")
    print(
        f"W1 on {args.store}, {n:,} entries, under cProfile: {total / n * 1e6:.1f} us an entry, "
        f"{python_calls / n:.0f} Python-level and {calls['C functions'] / n:.0f} C calls an entry"
    )
    print("| module | layer | share | calls / entry | us / entry |")
    print("|---|---|---:|---:|---:|")
    for module, seconds in sorted(own.items(), key=lambda item: -item[1])[: args.top]:
        print(
            f"| {module} | {layer_of(module)} | {seconds / total:.1%} | "
            f"{calls[module] / n:.1f} | {seconds / n * 1e6:.1f} |"
        )
    layers: defaultdict[str, float] = defaultdict(float)
    for module, seconds in own.items():
        layers[layer_of(module)] += seconds
    print()
    print("| layer | share |")
    print("|---|---:|")
    for layer, seconds in sorted(layers.items(), key=lambda item: -item[1]):
        print(f"| {layer} | {seconds / total:.1%} |")


if __name__ == "__main__":
    main()

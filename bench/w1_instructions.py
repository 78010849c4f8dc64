"""CPU instructions per W1 entry under callgrind: the load-independent measure of a lever.

Wall-clock ratios on a shared 2-core machine swing by 20 % and more from run to run
(the baselines' own times by up to 2x), more than most levers move them. Callgrind
counts the instructions a process executes, which load does not change. Each figure
is ``(I(large) - I(small)) / (large - small)``: two whole runs of W1, whose difference
leaves out the interpreter's start, the imports and the board's set-up.

Each contender runs in a process of its own: pybb from this checkout and, with
``--base PATH`` (the ``src`` folder of another checkout, e.g. a ``git worktree`` of the
commit before a lever), the same work from that tree, with the ratio of the two.

Every run is under ``PYTHONHASHSEED=0``, so a tree counts the same each time and two
trees differ only by their code.

Usage: ``python bench/w1_instructions.py [--stores memory sqlite] [--sizes 1000 3000]
[--base OTHER/src] [--by-library]``. Needs ``valgrind`` (Debian: ``apt-get install
valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src"

# What one contender runs: W1 on a store, checked against its closed form.
CHILD = """
import sys
from pybb.workloads import w1, w1_expected, w1_outcomes
n, store = int(sys.argv[1]), sys.argv[2]
board, controller = w1(n, None if store == "memory" else "sqlite:///" + sys.argv[3])
controller.run()
assert w1_outcomes(board) == w1_expected(n), "W1 did not end as its closed form says"
"""


def instructions(src: Path, store: str, n: int) -> tuple[int, Counter[str]]:
    """Instructions callgrind counts for one whole W1 run of ``n`` entries from ``src``.

    Returns the total and the same split by the shared library that ran them (the
    interpreter, libsqlite3, libc, orjson...).
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            CHILD,
            str(n),
            store,
            str(Path(tmp) / "w1.db"),
        ]
        # One hash seed for every run: set and dict orders, and so the work done,
        # otherwise differ from process to process, by up to 10 % at small N.
        env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0")
        subprocess.run(command, check=True, capture_output=True, env=env)
        text = out.read_text()
    totals = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
    if totals is None:
        raise SystemExit(f"callgrind wrote no totals for {store} at N={n}")
    return int(totals.group(1)), by_library(text)


def by_library(callgrind_out: str) -> Counter[str]:
    """Self instructions by the shared library (``ob=``) of the function that ran them.

    Reads callgrind's output format: ``ob=``/``fn=`` lines name where the cost lines
    after them belong (a name is given once as ``(id) name``, then as ``(id)``); the cost
    line after a ``calls=`` line is that call's inclusive cost, counted by its callee.
    """
    names: dict[str, str] = {}
    libraries: Counter[str] = Counter()
    library, after_call = "???", False
    for line in callgrind_out.splitlines():
        if line.startswith("ob="):
            library = _named(names, line[3:])
        elif line.startswith("calls="):
            after_call = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):  # a cost line
            if after_call:
                after_call = False
            else:
                fields = line.split()
                if len(fields) > 1:
                    libraries[_library_name(library)] += int(fields[1])
        elif line.startswith("cob="):
            _named(names, line[4:])  # a callee's library, named here the first time
    return libraries


def _named(names: dict[str, str], spec: str) -> str:
    """The name a compressed ``(id) name`` or ``(id)`` stands for, remembering new ones."""
    ident, _, name = spec.partition(" ")
    if name:
        names[ident] = name
    return names.get(ident, spec)


def _library_name(path: str) -> str:
    name = Path(path).name
    return "the interpreter (libpython)" if name.startswith("libpython") else name.split(".")[0]


def per_entry(src: Path, store: str, small: int, large: int) -> tuple[float, dict[str, float]]:
    """Instructions per entry between two sizes (start-up and set-up cancel out), in all
    and by shared library."""
    total_small, small_libraries = instructions(src, store, small)
    total_large, large_libraries = instructions(src, store, large)
    span = large - small
    libraries = {
        name: (large_libraries[name] - small_libraries[name]) / span
        for name in large_libraries | small_libraries
    }
    return (total_large - total_small) / span, libraries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs="+", choices=("memory", "sqlite"), default=["memory"])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 3_000])
    parser.add_argument("--base", type=Path, help="another checkout's src folder to compare")
    parser.add_argument(
        "--by-library",
        action="store_true",
        help="also split this tree's instructions by the shared library that ran them",
    )
    args = parser.parse_args()
    small, large = sorted(args.sizes)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if large <= small:
        raise SystemExit("--sizes takes two different sizes, e.g. 1000 3000")
    print(f"W1, instructions per entry (callgrind, N {small:,} -> {large:,})")
    print("| store | this tree | base | this / base |")
    print("|---|---:|---:|---:|")
    split: dict[str, dict[str, float]] = {}
    for store in args.stores:
        ours, split[store] = per_entry(SOURCE, store, small, large)
        if args.base is None:
            print(f"| {store} | {ours / 1000:.1f}k | - | - |")
            continue
        theirs, _ = per_entry(args.base.resolve(), store, small, large)
        print(f"| {store} | {ours / 1000:.1f}k | {theirs / 1000:.1f}k | {ours / theirs:.3f} |")
    if args.by_library:
        print()
        print("This tree's instructions per entry by shared library:")
        print("| store | library | per entry |")
        print("|---|---|---:|")
        for store, libraries in split.items():
            for name, count in sorted(libraries.items(), key=lambda item: -item[1]):
                if abs(count) >= 100:  # what is left of a library the run barely uses is noise
                    print(f"| {store} | {name} | {count / 1000:.1f}k |")


if __name__ == "__main__":
    main()

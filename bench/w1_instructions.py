"""CPU instructions per W1 entry under callgrind: the load-independent measure of a lever.

Wall-clock ratios on a shared 2-core machine swing by 20 % and more from run to run
(the baselines' own times by up to 2x), more than most levers move them. Callgrind
counts the instructions a process executes, which load does not change. Each figure
is ``(I(large) - I(small)) / (large - small)``: two whole runs of W1, whose difference
leaves out the interpreter's start, the imports and the board's set-up.

Each contender runs in a process of its own: pybb from this checkout and, with
``--base PATH`` (the ``src`` folder of another checkout, e.g. a ``git worktree`` of the
commit before a lever), the same work from that tree, with the ratio of the two.

Usage: ``python bench/w1_instructions.py [--stores memory sqlite] [--sizes 1000 3000]
[--base OTHER/src]``. Needs ``valgrind`` (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
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


def instructions(src: Path, store: str, n: int) -> int:
    """Instructions callgrind counts for one whole W1 run of ``n`` entries from ``src``."""
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
        env = dict(os.environ, PYTHONPATH=str(src))
        subprocess.run(command, check=True, capture_output=True, env=env)
        totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if totals is None:
        raise SystemExit(f"callgrind wrote no totals for {store} at N={n}")
    return int(totals.group(1))


def per_entry(src: Path, store: str, small: int, large: int) -> float:
    """Instructions per entry between two sizes (start-up and set-up cancel out)."""
    return (instructions(src, store, large) - instructions(src, store, small)) / (large - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs="+", choices=("memory", "sqlite"), default=["memory"])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 3_000])
    parser.add_argument("--base", type=Path, help="another checkout's src folder to compare")
    args = parser.parse_args()
    small, large = sorted(args.sizes)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if large <= small:
        raise SystemExit("--sizes takes two different sizes, e.g. 1000 3000")
    print(f"W1, instructions per entry (callgrind, N {small:,} -> {large:,})")
    print("| store | this tree | base | this / base |")
    print("|---|---:|---:|---:|")
    for store in args.stores:
        ours = per_entry(SOURCE, store, small, large)
        if args.base is None:
            print(f"| {store} | {ours / 1000:.1f}k | - | - |")
            continue
        theirs = per_entry(args.base.resolve(), store, small, large)
        print(f"| {store} | {ours / 1000:.1f}k | {theirs / 1000:.1f}k | {ours / theirs:.3f} |")


if __name__ == "__main__":
    main()

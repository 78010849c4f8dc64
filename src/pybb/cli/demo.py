"""``pybb demo``: the seed's example pair, then a small W1 on SQLite, with status tables."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from pybb.workloads import pair, w1, w1_expected, w1_outcomes

__all__ = ["register", "run_demo"]


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run the example pair and a small W1 repair ladder on SQLite",
        description=(
            "Run the seed's example pair (KS1 fixes x, KS2 fixes y), then workload W1 "
            "(N entries, decrement then zero_even, the rest escalated) on a SQLite board, "
            "printing status tables. Run it twice on one --db: the second run resumes."
        ),
    )
    parser.add_argument("--db", type=Path, help="SQLite file for W1 (default: a temporary one)")
    parser.add_argument("-n", "--n", type=int, default=1000, help="W1 entries (default 1000)")
    parser.add_argument("--rows", type=int, default=10, help="table rows to show (default 10)")
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; 0 if both workloads ended as expected."""
    console = Console()
    ok = _pair(console)
    if args.db is not None:
        return 0 if _w1(console, args.db, args.n, args.rows) and ok else 1
    with tempfile.TemporaryDirectory() as tmp:
        return 0 if _w1(console, Path(tmp) / "w1.db", args.n, args.rows) and ok else 1


def _pair(console: Console) -> bool:
    console.rule("example pair: fix_x repairs x, fix_y repairs y")
    board, controller = pair()
    summary = controller.run()
    controller.status(console=console)
    entry = board.get_entry("p1")
    console.print(
        f"halted: {summary.halted.value}; p1 = {entry.measurement}, good: {entry.good_standing}"
    )
    return entry.good_standing


def _w1(console: Console, db: Path, n: int, rows: int) -> bool:
    console.rule(f"W1 repair ladder, {n} entries, on sqlite:///{db}")
    board, controller = w1(n, f"sqlite:///{db}")
    try:
        summary = controller.run()
        controller.status(limit=rows, console=console)
        outcomes = w1_outcomes(board)
        console.print(f"halted: {summary.halted.value} after {summary.cycles} cycles; {outcomes}")
        return outcomes == w1_expected(n)
    finally:
        board.close()

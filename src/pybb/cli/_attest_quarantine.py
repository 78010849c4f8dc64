"""``pybb attest quarantine``: the devices people quarantined on a supervised run's board.

``pybb attest quarantine [--store URL] [--board-id ID] [--json]`` lists the board's
quarantine list (``pybb.supervision.quarantined``): the devices a person answered
"Quarantine the device" for, who did, when, and their note. It reads the board; it
writes nothing. A word after ``pybb attest``: ``pybb.cli.attest`` hands it here.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["SUBCOMMANDS", "add"]

SUBCOMMANDS = ("quarantine",)
"""The words after ``pybb attest`` that this module's parser takes."""

_DEFAULT_STORE = "sqlite:///pybb-attest.db"


def add(commands: Any) -> None:
    """Add ``quarantine`` to the subcommands of ``pybb attest``."""
    parser = commands.add_parser(
        "quarantine",
        prog="pybb attest quarantine",
        help="list the devices people quarantined",
        description="List the devices on a supervised run's quarantine list (answered "
        "'Quarantine the device' in the inbox): who quarantined each, when, and their note. "
        "Exit status 0 listed (even none), 2 the store or board cannot be read.",
    )
    parser.add_argument(
        "--store", default=_DEFAULT_STORE, help=f"the run's store (default {_DEFAULT_STORE})"
    )
    parser.add_argument(
        "--board-id",
        help="the run's board, e.g. attest-demo-200-seed-0 (default: the kernel's default board)",
    )
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.set_defaults(handler=run_quarantine)


def run_quarantine(args: argparse.Namespace) -> int:
    """Run ``pybb attest quarantine``; return its exit status."""
    from blackboard import BlackboardError
    from pybb.errors import PybbError
    from pybb.inbox import attach_run
    from pybb.supervision import QUARANTINE_KIND
    from pybb.supervision._records import BoardIndex

    errors = Console(stderr=True, highlight=False)
    try:
        model = attach_run(args.store, args.board_id)
    except (BlackboardError, PybbError, ValueError, OSError) as exc:
        errors.print(f"pybb attest quarantine: {exc}", markup=False, soft_wrap=True)
        return 2
    try:
        rows = [
            dict(content)
            for _, content in BoardIndex(model.reader).rows()
            if content.get("kind") == QUARANTINE_KIND
        ]
    finally:
        model.close()
    if args.json:
        print(json.dumps({"board_id": model.board_id, "quarantined": rows}, indent=1))
        return 0
    console = Console(highlight=False)
    if not rows:
        console.print(f"no device is quarantined on board {model.board_id!r}")
        return 0
    table = Table("device", "by", "at", "ask", "note", title=f"quarantined on {model.board_id}")
    for row in rows:
        table.add_row(
            str(row["key"]), str(row["by"]), str(row["at"]), str(row.get("ask_id") or ""),
            str(row.get("note") or ""),
        )  # fmt: skip
    console.print(table)
    console.print(f"{len(rows)} device(s) quarantined")
    return 0

"""``Controller.status()``: the board as a rich table."""

from __future__ import annotations

import json
from itertools import chain, islice
from typing import Any

from rich.console import Console
from rich.table import Table

from pybb._engine.projection import View
from pybb._engine.types import Segment, Stage

__all__ = ["print_status", "status_table"]

_STYLE = {
    Stage.GOOD: "green",
    Stage.ESCALATED: "red",
    Stage.RESOLVED: "cyan",
    Stage.WORKING: "yellow",
}


def print_status(state: View, board_id: str, *, limit: int | None, console: Console | None) -> None:
    """Print the summary line and the entry table."""
    out = console if console is not None else Console()
    out.print(summary_line(state, board_id))
    out.print(status_table(state, limit=limit))


def summary_line(state: View, board_id: str) -> str:
    """Cycle count and how many entries stand where."""
    stages = state.stages
    counts = ", ".join(f"{stage.value} {stages[stage]}" for stage in Stage if stages[stage])
    return (
        f"board {board_id!r}: cycle {state.cycle}, "
        f"{len(state.entries)} entries ({counts or 'none'})"
    )


def status_table(state: View, *, limit: int | None = None) -> Table:
    """The entries (escalated first), one row each, at most ``limit`` rows."""
    keys = chain(state.segments[Segment.ESCALATE], state.segments[Segment.CERTIFY])
    shown = list(islice(keys, limit))
    table = Table(title=f"cycle {state.cycle}")
    for column in ("key", "segment", "stage", "source", "good"):
        table.add_column(column, no_wrap=True)
    for column in ("measurement", "result", "attempts"):
        table.add_column(column, overflow="fold")
    for key in shown:
        entry = state.entries[key]
        table.add_row(
            key,
            entry.segment.value,
            entry.stage.value,
            entry.source or "",
            "yes" if entry.good_standing else "no",
            _short(entry.measurement),
            _short(entry.result),
            ", ".join(f"{name}:{n}" for name, n in entry.ks_history.items()),
            style=_STYLE.get(entry.stage),
        )
    hidden = len(state.entries) - len(shown)
    if hidden > 0:
        table.caption = f"{hidden} more entries not shown (status(limit=None) lists all)"
    return table


def _short(value: Any, width: int = 40) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"

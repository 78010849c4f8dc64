"""Workload W1, the repair ladder of issue 3: its sources, predicate, board and outcomes."""

from __future__ import annotations

from typing import Any

from blackboard.stores import Store
from pybb import AppContext, Blackboard, BlackboardEntry, Controller, KnowledgeSource

__all__ = [
    "Decrement",
    "ZeroEven",
    "less_than_3",
    "w1",
    "w1_app",
    "w1_expected",
    "w1_outcomes",
]


class Decrement(KnowledgeSource):
    """W1's first tier: the measurement minus one, per attempt."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Return the measurement minus one."""
        return blackboard.get_entry(key).measurement - 1


class ZeroEven(KnowledgeSource):
    """W1's second tier: an even measurement becomes 0; an odd one stays as it is."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Return 0 for an even measurement, else the measurement unchanged."""
        measurement = blackboard.get_entry(key).measurement
        return 0 if measurement % 2 == 0 else measurement


def less_than_3(measurement: Any) -> bool:
    """W1's predicate."""
    return bool(measurement < 3)


def w1(
    n: int,
    store: str | Store | None = None,
    *,
    board_id: str = "w1",
    max_cycles: int = 1000,
    write: bool = True,
) -> tuple[Blackboard, Controller]:
    """Workload W1: ``n`` entries ``e{i}`` with measurement ``i % 10``, predicate ``less_than_3``.

    One predicate route for all of them: on_fail = [``decrement`` (3 attempts),
    ``zero_even`` (1 attempt)]. Entries are written in one transaction unless
    ``write`` is false (e.g. to resume a stored board without writing them again).
    """
    board = Blackboard(store, board_id)
    controller = Controller(board, max_cycles=max_cycles)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    if write:
        with board.batch():
            for i in range(n):
                board.write_entry(
                    f"e{i}", BlackboardEntry(predicate="less_than_3", measurement=i % 10)
                )
    return board, controller


def w1_app(context: AppContext) -> Controller:
    """W1 as a ``pybb worker`` application (``--app w1``): its controller, no entries written.

    Option ``max_cycles`` (default 1000) is the controller's cycle limit.
    """
    max_cycles = int(context.options.get("max_cycles", "1000"))
    _, controller = w1(
        0, context.store, board_id=context.board_id, max_cycles=max_cycles, write=False
    )
    return controller


def w1_expected(n: int) -> dict[str, int]:
    """How W1 must end: per outcome, the number of entries (computed, not recorded)."""
    counts = {"pass": 0, "decrement": 0, "zero_even": 0, "escalated": 0}
    for i in range(n):
        m = i % 10
        if m < 3:
            counts["pass"] += 1
        elif m - 3 < 3:
            counts["decrement"] += 1
        elif m % 2 == 0:
            counts["zero_even"] += 1
        else:
            counts["escalated"] += 1
    return counts


def w1_outcomes(board: Blackboard) -> dict[str, int]:
    """How a W1 board ended, read from its entries' histories on the board."""
    counts = {"pass": 0, "decrement": 0, "zero_even": 0, "escalated": len(board.escalate)}
    for entry in board.entries.values():
        if not entry.ks_history:
            counts["pass"] += 1
        elif "zero_even" in entry.ks_history:
            counts["zero_even"] += 1
        else:
            counts["decrement"] += 1
    return counts

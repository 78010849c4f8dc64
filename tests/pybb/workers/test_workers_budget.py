"""Issue 7: escalations from four worker processes never exceed a buddhi budget ceiling.

W1 with 80 entries escalates 16 of them; four ``pybb worker`` processes share the run,
each escalating the entries it holds, all at about the same time. Every escalation goes
through ``pybb.supervision`` and buddhi, whose budget lives on the run's own board on
PostgreSQL (``buddhi.board.BoardStore``: a compare-and-set on one premise). With a
ceiling of k: exactly min(k, 16) asks, the rest DENIED at the ceiling, each escalation
decided once, and the budget charged exactly once per ask. The negative control's
budget admits everything: the same checker must see the overshoot.
"""

from __future__ import annotations

from collections import Counter

import pytest
from workers_support import PgRun, finish, pg_run, start_worker

from blackboard import BoardReader
from buddhi.board import BUDGET_PREMISE
from pybb import BlackboardEntry
from pybb.human import ASKS
from pybb.supervision import SUPERVISION, supervised_blackboard

__all__ = ["pg_run"]

pytestmark = pytest.mark.postgres

N, ESCALATED = 80, 16  # W1 escalates the entries whose measurement is 7 or 9


def run(pg_run: PgRun, board: str, ceiling: int, budget: str = "board") -> BoardReader:
    blackboard = supervised_blackboard(pg_run.url, board)
    blackboard.write_entries(
        {f"e{i}": BlackboardEntry(predicate="less_than_3", measurement=i % 10) for i in range(N)}
    )
    options = {"ceiling": str(ceiling), "budget": budget, "delay": "0.005"}
    workers = [
        start_worker(pg_run.url, board, "worker_apps:supervised_w1", name=f"s{i}", batch=4,
                     options=options)
        for i in range(4)
    ]  # fmt: skip
    lines = finish(workers)
    assert all("settled" in line for line in lines), lines
    working = [line for line in lines if " 0 entries settled" not in line]
    assert len(working) >= 2, f"escalations came from one process only: {lines}"
    blackboard.refresh()
    return blackboard.model.reader


def overspending(reader: BoardReader, ceiling: int) -> list[str]:
    """What breaks "min(k, 16) asks, the rest denied, each decided and charged once"."""
    problems = []
    decisions = [c.content for c in reader.read_level(SUPERVISION)]
    decisions = [d for d in decisions if d["kind"] == "decision"]
    twice = [k for k, n in Counter(d["key"] for d in decisions).items() if n > 1]
    if twice or len(decisions) != ESCALATED:
        problems.append(f"{len(decisions)} decisions for {ESCALATED} escalations ({twice})")
    asks = len(reader.read_level(ASKS))
    dispositions = Counter(d["disposition"] for d in decisions)
    if asks != min(ceiling, ESCALATED) or dispositions["ESCALATED"] != asks:
        problems.append(f"{asks} asks, {dict(dispositions)}: the ceiling is {ceiling}")
    if dispositions["DENIED"] != ESCALATED - min(ceiling, ESCALATED):
        problems.append(f"{dispositions['DENIED']} denied with a ceiling of {ceiling}")
    spent = reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
    if spent != asks or spent > ceiling:
        problems.append(f"the budget charged {spent} for {asks} asks (ceiling {ceiling})")
    return problems


@pytest.mark.parametrize("ceiling", [5, 12])
def test_escalations_from_four_workers_never_exceed_the_ceiling(
    pg_run: PgRun, ceiling: int
) -> None:
    reader = run(pg_run, f"budget-{ceiling}", ceiling)
    assert overspending(reader, ceiling) == []


def test_negative_control_a_budget_that_never_refuses_is_caught(pg_run: PgRun) -> None:
    reader = run(pg_run, "budget-broken", 5, budget="never-refuses")
    assert any("the ceiling is 5" in p for p in overspending(reader, 5))

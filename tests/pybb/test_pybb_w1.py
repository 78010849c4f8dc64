"""W1's exact counts, and a cycle that costs what its work costs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pybb_sources import Dec

from pybb import Blackboard, BlackboardEntry, Controller, HaltReason
from pybb._engine.projection import Projection
from pybb.workloads import w1, w1_expected, w1_outcomes


def test_w1_ends_with_the_exact_counts(local_store_spec: Any) -> None:
    n = 10_000
    board, controller = w1(n, local_store_spec.open())
    summary = controller.run()
    assert w1_expected(n) == {"pass": 3000, "decrement": 3000, "zero_even": 2000, "escalated": 2000}
    assert w1_outcomes(board) == w1_expected(n)
    assert (summary.halted, summary.good, summary.escalated) == (HaltReason.SETTLED, 8000, 2000)
    # one route call routes all 10,000 entries
    assert controller.routes == {} and list(controller.predicate_routes) == ["less_than_3"]
    records = board.model.reader.log()
    regions = Counter(r.region for r in records)
    assert regions["pybb.escalations"] == 2000 and regions["pybb.entries"] == n
    attempts = Counter(
        (r.content["key"], r.content["source"]) for r in records if r.region == "pybb.attempts"
    )
    assert max(v for (k, s), v in attempts.items() if s == "decrement") == 3
    assert max(v for (k, s), v in attempts.items() if s == "zero_even") == 1
    assert board.get_entry("e9").measurement == 9 and board.get_entry("e8").measurement == 0
    assert board.get_entry("e5").measurement == 2 and board.get_entry("e5").ks_history == {
        "decrement": 3
    }


@pytest.mark.parametrize("idle_sources", [0, 20])
def test_a_cycle_costs_the_entries_that_need_work_not_entries_times_sources(
    monkeypatch: pytest.MonkeyPatch, idle_sources: int
) -> None:
    calls: Counter[str] = Counter()
    needs_work = Projection.needs_work

    def counted(self: Projection, key: str, component: str | None) -> bool:
        calls["needs_work"] += 1
        return needs_work(self, key, component)

    monkeypatch.setattr(Projection, "needs_work", counted)
    board = Blackboard()
    controller = Controller(board)

    def less_than_3(m: int) -> bool:
        calls["predicate"] += 1
        return m < 3

    controller.register_predicate("less_than_3", less_than_3)
    for i in range(idle_sources):
        controller.add_ks(Dec(f"idle{i}", 1))
    settled, working, attempts = 5000, 3, 40
    controller.route_predicate("less_than_3", [Dec("dec", attempts)])
    with board.batch():
        for i in range(settled):
            board.write_entry(f"ok{i}", BlackboardEntry(predicate="less_than_3", measurement=0))
        for i in range(working):
            board.write_entry(f"w{i}", BlackboardEntry(predicate="less_than_3", measurement=100))
    summary = controller.run()
    assert summary.cycles == attempts and summary.attempts == working * attempts
    # every entry judged once, then once per attempt: nothing re-judges settled entries
    assert calls["predicate"] == settled + working + working * attempts
    # the sources look only at their partitions: the three working entries, per cycle
    assert calls["needs_work"] == working * attempts

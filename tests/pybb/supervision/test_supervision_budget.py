"""The budget: with a ceiling of k asks, k asks are delivered and the rest are DENIED."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from supervision_fixtures import *  # noqa: F403
from supervision_support import budget_problems, decisions, open_run, settings, write

from blackboard.stores import Store
from buddhi import Admission, AdmissionRequest
from buddhi.board import BoardStore
from pybb.supervision import Supervisor


@pytest.mark.parametrize("ceiling", [0, 1, 3])
def test_a_ceiling_of_k_asks_delivers_k_and_denies_the_rest_with_scope_and_bar(
    backend: Callable[[], Store], ceiling: int
) -> None:
    run = open_run(backend(), settings(ceiling=ceiling))
    write(run.blackboard, {f"dev-{i}": None for i in range(7)})
    run.run()
    reader = run.blackboard.model.reader
    assert budget_problems(reader, ceiling, escalated=7) == []
    found = decisions(reader)
    denied = [key for key, row in found.items() if row["disposition"] == "DENIED"]
    assert denied == [f"dev-{i}" for i in range(ceiling, 7)]  # first come, first asked
    assert len(run.open_asks()) == ceiling
    run.close()


class AlwaysAdmits(BoardStore):
    """The negative control: a budget store that never refuses."""

    def admit(self, request: AdmissionRequest) -> Admission:
        return Admission(request.item_id, request.scope, 0.0, 0.0, request.confidence, 0, 0)


def test_negative_control_a_budget_that_never_refuses_is_caught(
    backend: Callable[[], Store],
) -> None:
    run = open_run(backend(), settings(ceiling=3))
    broken = AlwaysAdmits.on_model(run.blackboard.model)
    run.controller._observers.all.remove(run.supervisor)  # swap in a supervisor on the broken store
    run.supervisor = Supervisor(run.blackboard, settings(ceiling=3), store=broken)
    run.supervisor.bind(run.controller)
    write(run.blackboard, {f"dev-{i}": None for i in range(7)})
    run.run()
    problems = budget_problems(run.blackboard.model.reader, 3, escalated=7)
    assert any("7 asks on the board" in p for p in problems), problems
    run.close()

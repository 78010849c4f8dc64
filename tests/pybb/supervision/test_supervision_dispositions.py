"""Every escalated entry gets buddhi's decision on the board, whichever of the seven it is."""

from __future__ import annotations

from collections.abc import Callable

from supervision_fixtures import *  # noqa: F403
from supervision_support import (
    decisions,
    level,
    open_run,
    plain_controller,
    settings,
    write,
)

from blackboard.stores import Store
from buddhi import Decision
from pybb import Stage
from pybb.human import ASKS, ask_state
from pybb.supervision import SUPERVISION, ask_id_for, supervision_records


def test_every_disposition_is_written_on_the_board_with_its_reasons(
    backend: Callable[[], Store],
) -> None:
    # Escalated and fixed on the board while no supervisor listened: RESOLVED_OOB later.
    plain = plain_controller(backend())
    write(plain.blackboard, {"fixed": None})
    plain.run()
    plain.resolve("fixed", "rebooted", by="ops:script")
    plain.blackboard.close()

    run = open_run(backend(), settings(ceiling=1), attempts=3)
    write(
        run.blackboard,
        {
            "noise": {"mode": "noise"},
            "settled": {"score": 0.5},
            "confident": {"confidence": 0.95},
            "bad": {"mode": "bad-ask"},
            "asked": None,
            "denied": None,
        },
    )
    run.run()
    reader = run.blackboard.model.reader
    found = decisions(reader)
    assert {key: row["disposition"] for key, row in found.items()} == {
        "fixed": "RESOLVED_OOB",
        "noise": "DISCARDED",
        "settled": "CONVERGED",
        "confident": "MODEL_HANDLED",
        "bad": "INVALID_ASK",
        "asked": "ESCALATED",
        "denied": "DENIED",
    }
    for key, row in found.items():
        escalation = run.blackboard.get_escalation(key)
        assert escalation is not None
        assert row["id"] == f"decision:{escalation.id}"
        assert row["reason"] and row["scope"] == "global"
        assert row["trail"][-1] == row["decided_by"]
    assert found["fixed"]["details"]["resolution"]["by"] == "ops:script"
    assert found["fixed"]["decided_by"] == Decision.CHECK_OOB_RESOLUTION.value
    assert found["settled"]["details"]["convergence"]["counted"] == 3
    assert found["confident"]["details"]["route"] == {"confidence": 0.95, "threshold": 0.8}
    assert "offers 1 options" in found["bad"]["details"]["defects"][0]
    assert found["denied"]["details"]["denied"] == {
        "refused": "budget_exhausted",
        "scope": "global",
        "limit": "ceiling",
        "spent": 1,
        "ceiling": 1,
        "required": found["denied"]["details"]["denied"]["required"],
        "confidence": 1.0,
    }
    assert "has spent 1 of 1" in found["denied"]["reason"]
    asked = run.blackboard.get_escalation("asked")
    assert asked is not None
    assert found["asked"]["ask_id"] == ask_id_for(asked)
    assert found["asked"]["details"]["admission"]["spent"] == 1
    # Exactly one ask, the escalated one's, with the tier's report as text and as data.
    (posted,) = level(reader, ASKS)
    assert posted["ask_id"] == ask_id_for(asked)
    assert posted["entry"] == "asked" and posted["scope"] == "global"
    assert posted["report_data"]["escalation"] == asked.id
    assert "escalated by tier (exhausted)" in posted["report"]
    assert sum(o["recommended"] for o in posted["options"]) == 1
    state = ask_state(reader, posted["ask_id"])
    assert state is not None and 0.0 <= state.ask.confidence <= 1.0
    # Only the asked entry is waiting on a person; the others stay escalated, decided.
    assert run.blackboard.get_entry("asked").stage is Stage.ESCALATED
    assert [r.key for r in supervision_records(reader)] == list(found)
    run.close()


def test_supervising_again_changes_nothing(backend: Callable[[], Store]) -> None:
    run = open_run(backend(), settings(ceiling=2))
    write(run.blackboard, {f"e{i}": None for i in range(4)})
    run.run()
    reader = run.blackboard.model.reader
    before = reader.head()
    for key in run.blackboard.escalate:
        escalation = run.blackboard.get_escalation(key)
        assert escalation is not None
        run.supervisor.supervise(escalation)  # a redelivery
    run.supervisor.sweep()
    run.run()
    assert reader.head() == before
    rows = level(reader, SUPERVISION)
    assert len(rows) == 4 and len(level(reader, ASKS)) == 2
    run.close()

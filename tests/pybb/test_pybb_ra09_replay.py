"""RA-09 ``replay_golden_histories``: recorded runs replay to the same board, decision by decision.

``golden/run-*.json`` were recorded by ``golden/make_golden.py``: each is a scenario (its
entries, sources from a fixed menu, routes, scripted answers), the board digest the run
reached, and the controller's decisions in order. Every fixture is replayed through the
current code on a fresh board and must reproduce both exactly. Negative control: a
controller whose success handoff restores the component it should keep must be caught.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pybb_golden import SCHEMA, replay

from pybb import Controller

GOLDEN = sorted((Path(__file__).parent / "golden").glob("run-*.json"))


def load(path: Path) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads(path.read_text())
    assert fixture["schema"] == SCHEMA, f"{path.name}: schema {fixture['schema']} needs a migration"
    return fixture


def test_there_are_fifty_golden_runs() -> None:
    assert len(GOLDEN) >= 50


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_ra09_a_recorded_run_replays_to_the_same_board(path: Path) -> None:
    fixture = load(path)
    replayed = replay(fixture["scenario"])
    assert replayed["decisions"] == fixture["decisions"]
    assert replayed["summary"] == fixture["summary"]
    assert replayed["digest"] == fixture["digest"]


class RestoresOnSuccess(Controller):
    """Negative control: success handoff restores the component instead of keeping the fix."""

    def _advance_ready(self) -> None:
        state = self.blackboard._state
        for key in list(state.ready):
            if key in state.ready:
                self._advance(key, restore=True)


def test_ra09_negative_control_a_changed_handoff_is_caught() -> None:
    mismatched = [
        path.name
        for path in GOLDEN
        if replay(load(path)["scenario"], RestoresOnSuccess)["digest"] != load(path)["digest"]
    ]
    assert mismatched, "no golden run noticed success handoffs that restore"

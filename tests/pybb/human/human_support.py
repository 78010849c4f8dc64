"""Helpers of the human-loop tests: asks carrying hostile text, and a board to put them on."""

from __future__ import annotations

from pathlib import Path

from blackboard import Level, Model, create_model
from pybb.human import HUMAN_REGIONS, Ask, Option, answer_rule, compose_rules

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "[click me](javascript:alert(1))",
]


def make_ask(ask_id: str, *, to: tuple[str, ...] = (), hostile: int = 0) -> Ask:
    evil = HOSTILE[hostile % len(HOSTILE)]
    return Ask(
        ask_id=ask_id,
        entry=f"entry {evil}",
        subject=f"device-{evil}",
        title=f"Digest mismatch {evil}",
        report=f"PCR 7 differs\n{evil}\n{HOSTILE[(hostile + 1) % len(HOSTILE)]}",
        options=(
            Option("accept", f"Accept {evil}", recommended=True, detail=evil),
            Option("quarantine", "Quarantine the device"),
            Option("remeasure", "Re-measure"),
        ),
        confidence=0.8,
        scope="fleet/site-a",
        report_data={"pcr": 7, "html": evil},
        to=to,
    )


def open_board(path: Path, *, rule: bool = True) -> Model:
    return create_model(
        regions=[*HUMAN_REGIONS, Level("notes")],
        admission_rule=compose_rules(answer_rule) if rule else None,
        store=f"sqlite:///{path}",
        board_id="run",
    )

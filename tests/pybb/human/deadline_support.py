"""Helpers of the deadline tests: the race board, and running N processes against it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from human_support import make_ask

from blackboard import (
    Accept,
    AdmissionRule,
    BoardReader,
    Level,
    Model,
    ProposedWrite,
    Reject,
    create_model,
)
from pybb.human import (
    ANSWERS,
    DEADLINE_BY,
    HUMAN_REGIONS,
    DeadlinePolicy,
    answer_rule,
    compose_rules,
    post_ask,
)

HERE = Path(__file__).resolve().parent
CHILD = HERE / "deadline_child.py"
CREATED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
POLICY = DeadlinePolicy(after=timedelta(hours=1), default="quarantine")
DUE = CREATED + timedelta(hours=1)
ASK_ID = "race-1"


def _widen(rule: AdmissionRule) -> AdmissionRule:
    """The racy variant's rule: judge, then dawdle before the write lands.

    The pause stands for any delay between the read and the write (a slow disk, a
    busy core); it only makes the race the real code must survive frequent.
    """

    def slow(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        verdict = rule(proposed, reader)
        time.sleep(0.05)
        return verdict

    return slow


def open_race_board(url: str, *, racy: bool = False) -> Model:
    """The race's board; ``racy``: ``answers`` declared without its unique constraint."""
    regions = list(HUMAN_REGIONS)
    rule = compose_rules(answer_rule)
    if racy:
        regions = [Level(ANSWERS) if r.name == ANSWERS else r for r in regions]
        rule = _widen(rule)
    return create_model(regions=regions, admission_rule=rule, store=url, board_id="race")


def prepare(url: str, *, racy: bool) -> None:
    """Create the board with one ask, made at ``CREATED``."""
    model = open_race_board(url, racy=racy)
    try:
        post_ask(model.control, replace(make_ask(ASK_ID), created_at=CREATED))
    finally:
        model.close()


def race(url: str, ready: Path, processes: int, *, racy: bool) -> list[int]:
    """Run ``processes`` children on the board at once; each one's count of defaults."""
    ready.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), url, str(ready), str(n), "racy" if racy else "real"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(processes)
    ]
    limit = time.monotonic() + 120
    while len(list(ready.glob("ready-*"))) < processes and time.monotonic() < limit:
        if any(c.poll() not in (None, 0) for c in children):
            break
        time.sleep(0.02)
    (ready / "go").touch()
    counts = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        counts.append(int(out.strip()))
    return counts


def defaults_on_board(url: str, *, racy: bool) -> int:
    """How many deadline defaults the board holds for the ask."""
    model = open_race_board(url, racy=racy)
    try:
        rows = model.reader.read_level(ANSWERS)
        return sum(1 for r in rows if r.content.get("by") == DEADLINE_BY)
    finally:
        model.close()

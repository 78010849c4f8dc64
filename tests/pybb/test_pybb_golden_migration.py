"""RA-09's golden runs across a change of record format: schema 1 migrates to schema 2.

Schema 2 (docs/adr/0026) folds a new entry's first verdict into its dispatch and a
failure handoff's restore into the handoff. ``golden/schema-1/`` keeps the runs as the
code before that change recorded them, each with its board's log; ``golden/`` holds the
same scenarios recorded by the current code. The migration must turn every old log into
exactly the new one, and a board that still holds the old records must run on exactly as
its migrated twin does, wherever its log was cut.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pybb_golden import (
    SCHEMA,
    LogRecord,
    board_log,
    decisions,
    fixture_text,
    migrate_log,
    replay,
    write_log,
)

from pybb import Blackboard, Controller

HERE = Path(__file__).parent / "golden"
OLD = sorted((HERE / "schema-1").glob("run-*.json"))


def fixture(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def twin(path: Path) -> dict[str, Any]:
    """The schema-2 fixture of the same scenario."""
    return fixture(HERE / path.name)


def test_every_old_run_has_its_new_twin() -> None:
    assert len(OLD) >= 50
    for path in OLD:
        old, new = fixture(path), twin(path)
        assert (old["schema"], new["schema"]) == (1, SCHEMA) == (1, 2)
        assert old["scenario"] == new["scenario"], path.name


@pytest.mark.parametrize("path", OLD, ids=[p.stem for p in OLD])
def test_an_old_log_is_the_run_it_recorded(path: Path) -> None:
    """The kept logs are genuine: written to a board, each gives its run's digest."""
    old = fixture(path)
    board, _ = write_log(old["log"], old["scenario"])
    assert board.digest() == old["digest"]
    assert decisions(board) == old["decisions"]
    assert board_log(board) == old["log"]


@pytest.mark.parametrize("path", OLD, ids=[p.stem for p in OLD])
def test_the_migrated_log_is_the_run_the_new_code_records(path: Path) -> None:
    old, new = fixture(path), twin(path)
    migrated = migrate_log(old["log"])
    assert migrated == new["log"]
    board, _ = write_log(migrated, old["scenario"])
    assert board.digest() == new["digest"]
    assert decisions(board) == new["decisions"]
    assert migrate_log(migrated) == migrated  # a schema-2 log is left as it is


@pytest.mark.parametrize("path", OLD, ids=[p.stem for p in OLD])
def test_an_old_board_runs_on_as_its_migrated_twin(path: Path) -> None:
    """Cut anywhere the formats differ, an old board reads and goes on as its migrated twin.

    The cuts fall before every cycle record and between every pair of records the new
    format folds (a verdict and its dispatch, a restore and its handoff), so the old
    board may hold a verdict not yet dispatched or a restore without its handoff: what
    the projection makes of the old records must be what it makes of the folded ones.
    """
    old = fixture(path)
    log: list[LogRecord] = old["log"]
    cuts = [i for i, r in enumerate(log) if r[2] in _CUT_BEFORE and i > 0] + [len(log)]
    for cut in cuts:
        ran = [
            _run_on(log[:cut], old["scenario"]),
            _run_on(migrate_log(log[:cut]), old["scenario"]),
        ]
        assert ran[0] == ran[1], (path.name, cut)


_CUT_BEFORE = {"pybb.cycle", "pybb.dispatches", "pybb.handoffs"}


def _run_on(log: list[LogRecord], scenario: dict[str, Any]) -> tuple[Any, ...]:
    board, controller = write_log(log, scenario)
    summary = controller.run()
    written = [row[1:] for row in decisions(board)[len(log) :]]  # what the run wrote
    entries = {key: board.get_entry(key) for key in sorted(board.entries)}
    escalated = sorted(board.get_escalate())
    return written, entries, escalated, summary.halted, summary.good, summary.escalated


@pytest.mark.parametrize("path", OLD, ids=[p.stem for p in OLD])
def test_an_old_board_cut_before_its_dispatches_ends_as_the_new_code_runs(path: Path) -> None:
    """An old board whose first cycle committed its verdicts and no dispatch yet (a cycle
    committed in parts, cut short between its steps), run on from there with the
    recorded answers, ends with the entries, escalations and summary of the new code's
    run: the legacy dispatch step places its entries as a folded dispatch would."""
    old, new = fixture(path), twin(path)
    log: list[LogRecord] = old["log"]
    cut = next(i for i, r in enumerate(log) if r[2] == "pybb.dispatches")
    assert all(r[2] != "pybb.dispatches" for r in log[:cut])
    built = write_log(log[:cut], old["scenario"])
    replayed = replay(old["scenario"], built=built)
    assert replayed["summary"] == new["summary"]
    assert _ending(*built) == _ending(*write_log(new["log"], new["scenario"]))


def _ending(board: Blackboard, controller: Controller) -> tuple[Any, ...]:
    controller.take_in()  # a board written by ``write_log`` is read when asked
    entries = {key: board.get_entry(key) for key in sorted(board.entries)}
    escalations = {}
    for key in sorted(board.get_escalate()):
        escalation = board.get_escalation(key)
        escalations[key] = None if escalation is None else escalation.report
    return entries, escalations


def test_negative_control_restores_kept_apart_are_caught() -> None:
    """A migration that folds the verdicts but leaves each restore apart does not pass."""
    caught, with_restores = [], []
    for path in OLD:
        new = twin(path)
        migrated = _restores_apart(migrate_log(fixture(path)["log"]))
        if any(row[2] == "pybb.handoffs" and "restore" in row[4] for row in new["log"]):
            with_restores.append(path.name)
            board, _ = write_log(migrated, new["scenario"])
            if board.digest() != new["digest"] or decisions(board) != new["decisions"]:
                caught.append(path.name)
    assert with_restores and caught == with_restores


def _restores_apart(log: list[LogRecord]) -> list[LogRecord]:
    """Each folded restore split out again, just before its handoff, as schema 1 had it."""
    split: list[LogRecord] = []
    for record in log:
        content = record[4]
        if record[2] == "pybb.handoffs" and "restore" in content:
            restored = {"key": content["key"], **content["restore"]}
            split.append([0, "level", "pybb.restores", "controller", restored, None, None])
            content = {k: v for k, v in content.items() if k != "restore"}
        split.append([record[0], *record[1:4], content, *record[5:]])
    return [[sequence, *record[1:]] for sequence, record in enumerate(split, start=1)]


@pytest.mark.parametrize("path", [*OLD, *sorted(HERE.glob("run-*.json"))], ids=lambda p: p.stem)
def test_fixture_files_are_in_their_canonical_form(path: Path) -> None:
    """One line per decision and record, as ``fixture_text`` writes them: diffs stay readable."""
    assert path.read_text() == fixture_text(fixture(path))

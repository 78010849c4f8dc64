"""Redelivery after a crash creates no second ask and no second budget charge.

The fault loop of RELIABILITY.md (SQLite's method): crash the process at its N-th board
write, for N = 1, 2, ... until a run completes, once before the write lands and once
after it landed but before anyone was told. Each time a new process opens the same
SQLite file and runs to the end (the controller redelivers the escalations it may not
have told anyone about). Then: one decision per escalated entry, at most one ask and
one charge per escalation, and the budget spent equals the asks delivered. A SIGKILL
variant kills a real process at a random moment. Negative controls: a budget without
the once-per-escalation ledger, and an ask id that is not derived from the escalation.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from supervision_support import charges, decisions, level, open_run, settings, write

from blackboard import BoardReader, Control
from buddhi.board import BUDGET_PREMISE
from pybb import Escalation
from pybb.human import ASKS
from pybb.supervision import _budget, _transport
from storekit import sized

ENTRIES = 5
CEILING = 3


class Crash(BaseException):
    """The process dies here (nothing above catches a BaseException that is not Exception)."""


@contextmanager
def crash_at(control: Control, n: int, *, landed: bool) -> Iterator[None]:
    """Make the n-th write through ``control`` crash, before or after it lands."""
    count = [0]
    originals = {name: getattr(control, name) for name in ("write_all", "_write_one")}

    def wrap(name: str) -> Callable[..., Any]:
        real = originals[name]

        def write(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == n and not landed:
                raise Crash
            result = real(*args, **kwargs)
            if count[0] == n:
                raise Crash
            return result

        return write

    for name in originals:
        setattr(control, name, wrap(name))
    try:
        yield
    finally:
        for name, real in originals.items():
            setattr(control, name, real)


def problems(reader: BoardReader) -> list[str]:
    """Why the board breaks one decision, one ask and one charge per escalation."""
    found: list[str] = []
    rows = decisions(reader)
    if sorted(rows) != [f"e{i}" for i in range(ENTRIES)]:
        found.append(f"decisions for {sorted(rows)}")
    found += [f"{key} decided twice" for key, row in rows.items() if isinstance(row, list)]
    asks = Counter(a["report_data"]["escalation"] for a in level(reader, ASKS))
    found += [f"{e} asked {n} times" for e, n in asks.items() if n > 1]
    found += [f"{item} charged {n} times" for item, n in charges(reader).items() if n > 1]
    spent = reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
    if spent != sum(asks.values()) or spent != min(ENTRIES, CEILING):
        found.append(f"spent {spent} for {sum(asks.values())} asks")
    return found


def crash_then_recover(path: Path, n: int, *, landed: bool) -> tuple[bool, list[str]]:
    url = f"sqlite:///{path}"
    run = open_run(url, settings(ceiling=CEILING))
    write(run.blackboard, {f"e{i}": None for i in range(ENTRIES)})
    crashed = False
    try:
        with crash_at(run.blackboard.model.control, n, landed=landed):
            run.run()
    except Crash:
        crashed = True
    finally:
        run.close()
    run = open_run(url, settings(ceiling=CEILING))
    run.run()
    found = problems(run.blackboard.model.reader)
    run.close()
    return crashed, found


@pytest.mark.parametrize("landed", [False, True], ids=["before-the-write", "after-the-write"])
def test_a_crash_at_every_write_then_a_restart_leaves_one_ask_and_one_charge(
    tmp_path: Path, landed: bool
) -> None:
    n, crashes = 1, 0
    while True:
        crashed, found = crash_then_recover(tmp_path / f"{n}.db", n, landed=landed)
        assert found == [], f"crash at write {n}: {found}"
        if not crashed:
            break
        crashes, n = crashes + 1, n + 1
    assert crashes >= ENTRIES * 2  # every escalation's admission, ask and decision was hit


def test_negative_control_a_budget_without_its_ledger_charges_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _budget.OncePerItemStore.__init__

    def forgetful(self: Any, inner: Any, **kwargs: Any) -> None:
        real(self, inner, **{**kwargs, "ledger": None})

    monkeypatch.setattr(_budget.OncePerItemStore, "__init__", forgetful)
    caught = [found for n in range(1, 30) for found in [_found(tmp_path, n)] if found]
    assert any("charged 2 times" in p for found in caught for p in found), caught


def test_negative_control_an_ask_id_not_derived_from_the_escalation_asks_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fresh(escalation: Escalation) -> str:
        return f"ask-{random.getrandbits(64):x}"

    monkeypatch.setattr(_transport, "ask_id_for", fresh)
    caught = [found for n in range(1, 30) for found in [_found(tmp_path, n)] if found]
    assert any("asked 2 times" in p for found in caught for p in found), caught


def _found(tmp_path: Path, n: int) -> list[str]:
    return crash_then_recover(tmp_path / f"nc-{n}.db", n, landed=True)[1]


# -- SIGKILL of a real process -------------------------------------------------------------

CHILD = """
import sys
from pybb import ControllerObserver
from supervision_support import open_run, settings, write

class Progress(ControllerObserver):
    def on_escalated(self, escalation):
        print("supervised", escalation.key, flush=True)

run = open_run(sys.argv[1], settings(ceiling=int(sys.argv[3])))
run.controller.add_observer(Progress())  # after the supervisor: told once it is done
write(run.blackboard, {f"e{i}": None for i in range(int(sys.argv[2]))})
print("ready", flush=True)
run.run()
run.close()
print("done", flush=True)
"""


def test_sigkill_at_a_random_moment_then_a_restart_leaves_one_ask_and_one_charge(
    tmp_path: Path,
) -> None:
    rng = random.Random(6)
    entries, ceiling = 60, 40
    trials = sized(6, 60)
    killed = 0
    for trial in range(trials):
        url = f"sqlite:///{tmp_path / f'kill-{trial}.db'}"
        killed += _run_child(url, entries, ceiling, rng.randrange(entries - 10))
        run = open_run(url, settings(ceiling=ceiling))
        run.run()
        reader = run.blackboard.model.reader
        rows = decisions(reader)
        asks = Counter(a["report_data"]["escalation"] for a in level(reader, ASKS))
        spent = reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
        assert len(rows) == entries and not any(isinstance(r, list) for r in rows.values())
        assert set(asks.values()) == {1} and spent == sum(asks.values()) == ceiling
        assert set(charges(reader).values()) == {1}
        run.close()
        _check_integrity(url)
    assert killed >= trials - 1  # the kills landed mid-run, not after it


def _run_child(url: str, entries: int, ceiling: int, kill_after: int) -> bool:
    """Run the child; SIGKILL it once it has supervised ``kill_after`` escalations (it
    goes on working until the signal lands). Returns whether the kill cut its run short."""
    command = [sys.executable, "-c", CHILD, url, str(entries), str(ceiling)]
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as child:
        assert child.stdout is not None
        for _ in range(kill_after + 1):  # "ready", then one line per escalation supervised
            assert child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        return child.returncode == -signal.SIGKILL


def _pythonpath() -> str:
    here = Path(__file__).resolve().parent
    return os.pathsep.join([str(here), str(here.parents[1]), os.environ.get("PYTHONPATH", "")])


def _check_integrity(url: str) -> None:
    import sqlite3

    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()

"""RA-07 ``ks_exactly_once_and_escalation``: flaky sources, exact application, one escalation.

A source that, by a seeded roll per (entry, attempt), succeeds, raises, runs past its
timeout, or gets its worker (this very process) SIGKILLed, retried under a back-off
policy with ``max_attempts`` M. For every activation (entry):

* attempts <= M, numbered 1..k, each recorded once;
* a success is applied exactly once (one successful attempt, the fixed value kept, no
  attempt after it); an activation whose M attempts all fail is escalated exactly once,
  and one that succeeds never;
* back-off intervals are within 10 % of the policy (on a fake clock);
* an execution whose attempt is already on the board never runs again (side-effect
  ledger: no attempt executed after the generation that committed it);
* an answer given while the controller is down is applied exactly once after restart.

Each check has a negative control: a controller that allows M + 1 attempts, one that
tells an escalation twice, a resume that forgets attempts on the board, and a resume
that re-applies answers; each must be caught.
"""

from __future__ import annotations

import itertools
import json
import signal
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pybb_workloads import BACKOFF, Flaky, M, behaviour, ra07_controller, ra07_entries

from pybb import Blackboard, Controller, Stage
from pybb._engine.journal import Journal
from pybb._engine.projection import ATTEMPTS, ESCALATIONS, Projection
from pybb.testing import FakeClock, RecordingObserver
from storekit import sized

HERE = Path(__file__).parent
CHILD = HERE / "pybb_child.py"
ACTIVATIONS = sized(500, 10_000)
KILLED_ACTIVATIONS = sized(40, 400)


# -- the checker ------------------------------------------------------------------------------


ALLOWED = {
    # what the roll asked for -> how the board may record it. An attempt may always be
    # recorded as a timeout: on a loaded machine even a quick one can miss its deadline,
    # and the controller must then treat it as failed (counted below, and kept rare).
    "succeed": {"changed", "timeout"},
    "raise": {"error", "timeout"},
    "timeout": {"timeout"},
    "kill": {"error", "timeout"},  # the re-run after the kill raises
}


def activation_violations(records: list[Any], seed: int, keys: list[str]) -> list[str]:
    """What the board's records say went wrong with any activation."""
    attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    escalations: Counter[str] = Counter()
    for record in records:
        if record.region == ATTEMPTS:
            attempts[record.content["key"]].append(record.content)
        elif record.region == ESCALATIONS:
            escalations[record.content["key"]] += 1
    problems, late = [], 0
    for key in keys:
        made = attempts[key]
        problems += _attempt_problems(key, made, seed)
        late += sum(
            a["status"] == "timeout" and behaviour(seed, key, a["attempt"], True) != "timeout"
            for a in made
        )
        successes = [a for a in made if a.get("good_standing")]
        if len(successes) > 1 or (successes and successes[0] is not made[-1]):
            problems.append(f"{key}: {len(successes)} successes, not one ending its attempts")
        if successes and escalations[key]:
            problems.append(f"{key}: succeeded and was escalated {escalations[key]} times")
        if not successes and (len(made) != M or escalations[key] != 1):
            problems.append(
                f"{key}: {len(made)} failed attempts and {escalations[key]} escalations; "
                f"exhaustion after M = {M} escalates exactly once"
            )
    total = sum(len(a) for a in attempts.values())
    if late > max(3, total // 50):
        problems.append(f"{late} of {total} quick attempts missed their deadline")
    return problems


def _attempt_problems(key: str, made: list[dict[str, Any]], seed: int) -> list[str]:
    problems = []
    numbers = [a["attempt"] for a in made]
    if len(made) > M:
        problems.append(f"{key}: {len(made)} attempts, more than M = {M}")
    if numbers != list(range(1, len(made) + 1)):
        problems.append(f"{key}: attempts numbered {numbers}")
    for attempt in made:
        asked = behaviour(seed, key, attempt["attempt"], kills=True)
        if attempt["status"] not in ALLOWED[asked]:
            problems.append(
                f"{key}: attempt {attempt['attempt']} {asked} recorded {attempt['status']}"
            )
    return problems


def backoff_violations(records: list[Any]) -> list[str]:
    """Consecutive attempts on an entry more than 10 % off the policy's interval."""
    times: dict[str, list[datetime]] = defaultdict(list)
    for record in records:
        if record.region == ATTEMPTS:
            times[record.content["key"]].append(datetime.fromisoformat(record.content["at"]))
    problems = []
    for key, at in times.items():
        for n, (before, after) in enumerate(itertools.pairwise(at), start=1):
            want = BACKOFF.delay(n).total_seconds()
            got = (after - before).total_seconds()
            if abs(got - want) > 0.1 * want:
                problems.append(f"{key}: {got} s between attempts {n} and {n + 1}, policy {want} s")
    return problems


def delivery_violations(escalations: list[Any], records: list[Any]) -> list[str]:
    """Escalations told other than exactly once (ignoring redeliveries, which carry the same id)."""
    on_board = {r.content["key"] for r in records if r.region == ESCALATIONS}
    told = Counter(e.key for e in escalations if not e.redelivered)
    ids = Counter(e.id for e in escalations if not e.redelivered)
    problems = [f"{key} told {n} times" for key, n in told.items() if n != 1]
    problems += [f"escalation id {i} told {n} times" for i, n in ids.items() if n != 1]
    if set(told) != on_board:
        problems.append(f"told {sorted(told)} but the board escalated {sorted(on_board)}")
    return problems


# -- in-process: succeed, raise, time out -----------------------------------------------------


def run_activations(
    n: int, seed: int, controller_class: type[Controller] = Controller
) -> tuple[Blackboard, Flaky, RecordingObserver]:
    board = Blackboard()
    source = Flaky(seed, None, kills=False)
    observer = RecordingObserver()
    controller = ra07_controller(board, source, FakeClock())
    controller.__class__ = controller_class
    controller.add_observer(observer)
    board.write_entries(ra07_entries(n))
    controller.run()
    return board, source, observer


def all_violations(
    board: Blackboard, source: Flaky, observer: RecordingObserver, seed: int
) -> list[str]:
    records = list(board.model.reader.log())
    keys = list(ra07_entries(len(board.get_all_entries()) + len(board.get_escalate())))
    executions = Counter(source.executions)
    problems = activation_violations(records, seed, keys)
    problems += backoff_violations(records)
    problems += delivery_violations(observer.escalations, records)
    problems += [f"attempt {a} executed {c} times" for a, c in executions.items() if c != 1]
    return problems


def test_ra07_attempts_apply_once_and_exhaustion_escalates_once() -> None:
    seed = 7
    board, source, observer = run_activations(ACTIVATIONS, seed)
    assert all_violations(board, source, observer, seed) == []
    statuses = Counter(
        r.content["status"] for r in board.model.reader.log() if r.region == ATTEMPTS
    )
    assert statuses["timeout"] and statuses["error"] and statuses["changed"]  # all three happened
    assert 0 < len(board.get_escalate()) < ACTIVATIONS


class AllowsOneMore(Controller):
    """Negative control: compares the attempt count with > instead of >=."""

    def _run_sources(self) -> None:
        for source in self.knowledge_sources:
            source.max_attempts += 1
        try:
            super()._run_sources()
        finally:
            for source in self.knowledge_sources:
                source.max_attempts -= 1


class TellsTwice(Controller):
    """Negative control: tells each escalation twice."""

    def _escalate(self, entry: Any, source: str | None, reason: str) -> None:
        super()._escalate(entry, source, reason)
        self._escalated.append(entry.key)


class AppliesTwice(Controller):
    """Negative control: applies a successful attempt a second time."""

    def _attempt(self, source: Any, entry: Any) -> None:
        super()._attempt(source, entry)
        pending = self.blackboard.journal._pending or []
        last = pending[-1] if pending else None
        if last is not None and last.region == ATTEMPTS and last.content.get("good_standing"):
            again = {**last.content, "attempt": last.content["attempt"] + 1}
            self.blackboard.journal.emit(ATTEMPTS, last.writer, again, None)


@pytest.mark.parametrize(
    ("mutant", "symptom"),
    [
        (AllowsOneMore, "more than M"),
        (TellsTwice, "told 2"),
        (AppliesTwice, "2 successes"),
    ],
)
def test_ra07_negative_controls_in_process_are_caught(
    mutant: type[Controller], symptom: str
) -> None:
    seed = 7
    board, source, observer = run_activations(60, seed, mutant)
    problems = all_violations(board, source, observer, seed)
    assert any(symptom in p for p in problems), problems


# -- out of process: the worker is killed -----------------------------------------------------


def committed_attempts(db: Path) -> set[tuple[str, int]]:
    if not db.exists():
        return set()
    with closing(sqlite3.connect(db)) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        if "bb_records" not in tables:
            return set()
        rows = conn.execute(
            "SELECT payload FROM bb_records WHERE region = ?", (ATTEMPTS,)
        ).fetchall()
    return {(p["key"], p["attempt"]) for p in (json.loads(r) for (r,) in rows)}


def run_until_done(tmp_path: Path, seed: int, n: int, variant: str) -> tuple[int, list[str]]:
    """Restart the child after every SIGKILL until it finishes; return kills and violations."""
    db, ledger = tmp_path / f"ra07-{variant}.db", tmp_path / f"ledger-{variant}.jsonl"
    committed_by: dict[tuple[str, int], int] = {}
    kills, problems = 0, []
    for generation in range(200):
        command = [sys.executable, str(CHILD), "ra07", str(db), str(ledger), str(generation)]
        command += [str(seed), str(n), "--variant", variant]
        child = subprocess.run(command, capture_output=True, cwd=HERE, timeout=300)
        for attempt in committed_attempts(db):
            committed_by.setdefault(attempt, generation)
        if child.returncode == -signal.SIGKILL:
            kills += 1
            continue
        assert child.returncode == 0, child.stderr.decode()
        break
    else:
        raise AssertionError("the activations never finished")
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    runs = Counter((d["key"], d["attempt"], d["gen"]) for d in lines if d["op"] == "exec")
    problems += [f"attempt {a} ran {c} times in one process" for a, c in runs.items() if c > 1]
    for (key, attempt, generation), _ in runs.items():
        if committed_by.get((key, attempt), generation) < generation:
            problems.append(f"attempt {(key, attempt)} re-executed after it was committed")
    return kills, problems


def test_ra07_a_killed_worker_reruns_only_uncommitted_attempts(tmp_path: Path) -> None:
    seed = 3
    kills, problems = run_until_done(tmp_path, seed, KILLED_ACTIVATIONS, "real")
    assert kills >= 5 and problems == []
    board = Blackboard(f"sqlite:///{tmp_path / 'ra07-real.db'}", "ra07")
    records = list(board.model.reader.log())
    assert activation_violations(records, seed, list(ra07_entries(KILLED_ACTIVATIONS))) == []
    escalated = {r.content["key"] for r in records if r.region == ESCALATIONS}
    ledger = [json.loads(x) for x in (tmp_path / "ledger-real.jsonl").read_text().splitlines()]
    told = {d["key"] for d in ledger if d["op"] == "escalated"}
    assert told == escalated  # every escalation told, at least once (deduplicated by id)
    board.close()


def test_ra07_negative_control_a_resume_that_reruns_committed_attempts_is_caught(
    tmp_path: Path,
) -> None:
    _, problems = run_until_done(tmp_path, 3, 20, "forgetful")
    assert any("re-executed after it was committed" in p for p in problems), problems


# -- an answer given while the controller is down ---------------------------------------------


class ReappliesJournal(Journal):
    def _rebuild(self) -> None:
        super()._rebuild()
        state: Projection = self._state
        for key, entry in state.entries.items():
            if entry.stage is Stage.RESOLVED:
                state.dirty[key] = None


class Reapplies(Blackboard):
    """Negative control: a resume that treats every resolution on the board as new."""

    journal_class = ReappliesJournal


def answer_while_down(tmp_path: Path, board_class: type[Blackboard]) -> list[str]:
    url, seed = f"sqlite:///{tmp_path / 'answer.db'}", 5

    def controller() -> tuple[Blackboard, Controller]:
        board = board_class(url, "answer")
        return board, ra07_controller(board, Flaky(seed, None, kills=False), FakeClock())

    board, ctl = controller()
    board.write_entries(ra07_entries(30))
    ctl.run()
    key = sorted(board.get_escalate())[0]
    board.close()  # the controller is down
    inbox = Blackboard(url, "answer", writer="inbox")
    answered_at = datetime(2026, 5, 1, tzinfo=UTC)
    inbox.resolve(key, "set to 0", by="human:dana", at=answered_at, measurement=0)
    problems = []
    for _ in range(3):  # restart, and the answer is delivered again, three times over
        inbox.resolve(key, "set to 0", by="human:dana", at=answered_at, measurement=0)
        board, ctl = controller()
        ctl.run()
        board.close()
    final = Blackboard(url, "answer")
    history = final.get_history(key)
    resolutions = [e for e in history if e.kind == "resolution"]
    after = [e for e in history if e.kind == "verdict" and e.sequence > resolutions[0].sequence]
    if len(resolutions) != 1 or len(after) != 1:
        problems.append(f"answer applied {len(resolutions)} times, evaluated {len(after)} times")
    entry = final.get_entry(key)
    if (entry.stage, entry.measurement, entry.good_standing) != (Stage.RESOLVED, 0, True):
        problems.append(f"entry ended {entry.stage} {entry.measurement} {entry.good_standing}")
    final.close()
    inbox.close()
    return problems


def test_ra07_an_answer_given_while_the_controller_is_down_is_applied_once(tmp_path: Path) -> None:
    assert answer_while_down(tmp_path, Blackboard) == []


def test_ra07_negative_control_a_resume_that_reapplies_answers_is_caught(tmp_path: Path) -> None:
    problems = answer_while_down(tmp_path, Reapplies)
    assert any("evaluated 3 times" in p or "evaluated 4 times" in p for p in problems), problems

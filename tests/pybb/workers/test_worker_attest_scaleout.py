"""README's "Scale out", as a newcomer runs it: submit, two workers, then the report.

Every step is the real command line in its own process on PostgreSQL: ``pybb attest
--submit`` writes a demo fleet's devices (and, with ``--inbox``, the human loop) and
attests nothing; the ``pybb worker`` command it prints is run twice, as printed; then
``pybb attest`` on the same board gives the report of one single-process run of the same
fleet without attesting anything again, and with ``--inbox`` serves the asks the
workers' escalations made and applies an answer posted to it. The board is read back
with plain psycopg.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers_support import (
    PgRun,
    child_environment,
    duplicate_applications,
    finish,
    pg_run,
)

from blackboard import attach
from buddhi.board import BUDGET_PREMISE
from pybb.attestation import Attestation, DeviceOutcome, generate_fleet
from pybb.supervision.attestation import DEFAULT_ASKS

__all__ = ["pg_run"]

pytestmark = pytest.mark.postgres

N = 60
BOARD = "fleet-1"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """One plain single-process run of the same demo fleet, in memory."""
    with Attestation(generate_fleet(N), board_id="single") as single:
        report = single.run()
    escalated = {r.device for r in report.devices if r.outcome is DeviceOutcome.ESCALATED}
    return {"counts": report.counts(), "escalated": escalated}


def attest(pg_run: PgRun, tmp_path: Path, *args: str, board: str = BOARD, demo: int = N) -> Any:
    command = [
        sys.executable, "-m", "pybb", "attest", "--demo", str(demo), "--store", pg_run.url,
        "--board-id", board, "--report", str(tmp_path / "report.json"), "--no-progress", *args,
    ]  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, env=child_environment(), cwd=tmp_path, timeout=120
    )


def submit(pg_run: PgRun, tmp_path: Path, *args: str) -> list[str]:
    """``pybb attest --submit``: the ``pybb worker`` command it printed, as words."""
    done = attest(pg_run, tmp_path, "--submit", *args)
    assert done.returncode == 0, done.stderr
    assert f"submitted {N} devices of fleet demo-{N}-seed-0 to board '{BOARD}'" in done.stdout
    line = next(line for line in done.stdout.splitlines() if "pybb worker" in line)
    words = shlex.split(line)
    assert words == ["pybb", "worker", "--store", pg_run.url, "--run", BOARD, "--app", "attest"]
    return words


def start_printed(words: list[str], name: str) -> subprocess.Popen[bytes]:
    """The printed command, run as printed (``pybb`` being this interpreter's)."""
    assert words[0] == "pybb"
    command = [sys.executable, "-m", "pybb", *words[1:], "--name", name, "--batch", "2"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_environment()
    )


def work(pg_run: PgRun, words: list[str]) -> None:
    lines = finish([start_printed(words, "m1"), start_printed(words, "m2")], timeout=60)
    assert all("settled" in line for line in lines), lines
    settled = [re.search(r"(\d+) entries settled", line) for line in lines]
    counts = [int(found[1]) if found else 0 for found in settled]
    # Both took part (a batch of 2 keeps the first from finishing before the second starts).
    assert sum(counts) >= N and min(counts) > 0, lines
    assert pg_run.claims(BOARD) and not any(h for h, _ in pg_run.claims(BOARD).values())


def attempts(pg_run: PgRun) -> int:
    return sum(1 for row in pg_run.rows(BOARD) if row[1] == "pybb.attempts")


def test_submit_two_workers_then_the_report_of_one_run(
    pg_run: PgRun, tmp_path: Path, reference: dict[str, Any]
) -> None:
    words = submit(pg_run, tmp_path)
    assert attempts(pg_run) == 0  # submitting attests nothing
    work(pg_run, words)
    rows = pg_run.rows(BOARD)
    assert duplicate_applications(rows) == []

    done = attest(pg_run, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert {k: report["summary"][k] for k in reference["counts"]} == reference["counts"]
    assert report["accuracy"]["rate"] == 1.0
    assert pg_run.rows(BOARD) == rows  # the report re-attested nothing


def test_submit_inbox_two_workers_make_the_asks_and_the_report_serves_them(
    pg_run: PgRun, tmp_path: Path, reference: dict[str, Any]
) -> None:
    words = submit(pg_run, tmp_path, "--inbox")
    work(pg_run, words)
    rows = pg_run.rows(BOARD)
    assert duplicate_applications(rows) == []
    # The workers decided every escalation, each exactly once, within the budget.
    decisions = [c for _, region, _, c, _ in rows if region == "supervision"]
    assert all(d["kind"] == "decision" for d in decisions)
    assert Counter(d["key"] for d in decisions) == Counter(reference["escalated"])
    asked = {d["ask_id"] for d in decisions if d["disposition"] == "ESCALATED"}
    asks = [c for _, region, _, c, _ in rows if region == "asks"]
    assert asked and {a["ask_id"] for a in asks} == asked and len(asks) == len(asked)
    with attach(pg_run.url, BOARD) as model:
        spent = model.reader.read_premise(BUDGET_PREMISE).value["fleet"]["spent"]
    assert spent == len(asks) <= DEFAULT_ASKS
    before = attempts(pg_run)

    with serve(pg_run, tmp_path) as (url, token, process):
        report = json.loads((tmp_path / "report.json").read_text())
        assert {k: report["summary"][k] for k in reference["counts"]} == reference["counts"]
        assert report["accuracy"]["rate"] == 1.0
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            open_ = client.get("/api/asks", params={"status": "open"}).json()["asks"]
            assert {a["ask"]["ask_id"] for a in open_} == asked
            ask = open_[0]["ask"]
            chosen = next(o["id"] for o in ask["options"] if o["recommended"])
            posted = client.post(f"/api/asks/{ask['ask_id']}/answer", json={"option": chosen})
            assert posted.status_code == 201, posted.text
        applied = wait_for(lambda: applied_of(pg_run))
        assert [(a["ask_id"], a["option"], a["by"]) for a in applied] == [
            (ask["ask_id"], chosen, "human:operator")
        ]
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
        assert process.returncode == 0, out
        assert "1 answer(s) applied" in out
    assert attempts(pg_run) == before  # serving re-attested nothing


# -- bad usage ----------------------------------------------------------------------------


def test_submitting_twice_writes_nothing_the_second_time(pg_run: PgRun, tmp_path: Path) -> None:
    submit(pg_run, tmp_path, "--inbox")
    rows = pg_run.rows(BOARD)
    again = attest(pg_run, tmp_path, "--submit", "--inbox")
    assert again.returncode == 0, again.stderr
    assert "submitted 0 devices" in again.stdout and f"({N} were on it already)" in again.stdout
    assert pg_run.rows(BOARD) == rows


@pytest.mark.parametrize(
    ("first", "then", "says"),
    [
        ((), ("--submit", "--inbox"), "without --inbox, so it holds no human loop"),
        (("--inbox",), ("--submit",), "holds the human loop (it was attested or submitted"),
        (("--inbox",), (), "add --inbox"),
    ],
)
def test_a_board_made_the_other_way_is_refused_untouched(
    pg_run: PgRun, tmp_path: Path, first: tuple[str, ...], then: tuple[str, ...], says: str
) -> None:
    submit(pg_run, tmp_path, *first)
    rows = pg_run.rows(BOARD)
    done = attest(pg_run, tmp_path, *then)
    assert done.returncode == 2, done.stdout
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    assert pg_run.rows(BOARD) == rows


def test_another_fleet_or_a_memory_store_is_refused(pg_run: PgRun, tmp_path: Path) -> None:
    submit(pg_run, tmp_path)
    rows = pg_run.rows(BOARD)
    other = attest(pg_run, tmp_path, "--submit", demo=N + 1)
    assert other.returncode == 2 and "already attests fleet" in other.stderr, other.stderr
    assert pg_run.rows(BOARD) == rows
    command = [sys.executable, "-m", "pybb", "attest", "--demo", "5", "--submit",
               "--store", "memory://"]  # fmt: skip
    memory = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert memory.returncode == 2 and "other processes can open" in memory.stderr


def test_the_report_waits_until_the_workers_are_done(pg_run: PgRun, tmp_path: Path) -> None:
    submit(pg_run, tmp_path)
    with attach(pg_run.url, BOARD) as model:
        model.control.claim("busy-worker", ["dev-00000"], lease=timedelta(seconds=60))
    rows = pg_run.rows(BOARD)
    done = attest(pg_run, tmp_path)
    assert done.returncode == 2 and "still attesting" in done.stderr, done.stderr
    assert "busy-worker" in done.stderr
    assert pg_run.rows(BOARD) == rows


# -- helpers --------------------------------------------------------------------------------


@contextmanager
def serve(pg_run: PgRun, tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """``pybb attest --inbox`` on the board, once it serves: its URL, token and process."""
    command = [
        sys.executable, "-m", "pybb", "attest", "--demo", str(N), "--store", pg_run.url,
        "--board-id", BOARD, "--report", str(tmp_path / "report.json"), "--inbox",
        "--inbox-port", "0", "--no-progress",
    ]  # fmt: skip
    env = {**child_environment(), "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        assert process.stdout is not None
        seen: list[str] = []
        token = url = None
        deadline = time.monotonic() + 60
        while not _serving(seen) and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            token = token or _match(r"token for human:operator: (pybb_\S+)", line)
            url = url or _match(r"pybb inbox for run '[^']+': (http://\S+)", line)
        assert token and url and _serving(seen), "".join(seen)
        yield url.rstrip("/"), token, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _serving(lines: list[str]) -> bool:
    return any("Ctrl-C to stop" in line for line in lines)


def _match(pattern: str, line: str) -> str | None:
    found = re.search(pattern, line)
    return found.group(1) if found else None


def applied_of(pg_run: PgRun) -> list[dict[str, Any]]:
    rows = pg_run.rows(BOARD)
    return [c for _, region, _, c, _ in rows if region == "supervision" and c["kind"] == "applied"]


def wait_for(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")

"""The attestation run, supervised: its asks, and what accepting a digest does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from supervision_support import level, twin_fleet

from blackboard import Model, Written, attach
from pybb import Stage
from pybb.attestation import DeviceOutcome, generate_fleet, read_allowlist
from pybb.human import ASKS, AskStatus, answer, answer_rule, ask_state
from pybb.supervision import SUPERVISION, applied_answers
from pybb.supervision.attestation import (
    ACCEPT,
    CONFIDENCE,
    QUARANTINE,
    REMEASURE,
    SupervisedAttestation,
    attestation_settings,
)


def test_every_escalated_device_gets_an_ask_with_starred_options_and_a_confidence(
    tmp_path: Path,
) -> None:
    fleet = generate_fleet(60, seed=4)
    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'a.db'}", settings=attestation_settings(asks=100)
    ) as session:
        report = session.attest()
        escalated = {r.device: r for r in report.devices if r.outcome is DeviceOutcome.ESCALATED}
        asks = {a.entry: a for a in session.run.open_asks()}
        assert set(asks) == set(escalated) and asks
        for device, ask in asks.items():
            reason = escalated[device].reason
            assert reason is not None
            ids = [o.id for o in ask.options]
            assert set(ids) <= {ACCEPT, QUARANTINE, REMEASURE} and 2 <= len(ids) <= 4
            assert sum(o.recommended for o in ask.options) == 1
            assert ask.confidence == CONFIDENCE[reason.value]
            assert (ACCEPT in ids) == (reason.value == "tampered_component")
            assert ask.subject.startswith(device) and ask.title.startswith(f"Device {device}")
            assert f"[{escalated[device].tier.value} tier]" in ask.report  # type: ignore[union-attr]
            assert ask.scope == "fleet"


def test_accepting_a_digest_on_one_device_makes_the_other_with_that_digest_pass(
    tmp_path: Path,
) -> None:
    fleet, first, twin = twin_fleet(between=2)
    with SupervisedAttestation(fleet, store=f"sqlite:///{tmp_path / 'a.db'}") as session:
        session.attest()
        board = session.attestation.blackboard
        asks = {a.entry: a for a in session.run.open_asks()}
        assert set(asks) == {first, twin}
        assert ACCEPT in [o.id for o in asks[first].options]
        written = answer(board.model.control, "human:alice", asks[first].ask_id, ACCEPT)
        assert isinstance(written, Written)
        session.run.poll()
        # The answered device: resolved by alice, with the decision, in good standing.
        resolution = board.get_resolution(first)
        assert resolution is not None
        assert (resolution.decision, resolution.by) == (ACCEPT, "human:alice")
        assert board.get_entry(first).good_standing
        # The twin passes now; nobody had to answer its ask, which left the inbox.
        assert board.get_entry(twin).good_standing
        assert board.get_entry(twin).stage is Stage.RESOLVED
        state = ask_state(board.model.reader, asks[twin].ask_id)
        assert state is not None and state.status is AskStatus.CLOSED
        closed = [r for r in level(board.model.reader, SUPERVISION) if r["kind"] == "closed"]
        assert [(r["key"], r["disposition"]) for r in closed] == [(twin, "RESOLVED_OOB")]
        assert session.run.open_asks() == ()
        candidates = board.get_escalation(first).report.tier_report["allowlist_candidates"]  # type: ignore[union-attr]
        allowlist = read_allowlist(board)
        for c in candidates:
            assert bytes.fromhex(c["digest"]) in allowlist[c["class"]][c["pcr"]]
        assert [a.outcome for a in applied_answers(board.model.reader)] == ["resolved"]


def test_a_device_attested_after_the_answer_is_repaired_by_the_tree_itself(
    tmp_path: Path,
) -> None:
    fleet, first, twin = twin_fleet(between=1)

    def person(session: SupervisedAttestation) -> Any:
        def chunk_done(done: int, total: int) -> None:  # answers as soon as the ask appears
            for ask in session.run.open_asks():
                control = session.attestation.blackboard.model.control
                answer(control, "human:alice", ask.ask_id, ACCEPT)

        return chunk_done

    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'a.db'}", chunk_size=1
    ) as session:
        report = session.attest(person(session))
        outcomes = {r.device: r.outcome for r in report.devices}
        assert outcomes[first] is DeviceOutcome.RESOLVED
        assert outcomes[twin] is DeviceOutcome.REPAIRED  # the attribution tier repaired it
        assert session.attestation.blackboard.get_escalation(twin) is None
        assert len(level(session.attestation.blackboard.model.reader, ASKS)) == 1


def test_control_without_the_answer_the_twin_is_escalated(tmp_path: Path) -> None:
    fleet, _, twin = twin_fleet(between=1)
    with SupervisedAttestation(
        fleet, store=f"sqlite:///{tmp_path / 'a.db'}", chunk_size=1
    ) as session:
        report = session.attest()
        outcome = next(r.outcome for r in report.devices if r.device == twin)
        assert outcome is DeviceOutcome.ESCALATED


# -- pybb attest --inbox ---------------------------------------------------------------------


class Command:
    """``pybb attest --inbox`` in its own process, with its URL and token."""

    def __init__(self, process: subprocess.Popen[str], url: str, token: str) -> None:
        self.process, self.url, self.token = process, url, token
        self.lines: list[str] = []

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=30)
        return out


@pytest.fixture
def attest_inbox(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, store: Path) -> Command:
        command = [
            sys.executable, "-m", "pybb", "attest", *args, "--store", f"sqlite:///{store}",
            "--report", str(tmp_path / "report.json"), "--inbox", "--inbox-port", "0",
            "--no-progress",
        ]  # fmt: skip
        env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        started.append(process)
        assert process.stdout is not None
        seen: list[str] = []
        token = url = None
        deadline = time.monotonic() + 120
        while (token is None or url is None or not _ready(seen)) and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            token = token or _match(r"token for human:operator: (pybb_\S+)", line)
            url = url or _match(r"pybb inbox for run '[^']+': (http://\S+)", line)
        assert token and url and _ready(seen), "".join(seen)
        command_ = Command(process, url.rstrip("/"), token)
        command_.lines = seen
        return command_

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _ready(lines: list[str]) -> bool:
    return any("Ctrl-C to stop" in line for line in lines)


def _match(pattern: str, line: str) -> str | None:
    found = re.search(pattern, line)
    return found.group(1) if found else None


def wait_for(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def board_of(store: Path, board_id: str) -> Model:
    return attach(f"sqlite:///{store}", board_id, admission_rule=answer_rule)


def test_pybb_attest_inbox_serves_the_run_and_applies_an_answer_until_ctrl_c(
    tmp_path: Path, attest_inbox: Any
) -> None:
    store = tmp_path / "attest.db"
    command = attest_inbox("--demo", "20", store=store)
    headers = {"Authorization": f"Bearer {command.token}"}
    with httpx.Client(base_url=command.url, headers=headers, timeout=10) as client:
        asks = client.get("/api/asks", params={"status": "open"}).json()["asks"]
        assert asks, "the demo fleet escalated nothing"
        ask = asks[0]["ask"]
        chosen = next(o["id"] for o in ask["options"] if not o["recommended"])
        response = client.post(f"/api/asks/{ask['ask_id']}/answer", json={"option": chosen})
        assert response.status_code == 201, response.text
        assert client.get("/api/budget").json()["scopes"][0]["scope"] == "fleet"
    model = board_of(store, "attest-demo-20-seed-0")
    try:
        applied = wait_for(lambda: applied_answers(model.reader))
        assert [(a.ask_id, a.option, a.by) for a in applied] == [
            (ask["ask_id"], chosen, "human:operator")
        ]
    finally:
        model.close()
    out = command.stop()
    assert command.process.returncode == 0, out
    assert "1 answer(s) applied" in out
    # The token was printed once, for the person; it is nowhere else (RA-15's rule).
    assert "".join(command.lines).count(command.token) == 1 and command.token not in out
    for kept in (store, tmp_path / "report.json"):
        assert command.token.encode() not in kept.read_bytes()

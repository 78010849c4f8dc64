"""Resolved out of band: an ask whose entry was resolved on the board before anyone
answered is closed as RESOLVED_OOB and leaves the inbox."""

from __future__ import annotations

from collections.abc import Callable

from supervision_fixtures import *  # noqa: F403
from supervision_support import BOARD, level, open_run, settings, write

from blackboard import BoardReader, Rejected, RejectionCause
from blackboard.stores import Store
from pybb import Controller
from pybb.human import AskStatus, answer, ask_state, open_asks
from pybb.supervision import OOB_REASON, SUPERVISION, SupervisedRun, supervised_blackboard


def oob_problems(reader: BoardReader, ask_id: str) -> list[str]:
    """Why the board does not show ``ask_id`` closed as resolved out of band."""
    problems = []
    state = ask_state(reader, ask_id)
    if state is None or state.status is not AskStatus.CLOSED:
        problems.append(f"ask {ask_id} is {state and state.status}, not closed")
    elif state.closure is None or not state.closure.reason.startswith(OOB_REASON):
        problems.append(f"ask {ask_id} closed for another reason: {state.closure}")
    if any(a.ask_id == ask_id for a in open_asks(reader)):
        problems.append(f"ask {ask_id} is still in the inbox")
    closed = [r for r in level(reader, SUPERVISION) if r["kind"] == "closed"]
    if [(r["ask_id"], r["disposition"]) for r in closed] != [(ask_id, "RESOLVED_OOB")]:
        problems.append(f"closed records: {closed}")
    return problems


def _escalate_two(backend: Callable[[], Store]) -> tuple[SupervisedRun, str, str]:
    run = open_run(backend(), settings(ceiling=5))
    write(run.blackboard, {"a": None, "b": None})
    run.run()
    first, second = run.open_asks()
    return run, first.ask_id, second.ask_id


def test_an_ask_whose_entry_is_resolved_elsewhere_is_closed_and_leaves_the_inbox(
    backend: Callable[[], Store],
) -> None:
    run, ask_a, ask_b = _escalate_two(backend)
    # Another process fixes entry "a" on the board before anyone answers.
    other = Controller(supervised_blackboard(backend(), BOARD))
    other.resolve("a", "rebooted", by="ops:alice-script")
    other.blackboard.close()
    run.poll()
    reader = run.blackboard.model.reader
    assert oob_problems(reader, ask_a) == []
    assert [a.ask_id for a in run.open_asks()] == [ask_b]
    closed = next(r for r in level(reader, SUPERVISION) if r["kind"] == "closed")
    assert closed["details"]["by"] == "ops:alice-script"
    assert closed["details"]["decision"] == "rebooted"
    # A person who still had the page open is told it was closed.
    late = answer(run.blackboard.model.control, "human:bob", ask_a, "reject-it")
    assert isinstance(late, Rejected) and late.cause is RejectionCause.ADMISSION
    assert "closed" in late.reason and OOB_REASON in late.reason
    run.close()


def test_a_resolution_in_this_process_closes_the_ask_at_the_next_cycle(
    backend: Callable[[], Store],
) -> None:
    run, ask_a, _ = _escalate_two(backend)
    run.controller.resolve("a", "rebooted", by="ops:script")
    run.controller.run()  # the halt flushes the closure
    assert oob_problems(run.blackboard.model.reader, ask_a) == []
    run.close()


def test_negative_control_a_supervisor_that_never_closes_is_caught(
    backend: Callable[[], Store],
) -> None:
    run, ask_a, _ = _escalate_two(backend)
    run.supervisor.close_resolved = list  # type: ignore[method-assign]
    run.controller.resolve("a", "rebooted", by="ops:script")
    run.poll()
    problems = oob_problems(run.blackboard.model.reader, ask_a)
    assert any("still in the inbox" in p for p in problems), problems
    run.close()

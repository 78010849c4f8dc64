"""answer_rule and the board helpers: every refusal, and exactly one answer under races."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from human_fixtures import *  # noqa: F403 (the fixtures)
from human_support import make_ask, open_board

from blackboard import (
    Accept,
    BoardReader,
    Level,
    Model,
    ProposedWrite,
    Reject,
    Rejected,
    RejectionCause,
    Written,
    create_model,
)
from pybb.human import (
    ANSWERS,
    ASK_CLOSURES,
    ASKS,
    HUMAN_REGIONS,
    Answer,
    AskStatus,
    RefusalCode,
    answer,
    answer_rule,
    ask_state,
    ask_states,
    close_ask,
    compose_rules,
    judge_answer,
    open_asks,
    post_ask,
)

ALICE, BOB = "human:alice", "human:bob"


def _answer(ask_id: str, option: str = "accept", by: str = ALICE) -> dict[str, object]:
    return Answer(ask_id, option, by, "", datetime.now(UTC)).to_json()


def _rejected(result: object, *words: str) -> str:
    assert isinstance(result, Rejected), result
    assert result.cause is RejectionCause.ADMISSION, result
    for word in words:
        assert word in result.reason, result.reason
    return result.reason


@pytest.fixture
def posted(board: Model) -> Model:
    assert isinstance(post_ask(board.control, make_ask("a-1")), Written)
    assert isinstance(post_ask(board.control, make_ask("a-2", to=(BOB,))), Written)
    return board


def test_a_person_answers_an_open_ask(posted: Model) -> None:
    result = answer(posted.control, ALICE, "a-1", "quarantine", "checked <b>by hand</b>")
    assert isinstance(result, Written)
    state = ask_state(posted.reader, "a-1")
    assert state is not None
    assert state.status is AskStatus.ANSWERED
    assert state.answer is not None
    assert (state.answer.by, state.answer.option) == (ALICE, "quarantine")
    assert state.answered_at == result.sequence
    assert [a.ask_id for a in open_asks(posted.reader)] == ["a-2"]


def test_only_a_person_may_answer(posted: Model) -> None:
    result = posted.control.write("pybb:controller", ANSWERS, _answer("a-1", by=ALICE))
    _rejected(result, "only a person", "'pybb:controller'")


def test_a_spoofed_by_is_never_honoured(posted: Model) -> None:
    result = posted.control.write(BOB, ANSWERS, _answer("a-1", by=ALICE))
    _rejected(result, "says it is by 'human:alice'", "'human:bob' wrote it")
    assert ask_state(posted.reader, "a-1").status is AskStatus.OPEN  # type: ignore[union-attr]


def test_a_malformed_answer_is_refused(posted: Model) -> None:
    _rejected(posted.control.write(ALICE, ANSWERS, {"ask_id": "a-1"}), "cannot be read")
    _rejected(posted.control.write(ALICE, ANSWERS, {**_answer("a-1"), "at": "noon"}), "ISO")


def test_an_unknown_ask_is_refused(posted: Model) -> None:
    _rejected(posted.control.write(ALICE, ANSWERS, _answer("a-9")), "no ask 'a-9'")


def test_an_ask_addressed_to_someone_else_is_refused(posted: Model) -> None:
    _rejected(posted.control.write(ALICE, ANSWERS, _answer("a-2")), "addressed to other people")
    assert isinstance(posted.control.write(BOB, ANSWERS, _answer("a-2", by=BOB)), Written)
    assert [a.ask_id for a in open_asks(posted.reader, human=ALICE)] == ["a-1"]
    assert [a.ask_id for a in open_asks(posted.reader, human=BOB)] == ["a-1"]


def test_an_unknown_option_is_refused(posted: Model) -> None:
    reason = _rejected(
        posted.control.write(ALICE, ANSWERS, _answer("a-1", "delete")), "'delete' is not one"
    )
    assert "'accept', 'quarantine', 'remeasure'" in reason


def test_an_answered_ask_refuses_a_second_answer_saying_who_was_first(posted: Model) -> None:
    assert isinstance(answer(posted.control, BOB, "a-1", "remeasure"), Written)
    reason = _rejected(answer(posted.control, ALICE, "a-1", "accept"), "human:bob already answered")
    assert "“Re-measure”" in reason
    reason = _rejected(answer(posted.control, BOB, "a-1", "accept"), "you already answered")


def test_a_closed_ask_refuses_answers(posted: Model) -> None:
    assert isinstance(close_ask(posted.control, "a-1", "resolved on the board"), Written)
    _rejected(answer(posted.control, ALICE, "a-1", "accept"), "closed", "resolved on the board")
    assert ask_state(posted.reader, "a-1").status is AskStatus.CLOSED  # type: ignore[union-attr]
    assert [a.ask_id for a in open_asks(posted.reader)] == ["a-2"]


def test_asks_and_closures_are_guarded_too(posted: Model) -> None:
    control = posted.control
    _rejected(post_ask(control, make_ask("a-3"), writer=ALICE), "a person cannot post asks")
    _rejected(control.write("pybb:escalation", ASKS, {"ask_id": "a-3"}), "cannot be kept")
    _rejected(close_ask(control, "a-1", "why", writer=ALICE), "a person answers")
    _rejected(close_ask(control, "a-9", "why"), "no ask 'a-9'")
    _rejected(control.write("x", ASK_CLOSURES, {"ask_id": "a-1"}), "cannot be kept")
    assert isinstance(answer(control, ALICE, "a-1", "accept"), Written)
    _rejected(close_ask(control, "a-1", "too late"), "already answered")


def test_a_second_ask_or_closure_with_the_same_id_is_a_duplicate(posted: Model) -> None:
    again = post_ask(posted.control, make_ask("a-1"))
    assert isinstance(again, Rejected)
    assert again.cause is RejectionCause.DUPLICATE
    assert isinstance(close_ask(posted.control, "a-2", "first"), Written)
    twice = close_ask(posted.control, "a-2", "second")
    assert isinstance(twice, Rejected)


def test_other_writes_pass_untouched(posted: Model) -> None:
    assert isinstance(posted.control.write("anyone", "notes", {"anything": 1}), Written)


def test_judge_answer_gives_codes_for_programs(posted: Model) -> None:
    reader = posted.reader
    assert judge_answer(reader, ALICE, _answer("a-1")) is None
    cases = [
        ("bot", _answer("a-1"), RefusalCode.NOT_A_PERSON),
        (ALICE, {"nope": 1}, RefusalCode.MALFORMED),
        (BOB, _answer("a-1"), RefusalCode.SPOOFED),
        (ALICE, _answer("zz"), RefusalCode.UNKNOWN_ASK),
        (ALICE, _answer("a-2"), RefusalCode.NOT_ADDRESSED),
        (ALICE, _answer("a-1", "nope"), RefusalCode.UNKNOWN_OPTION),
    ]
    for writer, content, code in cases:
        refusal = judge_answer(reader, writer, content)
        assert refusal is not None
        assert refusal.code is code


def test_compose_rules_admits_only_what_every_rule_admits(db: Path) -> None:
    def no_notes(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        return Reject("no notes today") if getattr(proposed, "level", "") == "notes" else Accept()

    model = create_model(
        regions=[*HUMAN_REGIONS, Level("notes")],
        admission_rule=compose_rules(answer_rule, no_notes),
        store=f"sqlite:///{db}",
        board_id="composed",
    )
    with model:
        _rejected(model.control.write("x", "notes", {}), "no notes today")
        _rejected(model.control.write("x", ANSWERS, _answer("a-1")), "only a person")


def test_an_answer_and_a_closure_that_raced_resolve_by_sequence(db: Path) -> None:
    # Without the rule both may land (the rule runs outside the lock); the first decides.
    with open_board(db, rule=False) as model:
        post_ask(model.control, make_ask("a-1"))
        closed = close_ask(model.control, "a-1", "resolved out of band")
        answered = answer(model.control, ALICE, "a-1", "accept")
        assert isinstance(closed, Written)
        assert isinstance(answered, Written)
        state = ask_state(model.reader, "a-1")
        assert state is not None
        assert state.status is AskStatus.CLOSED
        assert state.answer is not None


def test_malformed_rows_written_without_the_rule_are_skipped(db: Path) -> None:
    with open_board(db, rule=False) as model:
        model.control.write("x", ASKS, {"ask_id": "broken"})
        post_ask(model.control, make_ask("a-1"))
        model.control.write("x", ANSWERS, {"ask_id": "a-1", "by": 3})
        assert [s.ask.ask_id for s in ask_states(model.reader)] == ["a-1"]
        assert ask_state(model.reader, "a-1").status is AskStatus.OPEN  # type: ignore[union-attr]


# -- exactly one answer, under races ---------------------------------------------------------


def _race(models: list[Model], ask_id: str, barrier: threading.Barrier) -> list[object]:
    results: list[object] = [None] * len(models)

    def one(index: int) -> None:
        barrier.wait()
        who = [ALICE, BOB][index % 2]
        results[index] = answer(models[index].control, who, ask_id, "accept")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(models))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_threads_answering_at_once_admit_exactly_one(db: Path) -> None:
    models = [open_board(db), open_board(db)]  # two connections to one file
    try:
        for n in range(20):
            post_ask(models[0].control, make_ask(f"r-{n}"))
            results = _race(models, f"r-{n}", threading.Barrier(2))
            assert sum(isinstance(r, Written) for r in results) == 1, results
            assert all(isinstance(r, Written | Rejected) for r in results)
        answers = models[0].reader.read_level(ANSWERS)
        assert len(answers) == 20
        assert len({c.content["ask_id"] for c in answers}) == 20
    finally:
        for model in models:
            model.close()


def _slow_rule(
    barrier: threading.Barrier,
) -> Callable[[ProposedWrite, BoardReader], Accept | Reject]:
    def rule(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        verdict = answer_rule(proposed, reader)
        if getattr(proposed, "level", "") == ANSWERS:
            barrier.wait(timeout=5)  # both answers have passed the rule before either lands
        return verdict

    return rule


@pytest.mark.parametrize("unique", [True, False], ids=["unique-level", "negative-control"])
def test_the_store_not_the_rule_makes_it_exactly_one(db: Path, unique: bool) -> None:
    """With both answers past the rule, only the unique level stops the second one."""
    barrier = threading.Barrier(2)
    regions = [Level(ASKS, unique="ask_id"), Level(ANSWERS, unique="ask_id" if unique else False)]
    regions.append(Level(ASK_CLOSURES, unique="ask_id"))
    models = [
        create_model(regions=regions, admission_rule=_slow_rule(barrier), store=f"sqlite:///{db}")
        for _ in range(2)
    ]
    try:
        post_ask(models[0].control, make_ask("r-1"))
        results = _race(models, "r-1", threading.Barrier(2))
        admitted = len(models[0].reader.read_level(ANSWERS))
        assert admitted == (1 if unique else 2)
        if unique:
            assert any(
                isinstance(r, Rejected) and r.cause is RejectionCause.DUPLICATE for r in results
            )
    finally:
        for model in models:
            model.close()


_PROCESS = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from human_support import open_board
    from pybb.human import answer
    model = open_board(sys.argv[2])
    who, start, count = sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    time.sleep(max(0.0, start - time.time()))
    won = []
    for n in range(count):
        result = answer(model.control, who, f"p-{n}", "accept")
        won.append(type(result).__name__)
    model.close()
    print(json.dumps(won))
    """
)


def test_two_processes_answering_at_once_admit_exactly_one(db: Path) -> None:
    count = 30
    with open_board(db) as model:
        for n in range(count):
            post_ask(model.control, make_ask(f"p-{n}"))
    start = time.time() + 1.5
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS, here, str(db), who, str(start), str(count)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in (ALICE, BOB)
    ]
    outputs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for n in range(count):
        assert sorted(o[n] for o in outputs) == ["Rejected", "Written"], n
    with open_board(db) as model:
        answers = model.reader.read_level(ANSWERS)
        assert len(answers) == count
        assert {ask_state(model.reader, f"p-{n}").status for n in range(count)} == {  # type: ignore[union-attr]
            AskStatus.ANSWERED
        }

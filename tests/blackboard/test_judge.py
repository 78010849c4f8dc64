"""``control.judge`` and ``Judged``: a write judged ahead of its batch is judged once.

docs/adr/0010-a-write-is-judged-once.md: the rule runs in ``judge()``; ``write_all`` takes
the verdict it reached and does not ask the rule again, while every other check (closed
run, permission, uniqueness, premise version, idempotency key) still runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from blackboard import (
    Accept,
    AdmissionRuleError,
    Agent,
    BoardReader,
    Conflict,
    ContentError,
    Judged,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    RegionKindError,
    Reject,
    Rejected,
    RejectionCause,
    UndeclaredRegionError,
    WriterError,
    Written,
    create_model,
)
from storekit import StoreSpec


class CountingRule:
    """Refuses content with ``"bad"``; counts every call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        self.calls += 1
        if isinstance(proposed, ProposedContribution) and proposed.content.get("bad"):
            return Reject("bad content")
        return Accept()


def _model(spec: StoreSpec, rule: Any, board_id: str = "judge") -> Model:
    return create_model(
        regions=[Level("notes"), Level("tags", unique=True), Premise("window")],
        premises={"window": 1},
        agents=[Agent("scout", writes_to=["tags"])],
        admission_rule=rule,
        store=spec.open(),
        board_id=board_id,
    )


def test_a_judged_write_runs_the_rule_once(local_store_spec: StoreSpec) -> None:
    rule = CountingRule()
    model = _model(local_store_spec, rule)
    good = model.control.judge(ProposedContribution("w", "notes", {"n": 1}))
    bad = model.control.judge(ProposedContribution("w", "notes", {"bad": True}))
    assert (good.verdict, bad.verdict) == (Accept(), Reject("bad content"))
    assert rule.calls == 2
    results = model.control.write_all([good, bad])
    assert rule.calls == 2  # the verdicts were taken, not reached again
    assert isinstance(results[0], Written)
    assert results[1] == Rejected(RejectionCause.ADMISSION, "bad content")
    assert [r.content for r in model.reader.read_level("notes")] == [{"n": 1}]


def test_judged_and_plain_proposals_mix_in_one_batch(local_store_spec: StoreSpec) -> None:
    rule = CountingRule()
    model = _model(local_store_spec, rule)
    judged = model.control.judge(ProposedContribution("w", "notes", {"n": 1}))
    plain = ProposedContribution("w", "notes", {"n": 2})
    results = model.control.write_all([judged, plain], idempotency_keys=["a", "b"])
    assert rule.calls == 2  # one in judge(), one for the plain proposal
    assert [type(r) for r in results] == [Written, Written]
    again = model.control.write_all([judged], idempotency_keys=["a"])
    assert again == [Written(results[0].sequence, None, repeat=True)]  # type: ignore[union-attr]


def test_the_verdict_is_the_rules_even_if_the_board_changed(local_store_spec: StoreSpec) -> None:
    # The verdict is kept as judged (the caller asked for it); the checks inside the
    # transaction still see the board as it is when the batch commits.
    model = _model(local_store_spec, CountingRule())
    tag = model.control.judge(ProposedContribution("scout", "tags", {"t": 1}))
    cas = model.control.judge(ProposedPremiseWrite("w", "window", 2, expected_version=1))
    assert isinstance(model.control.write("scout", "tags", {"t": 1}), Written)
    assert isinstance(model.control.set_premise("w", "window", 3, expected_version=1), Written)
    model.control.revoke("scout", "tags")
    results = model.control.write_all([tag, cas])
    assert isinstance(results[0], Rejected)
    assert results[0].cause is RejectionCause.NOT_PERMITTED
    assert results[1] == Conflict(2)
    model.control.abort("done")
    closed = model.control.write_all([model.control.judge(ProposedContribution("w", "notes", {}))])
    assert isinstance(closed[0], Rejected)
    assert closed[0].cause is RejectionCause.RUN_CLOSED


def test_judge_checks_the_region_and_writer_as_a_write_would(local_store_spec: StoreSpec) -> None:
    rule = CountingRule()
    control = _model(local_store_spec, rule).control
    with pytest.raises(UndeclaredRegionError, match="'nowhere' is not declared"):
        control.judge(ProposedContribution("w", "nowhere", {}))
    with pytest.raises(RegionKindError, match="'window' is a premise"):
        control.judge(ProposedContribution("w", "window", {}))
    with pytest.raises(WriterError, match="'@me' is not a valid writer name"):
        control.judge(ProposedPremiseWrite("@me", "window", 2, expected_version=1))
    with pytest.raises(ContentError, match="is not a ProposedContribution"):
        control.judge({"writer": "w"})  # type: ignore[arg-type]
    assert rule.calls == 0


def test_judge_wraps_a_broken_rule_as_the_write_path_does(local_store_spec: StoreSpec) -> None:
    def raising(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        raise KeyError("oops")

    def answering(proposed: ProposedWrite, reader: BoardReader) -> Any:
        return True

    raises = _model(local_store_spec, raising, "raising").control
    with pytest.raises(AdmissionRuleError, match="the admission rule raised KeyError"):
        raises.judge(ProposedContribution("w", "notes", {}))
    answers = _model(local_store_spec, answering, "answering").control
    with pytest.raises(AdmissionRuleError, match="returned True"):
        answers.judge(ProposedContribution("w", "notes", {}))


def test_without_a_rule_judge_accepts(local_store_spec: StoreSpec) -> None:
    control = _model(local_store_spec, None).control
    judged = control.judge(ProposedContribution("w", "notes", {"bad": True}))
    assert judged.verdict == Accept()
    assert isinstance(control.write_all([judged])[0], Written)


def test_a_judged_of_another_board_is_refused_and_nothing_is_written(
    local_store_spec: StoreSpec,
) -> None:
    one = _model(local_store_spec, CountingRule(), "one")
    other = _model(local_store_spec, CountingRule(), "other")
    foreign = other.control.judge(ProposedContribution("w", "notes", {"n": 1}))
    forged = Judged(ProposedContribution("w", "notes", {"bad": True}), Accept(), other.control)
    head = one.reader.head()
    for judged in (foreign, forged):
        with pytest.raises(ContentError, match="judged by another board's control"):
            one.control.write_all([ProposedContribution("w", "notes", {"n": 0}), judged])
    assert one.reader.head() == head

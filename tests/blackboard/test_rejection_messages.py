"""Every refusal says what is wrong and how to fix it, with the facts it names exact.

The write path's refusals and errors are read by people: the run's close sequence, the
agent and region, the key and the sequence that first used it, and the advice, each as
the kernel knows it. Found by mutation testing (RA-17): these words were unchecked.
"""

from __future__ import annotations

from typing import Any

import pytest

from blackboard import (
    AdmissionRuleError,
    Agent,
    BoardReader,
    IdempotencyKeyError,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedWrite,
    Reject,
    Rejected,
    RejectionCause,
    Written,
    create_model,
)
from storekit import StoreSpec


def _model(spec: StoreSpec, rule: Any = None, **kwargs: Any) -> Model:
    return create_model(
        regions=[Level("notes"), Level("findings"), Premise("window")],
        premises={"window": 1},
        agents=[Agent("scout", writes_to=["findings"])],
        admission_rule=rule,
        store=spec.open(),
        board_id="msg",
        **kwargs,
    )


def _closed_reason(sequence: int) -> str:
    return f"the run closed at sequence {sequence}; nothing more is admitted to it"


def test_writes_and_grants_after_the_close_name_the_close_sequence(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    model.control.write("w", "notes", {"n": 1})
    closed_at = model.control.complete("done").sequence
    assert closed_at is not None and closed_at == model.reader.head() and closed_at > 1
    later = [
        model.control.write("w", "notes", {"n": 2}),
        model.control.grant("scout", "notes"),
        model.control.revoke("scout", "findings"),
        *model.control.write_all([ProposedContribution("w", "notes", {"n": 3})]),
    ]
    assert later == [Rejected(RejectionCause.RUN_CLOSED, _closed_reason(closed_at))] * 4
    assert model.reader.head() == closed_at


def test_a_run_closed_by_another_handle_is_named_with_its_sequence(
    store_spec: StoreSpec,
) -> None:
    """The close lands between this handle's look at the run and its transaction."""
    model = _model(store_spec)
    other = create_model(
        regions=[Level("notes"), Level("findings"), Premise("window")],
        premises={"window": 1},
        agents=[Agent("scout", writes_to=["findings"])],
        store=store_spec.open(),
        board_id="msg",
    )
    closed_at = other.control.abort("stop").sequence
    assert closed_at is not None
    result = model.control.write("w", "notes", {"n": 1})
    assert result == Rejected(RejectionCause.RUN_CLOSED, _closed_reason(closed_at))


def test_a_raising_rule_is_reported_with_the_advice(store_spec: StoreSpec) -> None:
    def rule(proposed: ProposedWrite, reader: BoardReader) -> Any:
        raise KeyError("missing")

    model = _model(store_spec, rule)
    head = model.reader.head()
    with pytest.raises(AdmissionRuleError) as caught:
        model.control.write("w", "notes", {})
    assert str(caught.value) == (
        "the admission rule raised KeyError: 'missing'; nothing was written. "
        "A rule should return Reject('why') for writes it refuses"
    )
    assert model.reader.head() == head


# Reject(7): a reason that is not a string, on purpose.
@pytest.mark.parametrize("verdict", [42, None, Reject(7)])  # type: ignore[arg-type]
def test_a_rule_that_returns_no_verdict_is_reported(store_spec: StoreSpec, verdict: Any) -> None:
    model = _model(store_spec, lambda proposed, reader: verdict)
    head = model.reader.head()
    with pytest.raises(AdmissionRuleError) as caught:
        model.control.write("w", "notes", {})
    assert str(caught.value) == (
        f"the admission rule returned {verdict!r}; it must return Accept() or "
        "Reject('a reason string')"
    )
    assert model.reader.head() == head


def test_an_unregistered_writer_is_told_to_declare_an_agent(store_spec: StoreSpec) -> None:
    model = _model(store_spec, agents_only=True)
    assert model.control.write("ghost", "notes", {}) == Rejected(
        RejectionCause.NOT_PERMITTED,
        "'ghost' is not a registered agent and this model admits only registered agents "
        "(agents_only=True); declare it with Agent(...)",
    )


def test_an_agent_outside_its_regions_is_told_how_to_get_permission(
    store_spec: StoreSpec,
) -> None:
    model = _model(store_spec)
    head = model.reader.head()
    assert model.control.write("scout", "notes", {}) == Rejected(
        RejectionCause.NOT_PERMITTED,
        "agent 'scout' may not write 'notes'; add it to the agent's writes_to "
        "or grant it with control.grant()",
    )
    assert model.reader.head() == head


def test_one_key_twice_in_a_batch_repeats_the_first_write(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    same = ProposedContribution("w", "notes", {"n": 1})
    first, again = model.control.write_all([same, same], idempotency_keys=["k", "k"])
    assert isinstance(first, Written) and not first.repeat
    assert again == Written(first.sequence, first.version, repeat=True)
    assert model.reader.head() == first.sequence


def test_one_key_for_two_writes_in_a_batch_names_the_key_and_writes_nothing(
    store_spec: StoreSpec,
) -> None:
    model = _model(store_spec)
    model.control.write("w", "notes", {"n": 0})
    head = model.reader.head()
    batch = [ProposedContribution("w", "notes", {"n": 1}), ProposedContribution("w", "notes", {})]
    with pytest.raises(IdempotencyKeyError) as caught:
        model.control.write_all(batch, idempotency_keys=["k", "k"])
    assert (caught.value.key, caught.value.sequence) == ("k", head + 1)
    assert model.reader.head() == head

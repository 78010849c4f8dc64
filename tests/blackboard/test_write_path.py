"""The control component's write path, check by check, in the seed's order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from blackboard import (
    Accept,
    AdmissionRuleError,
    Agent,
    BoardReader,
    Conflict,
    ContentError,
    IdempotencyKeyError,
    Level,
    Model,
    Notification,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    RecordKind,
    RegionKindError,
    Reject,
    Rejected,
    RejectionCause,
    RunStatus,
    UndeclaredRegionError,
    WriterError,
    Written,
    create_model,
)
from blackboard.stores import MemoryStore, PendingWrite
from storekit import StoreSpec

OPENING = 2  # the window's opening value and scout's grant for findings


class RecordingRule:
    """An admission rule that remembers every write it was asked about."""

    def __init__(self, verdict: Accept | Reject | None = None) -> None:
        self.seen: list[ProposedWrite] = []
        self.verdict = verdict or Accept()

    def __call__(self, proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        self.seen.append(proposed)
        return self.verdict


def _model(spec: StoreSpec, rule: Any = None, **kwargs: Any) -> Model:
    return create_model(
        regions=[Level("hypotheses"), Level("findings"), Premise("window")],
        premises={"window": 5},
        agents=kwargs.pop("agents", [Agent("scout", writes_to=["findings"])]),
        admission_rule=rule,
        store=spec.open(),
        board_id="wp",
        **kwargs,
    )


def test_opening_value_takes_a_sequence_and_bypasses_the_rule(store_spec: StoreSpec) -> None:
    rule = RecordingRule(Reject("nothing"))
    model = _model(store_spec, rule)
    assert rule.seen == []
    window = model.reader.read_premise("window")
    assert (window.value, window.version, window.sequence) == (5, 1, 1)
    first = model.reader.log()[0]
    assert (first.kind, first.writer, first.content) == (RecordKind.PREMISE, "@board", 5)


def test_undeclared_region_raises_before_the_rule(store_spec: StoreSpec) -> None:
    rule = RecordingRule()
    model = _model(store_spec, rule)
    head = model.reader.head()
    with pytest.raises(UndeclaredRegionError, match="'nowhere' is not declared"):
        model.control.write("w", "nowhere", {"x": 1})
    with pytest.raises(UndeclaredRegionError):
        model.control.set_premise("w", "nowhere", 1, expected_version=1)
    assert rule.seen == []
    assert model.reader.head() == head


def test_region_of_the_other_kind_raises_before_the_rule(store_spec: StoreSpec) -> None:
    rule = RecordingRule()
    model = _model(store_spec, rule)
    with pytest.raises(RegionKindError, match="'window' is a premise"):
        model.control.write("w", "window", 1)
    with pytest.raises(RegionKindError, match="'findings' is a level"):
        model.control.set_premise("w", "findings", 1, expected_version=1)
    assert rule.seen == []


def test_closed_run_is_rejected_before_the_rule(store_spec: StoreSpec) -> None:
    rule = RecordingRule()
    model = _model(store_spec, rule)
    outcome = model.control.abort("operator stopped it")
    assert (outcome.status, outcome.reason) == (RunStatus.ABORTED, "operator stopped it")
    head = model.reader.head()
    result = model.control.write("w", "findings", {"x": 1})
    assert isinstance(result, Rejected) and result.cause is RejectionCause.RUN_CLOSED
    cas = model.control.set_premise("w", "window", 6, expected_version=1)
    assert isinstance(cas, Rejected) and cas.cause is RejectionCause.RUN_CLOSED
    batch = model.control.write_all(
        [ProposedContribution("w", "findings", {"x": 2}), ProposedPremiseWrite("w", "window", 6, 1)]
    )
    assert [(type(r), getattr(r, "cause", None)) for r in batch] == [
        (Rejected, RejectionCause.RUN_CLOSED)
    ] * 2
    assert rule.seen == []
    assert model.reader.head() == head
    assert model.control.abort("again").reason == "operator stopped it"  # closed stays closed


def test_registered_agent_outside_writes_to_is_not_permitted(store_spec: StoreSpec) -> None:
    rule = RecordingRule()
    model = _model(store_spec, rule)
    result = model.control.write("scout", "hypotheses", {"h": 1})
    assert isinstance(result, Rejected) and result.cause is RejectionCause.NOT_PERMITTED
    assert "scout" in result.reason and "hypotheses" in result.reason
    assert rule.seen == []
    assert isinstance(model.control.write("scout", "findings", {"f": 1}), Written)
    assert len(rule.seen) == 1


def test_unregistered_writers_are_not_permission_checked(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    assert isinstance(model.control.write("anyone", "hypotheses", {"h": 1}), Written)


def test_agents_only_refuses_unregistered_writers(store_spec: StoreSpec) -> None:
    model = _model(store_spec, agents_only=True)
    result = model.control.write("anyone", "findings", {"h": 1})
    assert isinstance(result, Rejected) and result.cause is RejectionCause.NOT_PERMITTED
    assert "agents_only" in result.reason
    assert isinstance(model.control.write("scout", "findings", {"f": 1}), Written)


def test_rule_rejection_reaches_the_writer_and_writes_nothing(store_spec: StoreSpec) -> None:
    model = _model(store_spec, RecordingRule(Reject("findings need a source")))
    head = model.reader.head()
    assert model.control.write("w", "findings", {"f": 1}) == Rejected(
        RejectionCause.ADMISSION, "findings need a source"
    )
    assert model.reader.head() == head


def test_rule_sees_both_kinds_with_their_fields(store_spec: StoreSpec) -> None:
    rule = RecordingRule()
    model = _model(store_spec, rule)
    model.control.write("scout", "findings", {"f": 1})
    model.control.set_premise("scout", "window", 6, expected_version=1)
    assert rule.seen == [
        ProposedContribution("scout", "findings", {"f": 1}),
        ProposedPremiseWrite("scout", "window", 6, 1),
    ]


def test_rule_that_raises_is_a_clear_error_and_writes_nothing(store_spec: StoreSpec) -> None:
    def broken(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
        raise KeyError("oops")

    model = _model(store_spec, broken)
    with pytest.raises(AdmissionRuleError, match="raised KeyError"):
        model.control.write("w", "findings", {"f": 1})
    assert model.reader.head() == OPENING


def test_rule_answering_nonsense_is_a_clear_error(store_spec: StoreSpec) -> None:
    model = _model(store_spec, lambda proposed, reader: True)
    with pytest.raises(AdmissionRuleError, match="must return Accept"):
        model.control.write("w", "findings", {"f": 1})
    assert model.reader.head() == OPENING


def test_premise_compare_and_set(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    assert model.control.set_premise("w", "window", 6, expected_version=1) == Written(3, 2)
    assert model.control.set_premise("w", "window", 7, expected_version=1) == Conflict(2)
    assert model.control.set_premise("w", "window", 7, expected_version=2) == Written(4, 3)
    state = model.reader.read_premise("window")
    assert (state.value, state.version, state.sequence) == (7, 3, 4)


def test_sequence_is_gap_free_over_refusals(store_spec: StoreSpec) -> None:
    model = _model(store_spec, RecordingRule())
    model.control.write("w", "findings", {"f": 1})
    model.control.set_premise("w", "window", 6, expected_version=9)  # conflict: no number
    model.control.write("scout", "hypotheses", {"h": 1})  # not permitted: no number
    model.control.write("w", "hypotheses", {"h": 2})
    assert [r.sequence for r in model.reader.log()] == [1, 2, 3, 4]
    assert model.reader.head() == 4


def test_unique_level_on_content_and_on_a_key(store_spec: StoreSpec) -> None:
    model = create_model(
        regions=[Level("whole", unique=True), Level("keyed", unique="id")],
        store=store_spec.open(),
    )
    assert isinstance(model.control.write("a", "whole", {"x": 1, "y": 2}), Written)
    dup = model.control.write("b", "whole", {"y": 2, "x": 1})  # same content, other key order
    assert isinstance(dup, Rejected) and dup.cause is RejectionCause.DUPLICATE
    assert isinstance(model.control.write("a", "keyed", {"id": "d1", "v": 1}), Written)
    dup = model.control.write("a", "keyed", {"id": "d1", "v": 2})
    assert isinstance(dup, Rejected) and dup.cause is RejectionCause.DUPLICATE
    with pytest.raises(ContentError, match="the key 'id'"):
        model.control.write("a", "keyed", {"v": 3})
    assert model.reader.head() == 2


def test_unique_keys_in_big_batches(store_spec: StoreSpec) -> None:
    """A batch's unique keys are judged against the board and against the batch itself.

    Over 500 keys (the SQLite store looks a batch's keys up 500 at a time), one level's
    key never blocks another level's, and a key is free again only on another level.
    """
    model = create_model(
        regions=[Level("a", unique="id"), Level("b", unique="id")], store=store_spec.open()
    )
    first = [ProposedContribution("w", "a", {"id": f"k{i}"}) for i in range(0, 1200, 2)]
    assert all(isinstance(r, Written) for r in model.control.write_all(first))
    proposals = [
        *(ProposedContribution("w", "a", {"id": f"k{i}"}) for i in range(1200)),  # odd ones free
        *(ProposedContribution("w", "b", {"id": f"k{i}"}) for i in range(700)),  # another level
        ProposedContribution("w", "a", {"id": "k1"}),  # a duplicate of this very batch
        ProposedContribution("w", "b", {"id": "k699"}),
    ]
    results = model.control.write_all(proposals)
    landed = [i for i, r in enumerate(results) if isinstance(r, Written)]
    refused = [i for i, r in enumerate(results) if isinstance(r, Rejected)]
    assert landed == [*range(1, 1200, 2), *range(1200, 1900)]
    assert refused == [*range(0, 1200, 2), 1900, 1901]
    assert all(results[i].cause is RejectionCause.DUPLICATE for i in refused)  # type: ignore[union-attr]
    assert model.reader.head() == 600 + 600 + 700
    again = model.control.write_all([ProposedContribution("w", "b", {"id": "k0"})])
    assert isinstance(again[0], Rejected) and again[0].cause is RejectionCause.DUPLICATE


def test_idempotency_key_repeat_returns_the_first_outcome(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    first = model.control.write("w", "findings", {"f": 1}, idempotency_key="k1")
    again = model.control.write("w", "findings", {"f": 1}, idempotency_key="k1")
    assert first == Written(3) and again == Written(3, repeat=True)
    cas = model.control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2")
    cas_again = model.control.set_premise(
        "w", "window", 6, expected_version=1, idempotency_key="k2"
    )
    assert cas == Written(4, 2) and cas_again == Written(4, 2, repeat=True)
    assert model.reader.head() == 4


def test_idempotent_repeat_after_close_still_reports_the_first_outcome(
    store_spec: StoreSpec,
) -> None:
    model = _model(store_spec)
    model.control.write("w", "findings", {"f": 1}, idempotency_key="k1")
    model.control.abort("done")
    again = model.control.write("w", "findings", {"f": 1}, idempotency_key="k1")
    assert isinstance(again, Written) and again.repeat


def test_a_repeated_key_is_settled_before_the_run_permission_rule_and_version_checks(
    store_spec: StoreSpec,
) -> None:
    """The key is the first check after the region and content checks (README, ADR 0003).

    A repeat returns the first ``Written`` although, since the first write, the agent's
    permission was revoked, the rule came to refuse it, the premise moved on and the run
    closed; the rule is not asked about it again. A different write under the same key
    still raises on the closed run: the key is judged before the run state.
    """
    rule = RecordingRule()
    model = _model(store_spec, rule)
    control = model.control
    first = control.write("scout", "findings", {"f": 1}, idempotency_key="k1")
    cas = control.set_premise("scout", "window", 6, expected_version=1, idempotency_key="k2")
    assert first == Written(OPENING + 1) and cas == Written(OPENING + 2, 2)

    def repeats() -> list[Any]:
        return [
            control.write("scout", "findings", {"f": 1}, idempotency_key="k1"),
            control.set_premise("scout", "window", 6, expected_version=1, idempotency_key="k2"),
            *control.write_all(
                [
                    ProposedContribution("scout", "findings", {"f": 1}),
                    ProposedPremiseWrite("scout", "window", 6, 1),
                ],
                idempotency_keys=["k1", "k2"],
            ),
        ]

    expected = [Written(first.sequence, repeat=True), Written(cas.sequence, 2, repeat=True)] * 2
    control.set_premise("scout", "window", 7, expected_version=2)  # the version moves on
    control.revoke("scout", "findings")
    assert repeats() == expected
    rule.verdict = Reject("would refuse it now")
    assert repeats() == expected
    control.abort("done")
    assert repeats() == expected
    asked = [p for p in rule.seen if isinstance(p, ProposedContribution)]
    assert asked == [ProposedContribution("scout", "findings", {"f": 1})]  # the first only
    with pytest.raises(IdempotencyKeyError, match="'k1' was already used"):
        control.write("scout", "findings", {"f": 2}, idempotency_key="k1")
    assert model.reader.head() == OPENING + 5  # 2 writes, the CAS to 7, the revoke, the close


def test_idempotency_key_reused_for_another_write_is_an_error(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    model.control.write("w", "findings", {"f": 1}, idempotency_key="k1")
    with pytest.raises(IdempotencyKeyError, match="'k1' was already used by the write at"):
        model.control.write("w", "findings", {"f": 2}, idempotency_key="k1")
    assert model.reader.head() == OPENING + 1


def test_batch_with_a_reused_key_writes_nothing(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    proposals = [
        ProposedContribution("w", "findings", {"f": 1}),
        ProposedContribution("w", "findings", {"f": 2}),
    ]
    with pytest.raises(IdempotencyKeyError):
        model.control.write_all(proposals, idempotency_keys=["same", "same"])
    assert model.reader.head() == OPENING


def test_a_repeat_in_its_batch_a_later_batch_or_alone_returns_the_first_write(
    store_spec: StoreSpec,
) -> None:
    """Same key, same write: the first sequence (and version), however it comes again."""
    model = _model(store_spec)
    control = model.control
    finding = ProposedContribution("w", "findings", {"f": 1})
    cas = ProposedPremiseWrite("w", "window", 6, 1)
    first_finding, first_cas = Written(OPENING + 1), Written(OPENING + 2, 2)
    again_finding = Written(OPENING + 1, repeat=True)
    again_cas = Written(OPENING + 2, 2, repeat=True)
    keys = ["k1", "k2", "k1", "k2"]
    batch = control.write_all([finding, cas, finding, cas], idempotency_keys=keys)
    assert batch == [first_finding, first_cas, again_finding, again_cas]
    later = control.write_all([cas, finding], idempotency_keys=["k2", "k1"])
    assert later == [again_cas, again_finding]
    assert control.write("w", "findings", {"f": 1}, idempotency_key="k1") == again_finding
    assert control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2") == (
        again_cas
    )
    # Further on, the expected version a repeat must match is 2, told by version 3.
    third = control.set_premise("w", "window", 7, expected_version=2, idempotency_key="k3")
    assert third == Written(OPENING + 3, 3)
    repeat = control.set_premise("w", "window", 7, expected_version=2, idempotency_key="k3")
    assert repeat == Written(OPENING + 3, 3, repeat=True)
    assert control.write_all([ProposedPremiseWrite("w", "window", 7, 2)], idempotency_keys=["k3"])
    assert model.reader.head() == OPENING + 3


def _write_one(model: Model, proposed: ProposedWrite, key: str) -> Any:
    if isinstance(proposed, ProposedContribution):
        return model.control.write(
            proposed.writer, proposed.level, proposed.content, idempotency_key=key
        )
    assert isinstance(proposed, ProposedPremiseWrite)
    return model.control.set_premise(
        proposed.writer,
        proposed.premise,
        proposed.value,
        expected_version=proposed.expected_version,
        idempotency_key=key,
    )


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        pytest.param("k1", ProposedContribution("w", "findings", {"f": 2}), id="content"),
        pytest.param("k1", ProposedContribution("v", "findings", {"f": 1}), id="writer"),
        pytest.param("k1", ProposedContribution("w", "hypotheses", {"f": 1}), id="level"),
        pytest.param("k2", ProposedPremiseWrite("w", "window", 7, 1), id="premise-value"),
        pytest.param("k2", ProposedPremiseWrite("v", "window", 6, 1), id="premise-writer"),
        # The premise's current version: admitted, were it not for the key.
        pytest.param("k2", ProposedPremiseWrite("w", "window", 6, 3), id="expected-version"),
        pytest.param("k2", ProposedContribution("w", "findings", 6), id="kind"),
    ],
)
def test_a_key_reused_for_a_write_differing_in_one_field_raises_and_writes_nothing(
    store_spec: StoreSpec, key: str, changed: ProposedWrite
) -> None:
    model = _model(store_spec)
    control = model.control
    assert control.write("w", "findings", {"f": 1}, idempotency_key="k1") == Written(OPENING + 1)
    cas = control.set_premise("w", "window", 6, expected_version=1, idempotency_key="k2")
    assert cas == Written(OPENING + 2, 2)
    assert control.set_premise("w", "window", 6, expected_version=2) == Written(OPENING + 3, 3)
    before, digest = model.reader.log(), model.reader.digest()
    with pytest.raises(IdempotencyKeyError, match=f"'{key}' was already used"):
        _write_one(model, changed, key)
    with pytest.raises(IdempotencyKeyError, match=f"'{key}' was already used"):
        control.write_all(
            [ProposedContribution("w", "findings", {"new": 1}), changed],
            idempotency_keys=[None, key],
        )
    assert model.reader.log() == before and model.reader.digest() == digest


@pytest.mark.parametrize(
    ("first", "changed"),
    [
        (ProposedContribution("w", "findings", {"f": 1}), ProposedContribution("w", "findings", 2)),
        (ProposedContribution("w", "findings", 1), ProposedContribution("v", "findings", 1)),
        (ProposedContribution("w", "findings", 1), ProposedContribution("w", "hypotheses", 1)),
        # The first lands at version 2, so the second is at the premise's version then.
        (ProposedPremiseWrite("w", "window", 6, 1), ProposedPremiseWrite("w", "window", 6, 2)),
    ],
)
def test_a_key_reused_inside_one_batch_raises_and_writes_nothing_of_it(
    store_spec: StoreSpec, first: ProposedWrite, changed: ProposedWrite
) -> None:
    model = _model(store_spec)
    before = model.reader.log()
    with pytest.raises(IdempotencyKeyError, match="'same' was already used"):
        model.control.write_all([first, changed], idempotency_keys=["same", "same"])
    assert model.reader.log() == before


def test_batch_commits_admitted_writes_and_reports_each(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    results = model.control.write_all(
        [
            ProposedContribution("w", "findings", {"f": 1}),
            ProposedContribution("scout", "hypotheses", {"h": 1}),
            ProposedPremiseWrite("w", "window", 9, 1),
            ProposedPremiseWrite("w", "window", 10, 1),
        ]
    )
    assert results[0] == Written(3)
    assert isinstance(results[1], Rejected)
    assert results[2] == Written(4, 2)
    assert results[3] == Conflict(2)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (float("nan"), "non-finite"),
        ({"x": float("inf")}, "non-finite"),
        ({1: "int key"}, "non-string key"),
        ({"s": {1, 2}}, "type set"),
        ((1, 2), "type tuple"),
        (object(), "type object"),
        (b"bytes", "type bytes"),
    ],
)
def test_content_that_is_not_json_is_refused(
    store_spec: StoreSpec, content: Any, fragment: str
) -> None:
    model = _model(store_spec)
    digest = model.reader.digest()
    with pytest.raises(ContentError, match=fragment):
        model.control.write("w", "findings", content)
    with pytest.raises(ContentError, match=fragment):
        model.control.set_premise("w", "window", content, expected_version=1)
    assert model.reader.digest() == digest


def test_too_deep_content_is_refused(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ContentError, match="nests deeper"):
        model.control.write("w", "findings", deep)
    assert model.reader.head() == OPENING


@pytest.mark.parametrize("writer", ["", "@board", None, 3])
def test_invalid_writer_names_are_refused(store_spec: StoreSpec, writer: Any) -> None:
    model = _model(store_spec)
    with pytest.raises(WriterError):
        model.control.write(writer, "findings", {"f": 1})
    assert model.reader.head() == OPENING


@pytest.mark.parametrize("version", [0, -1, True, "1", 1.0, 2**70, None])
def test_invalid_expected_versions_are_refused(store_spec: StoreSpec, version: Any) -> None:
    model = _model(store_spec)
    with pytest.raises(ContentError, match="expected_version"):
        model.control.set_premise("w", "window", 1, expected_version=version)
    assert model.reader.head() == OPENING


def test_subscribers_are_notified_in_order_outside_the_lock(store_spec: StoreSpec) -> None:
    seen: list[Notification] = []
    holder: dict[str, Model] = {}

    def on_wake(note: Notification) -> None:
        seen.append(note)
        # Writing from inside a notification must not deadlock: the lock is not held.
        if note.record.region == "window" and note.record.content < 7:
            assert note.record.version is not None  # a premise record carries its version
            holder["m"].control.set_premise(
                "echo", "window", note.record.content + 1, expected_version=note.record.version
            )

    model = _model(
        store_spec,
        agents=[Agent("scout", writes_to=["findings"], subscribes_to=["window"], notify=on_wake)],
    )
    holder["m"] = model
    model.control.write("w", "findings", {"f": 1})  # not subscribed: no notification
    model.control.set_premise("w", "window", 5, expected_version=1)
    assert [(n.agent, n.record.content, n.record.version) for n in seen] == [
        ("scout", 5, 2),
        ("scout", 6, 3),
        ("scout", 7, 4),
    ]


def test_a_failing_agent_does_not_undo_the_write(store_spec: StoreSpec) -> None:
    def explode(note: Notification) -> None:
        raise RuntimeError("agent bug")

    model = _model(
        store_spec,
        agents=[Agent("scout", writes_to=["findings"], subscribes_to=["findings"], notify=explode)],
    )
    assert model.control.write("w", "findings", {"f": 1}) == Written(3)
    assert len(model.reader.read_level("findings")) == 1


def test_grant_and_revoke_are_sequenced(store_spec: StoreSpec) -> None:
    model = _model(store_spec)
    granted = model.control.grant("scout", "hypotheses")
    assert isinstance(granted, Written)
    assert isinstance(model.control.write("scout", "hypotheses", {"h": 1}), Written)
    model.control.revoke("scout", "hypotheses")
    refused = model.control.write("scout", "hypotheses", {"h": 2})
    assert isinstance(refused, Rejected) and refused.cause is RejectionCause.NOT_PERMITTED
    kinds = [r.kind for r in model.reader.log()]
    assert kinds[-3:] == [RecordKind.GRANT, RecordKind.LEVEL, RecordKind.REVOKE]
    with pytest.raises(WriterError, match="not a registered agent"):
        model.control.grant("stranger", "hypotheses")


def test_writer_names_stay_checked_on_every_write() -> None:
    """The control remembers names it found valid; every other name is still checked."""

    class Name(str):
        pass

    model = create_model(regions=[Level("notes"), Premise("p")], premises={"p": 0})
    control = model.control
    bad_names: list[Any] = ["@board", "", "w\ud800", Name("@w1"), 7, None]

    def refused() -> None:
        for bad in bad_names:
            with pytest.raises(WriterError, match="not a valid writer name"):
                control.write(bad, "notes", {"x": 1})
            with pytest.raises(WriterError, match="not a valid writer name"):
                control.set_premise(bad, "p", 1, expected_version=1)

    head = model.reader.head()
    refused()
    assert model.reader.head() == head
    for i in range(5000):  # past the 4,096 names it remembers
        assert isinstance(control.write(f"w{i}", "notes", {"i": i}), Written)
    assert isinstance(control.write(Name("w1"), "notes", {"i": "again"}), Written)
    head = model.reader.head()
    refused()
    with pytest.raises(UndeclaredRegionError):
        control.write("w1", Name("nope"), {"x": 1})
    assert isinstance(control.write("w1", Name("notes"), {"x": 1}), Written)
    assert model.reader.head() == head + 1


# -- a batch reads ahead of its transaction only where that can settle a write -----------------


class _CountingStore(MemoryStore):
    """A memory store that counts the read-aheads a batch asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.read_aheads = 0

    def read_ahead(self, board_id: str, writes: Sequence[PendingWrite]) -> Any:
        self.read_aheads += 1
        return super().read_ahead(board_id, writes)


def _rejecting(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    if isinstance(proposed, ProposedContribution) and proposed.content.get("bad"):
        return Reject("bad")
    return Accept()


@pytest.mark.parametrize(
    ("case", "aheads"),
    [
        ("plain", 0),  # nothing could settle early: no read-ahead (the memory store's wish)
        ("rule", 1),
        ("keyed", 1),
        ("judged", 1),
        ("guarded", 1),
    ],
)
def test_a_batch_reads_ahead_only_where_that_can_settle_a_write(case: str, aheads: int) -> None:
    store = _CountingStore()
    model = create_model(
        [Level("notes")],
        agents=[Agent("clerk", writes_to=["notes"])] if case == "guarded" else (),
        admission_rule=_rejecting if case == "rule" else None,
        store=store,
    )
    proposals: list[Any] = [ProposedContribution("clerk", "notes", {"n": n}) for n in range(3)]
    if case == "judged":
        proposals[1] = model.control.judge(proposals[1])
    keys = [f"k{n}" for n in range(3)] if case == "keyed" else None
    store.read_aheads = 0
    results = model.control.write_all(proposals, idempotency_keys=keys)
    assert [type(r) for r in results] == [Written] * 3
    assert store.read_aheads == aheads


def test_a_batch_of_plain_writes_is_judged_by_the_rule_write_by_write() -> None:
    """No key, no verdict, no guard: the rule still decides each write of a batch."""
    model = create_model([Level("notes")], admission_rule=_rejecting, store=_CountingStore())
    results = model.control.write_all(
        [ProposedContribution("clerk", "notes", {"n": n, "bad": n == 1}) for n in range(3)]
    )
    assert [type(r) for r in results] == [Written, Rejected, Written]
    assert [c.content["n"] for c in model.reader.read_level("notes")] == [0, 2]

"""Who is told of what: a region's subscribers of its writes, an agent of its permissions.

A subscriber of a level is told of that level's contributions (of a premise, of its
values) and of nothing else: a grant or revoke naming the region is not a contribution
to it. A grant or revoke is told to the agent it concerns, at once, when it commits,
not at whatever write happens next (docs/adr/0008-who-is-notified.md).
"""

from __future__ import annotations

from typing import Any

from blackboard import (
    Agent,
    Level,
    Model,
    Notification,
    Premise,
    RecordKind,
    Rejected,
    RejectionCause,
    Written,
    create_model,
)
from storekit import StoreSpec

CONTRIBUTIONS = {RecordKind.LEVEL, RecordKind.PREMISE}
PERMISSIONS = {RecordKind.GRANT, RecordKind.REVOKE}


class Inbox:
    """An agent's ``notify``: keeps every notification it is handed."""

    def __init__(self) -> None:
        self.notes: list[Notification] = []

    def __call__(self, note: Notification) -> None:
        self.notes.append(note)

    def seen(self) -> list[tuple[str, RecordKind, str | None, Any]]:
        return [(n.agent, n.record.kind, n.record.region, n.record.content) for n in self.notes]


def _model(spec: StoreSpec, agents: list[Agent]) -> Model:
    return create_model(
        regions=[Level("hypotheses"), Level("findings"), Premise("window", guarded=True)],
        premises={"window": 5},
        agents=agents,
        store=spec.open(),
        board_id="notes",
    )


def test_a_region_subscriber_is_never_handed_a_grant_or_revoke(store_spec: StoreSpec) -> None:
    watcher = Inbox()
    model = _model(
        store_spec,
        [
            Agent("scout", writes_to=["findings"]),
            Agent("watcher", subscribes_to=["hypotheses", "findings", "window"], notify=watcher),
        ],
    )
    control = model.control
    assert isinstance(control.grant("scout", "hypotheses"), Written)
    assert isinstance(control.grant("scout", "window"), Written)
    control.write("scout", "hypotheses", {"h": 1})
    control.set_premise("scout", "window", 6, expected_version=1)
    assert isinstance(control.revoke("scout", "hypotheses"), Written)
    assert isinstance(control.revoke("scout", "findings"), Written)
    control.write("other", "findings", {"f": 1})  # delivers whatever was still queued
    assert watcher.seen() == [
        ("watcher", RecordKind.LEVEL, "hypotheses", {"h": 1}),
        ("watcher", RecordKind.PREMISE, "window", 6),
        ("watcher", RecordKind.LEVEL, "findings", {"f": 1}),
    ]


def test_the_control_loop_hands_subscribers_no_opening_grants(store_spec: StoreSpec) -> None:
    """``run()`` replays the board's contributions, not the grants its declaration made."""
    watcher, scout = Inbox(), Inbox()
    model = _model(
        store_spec,
        [
            Agent("scout", writes_to=["findings", "window"], notify=scout),
            Agent("watcher", subscribes_to=["findings", "window"], notify=watcher),
        ],
    )
    model.control.write("scout", "findings", {"f": 1})
    watcher.notes.clear()
    model.run()
    assert watcher.seen() == [
        ("watcher", RecordKind.PREMISE, "window", 5),
        ("watcher", RecordKind.LEVEL, "findings", {"f": 1}),
    ]
    assert scout.notes == []  # its permissions are in reader.state().permissions


def test_the_agent_granted_or_revoked_is_told_at_once(store_spec: StoreSpec) -> None:
    scout, bystander = Inbox(), Inbox()
    model = _model(
        store_spec,
        [
            Agent("scout", writes_to=["findings"], notify=scout),
            Agent("bystander", subscribes_to=["hypotheses"], notify=bystander),
        ],
    )
    granted = model.control.grant("scout", "hypotheses")
    assert isinstance(granted, Written)
    # No further write: the grant itself delivers it.
    assert [(n.record.kind, n.record.sequence) for n in scout.notes] == [
        (RecordKind.GRANT, granted.sequence)
    ]
    revoked = model.control.revoke("scout", "findings")
    assert isinstance(revoked, Written)
    assert scout.seen() == [
        ("scout", RecordKind.GRANT, "hypotheses", {"agent": "scout"}),
        ("scout", RecordKind.REVOKE, "findings", {"agent": "scout"}),
    ]
    assert scout.notes[-1].record.sequence == revoked.sequence
    assert bystander.notes == []  # not its permission, and not a contribution


def test_an_agent_subscribed_to_the_region_is_told_of_its_grant_once(
    store_spec: StoreSpec,
) -> None:
    scout = Inbox()
    model = _model(store_spec, [Agent("scout", subscribes_to=["hypotheses"], notify=scout)])
    model.control.grant("scout", "hypotheses")
    assert scout.seen() == [("scout", RecordKind.GRANT, "hypotheses", {"agent": "scout"})]
    model.control.write("scout", "hypotheses", {"h": 1})
    assert scout.seen() == [
        ("scout", RecordKind.GRANT, "hypotheses", {"agent": "scout"}),
        ("scout", RecordKind.LEVEL, "hypotheses", {"h": 1}),
    ]


def test_a_grant_made_while_notifying_is_told_in_sequence_order(store_spec: StoreSpec) -> None:
    """A handler that grants does not get the grant before the write it is handling ends."""
    order: list[tuple[str, int]] = []
    holder: dict[str, Model] = {}

    def on_finding(note: Notification) -> None:
        order.append(("lead", note.record.sequence))
        if note.record.kind is RecordKind.LEVEL:
            holder["m"].control.grant("scout", "hypotheses")
            order.append(("granted", holder["m"].reader.head()))

    def on_permission(note: Notification) -> None:
        order.append(("scout", note.record.sequence))

    model = _model(
        store_spec,
        [
            Agent("lead", subscribes_to=["findings"], notify=on_finding),
            Agent("scout", notify=on_permission),
        ],
    )
    holder["m"] = model
    written = model.control.write("w", "findings", {"f": 1})
    assert isinstance(written, Written)
    grant = written.sequence + 1
    assert order == [("lead", written.sequence), ("granted", grant), ("scout", grant)]


def test_only_a_committed_grant_is_told(store_spec: StoreSpec) -> None:
    scout = Inbox()
    model = _model(store_spec, [Agent("scout", notify=scout)])
    assert isinstance(model.control.grant("scout", "hypotheses"), Written)
    model.control.abort("stop")
    refused = model.control.revoke("scout", "hypotheses")
    assert isinstance(refused, Rejected) and refused.cause is RejectionCause.RUN_CLOSED
    assert [n.record.kind for n in scout.notes] == [RecordKind.GRANT]


def test_a_failing_agent_does_not_undo_its_grant(store_spec: StoreSpec) -> None:
    calls: list[int] = []

    def explode(note: Notification) -> None:
        calls.append(note.record.sequence)
        raise RuntimeError("agent bug")

    model = _model(store_spec, [Agent("scout", notify=explode)])
    granted = model.control.grant("scout", "hypotheses")
    assert isinstance(granted, Written) and calls == [granted.sequence]
    assert ("scout", "hypotheses") in model.reader.state().permissions
    assert isinstance(model.control.write("scout", "hypotheses", {"h": 1}), Written)

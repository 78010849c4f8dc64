"""The three admission-rule examples of seed 001, verbatim, on every store."""

from __future__ import annotations

from typing import Any

from blackboard import (
    Accept,
    Level,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    Reject,
    Rejected,
    RejectionCause,
    Written,
    create_model,
)
from storekit import StoreSpec


def validate_bundle(content: Any) -> Accept | Reject:
    if isinstance(content, dict) and content.get("bundle"):
        return Accept()
    return Reject("a bundle must say bundle: true")


# --- seed 001, "Telling the two kinds apart" ------------------------------------------


def rule_kinds(proposed, reader):  # type: ignore[no-untyped-def]
    if isinstance(proposed, ProposedContribution):
        return validate_bundle(proposed.content)
    if isinstance(proposed, ProposedPremiseWrite):
        return Accept() if proposed.premise != "window" else Reject("window is fixed")
    return Accept()


# --- seed 001, "Validating content" ----------------------------------------------------


def rule_content(proposed, reader):  # type: ignore[no-untyped-def]
    if not isinstance(proposed, ProposedContribution):
        return Accept()
    content = proposed.content
    if not isinstance(content, dict) or "findings" not in content:
        return Reject("a contribution carries findings")
    return Accept()


# --- seed 001, "Reading the board" -----------------------------------------------------


def refuse_duplicates(proposed, reader):  # type: ignore[no-untyped-def]
    if isinstance(proposed, ProposedContribution):
        for existing in reader.read_level(proposed.level):
            if existing.content == proposed.content:
                return Reject("a duplicate of a contribution already on the board")
    return Accept()


def _model(spec: StoreSpec, rule: Any) -> Any:
    return create_model(
        regions=[Level("findings"), Premise("window"), Premise("other")],
        premises={"window": 5, "other": 0},
        admission_rule=rule,
        store=spec.open(),
        board_id="seed",
    )


def test_telling_the_two_kinds_apart(store_spec: StoreSpec) -> None:
    model = _model(store_spec, rule_kinds)
    assert isinstance(model.control.write("w", "findings", {"bundle": True}), Written)
    refused = model.control.write("w", "findings", {"bundle": False})
    assert refused == Rejected(RejectionCause.ADMISSION, "a bundle must say bundle: true")
    window = model.reader.read_premise("window")
    fixed = model.control.set_premise("w", "window", 6, expected_version=window.version)
    assert fixed == Rejected(RejectionCause.ADMISSION, "window is fixed")
    other = model.reader.read_premise("other")
    assert model.control.set_premise("w", "other", 1, expected_version=other.version) == Written(
        sequence=4, version=2
    )
    assert model.reader.read_premise("window").value == 5


def test_validating_content(store_spec: StoreSpec) -> None:
    model = _model(store_spec, rule_content)
    assert model.control.write("w", "findings", {"findings": ["x"]}) == Written(sequence=3)
    for bad in ({"other": 1}, ["findings"], "findings"):
        result = model.control.write("w", "findings", bad)
        assert result == Rejected(RejectionCause.ADMISSION, "a contribution carries findings")
    assert [c.content for c in model.reader.read_level("findings")] == [{"findings": ["x"]}]
    assert model.reader.head() == 3


def test_reading_the_board_refuses_duplicates(store_spec: StoreSpec) -> None:
    model = _model(store_spec, refuse_duplicates)
    assert isinstance(model.control.write("a", "findings", {"f": 1}), Written)
    again = model.control.write("b", "findings", {"f": 1})
    assert again == Rejected(
        RejectionCause.ADMISSION, "a duplicate of a contribution already on the board"
    )
    assert isinstance(model.control.write("b", "findings", {"f": 2}), Written)
    assert len(model.reader.read_level("findings")) == 2

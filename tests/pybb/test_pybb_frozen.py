"""The engine's cheap construction of frozen dataclasses (``blackboard.frozen.builder``).

What it builds must be exactly what the class's own constructor builds: the same class,
equal field by field, hashed and printed the same, and as frozen.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from blackboard import ProposedContribution
from blackboard.frozen import builder
from pybb import BlackboardEntry, Chain, Segment, Stage


def _same(built: Any, expected: Any) -> None:
    assert type(built) is type(expected)
    for field in dataclasses.fields(expected):
        assert getattr(built, field.name) is getattr(expected, field.name), field.name
    assert built == expected and repr(built) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(dataclasses.fields(expected)[0].name, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, dataclasses.fields(expected)[0].name)
    assert not hasattr(built, "__dict__")


def test_a_built_contribution_is_the_constructors_value() -> None:
    content = {"key": "e1", "result": True}
    built = builder(ProposedContribution)("controller", "pybb.verdicts", content)
    expected = ProposedContribution("controller", "pybb.verdicts", content)
    _same(built, expected)
    frozen_value = builder(ProposedContribution)("w", "l", 3)
    assert hash(frozen_value) == hash(ProposedContribution("w", "l", 3))
    assert dataclasses.replace(frozen_value, content=4) == ProposedContribution("w", "l", 4)


def test_a_built_entry_is_the_constructors_value() -> None:
    values = (
        "less_than_3",
        {"x": "less_than_3"},
        {"x": 5},
        {"x": False},
        False,
        {"x": 6},
        {"decrement": 2},
        Segment.CERTIFY,
        Stage.WORKING,
        "decrement",
        Chain.ON_FAIL,
        2,
    )
    built = builder(BlackboardEntry)(*values)
    _same(built, BlackboardEntry(*values))
    with pytest.raises(TypeError):  # every field is given, none defaulted
        builder(BlackboardEntry)(*values[:-1])

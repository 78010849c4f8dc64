"""The engine's cheap construction of frozen dataclasses (``blackboard.frozen.builder``).

What it builds must be exactly what the class's own constructor builds: the same class,
equal field by field, hashed and printed the same, and as frozen.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
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


def test_the_entrys_constructor_takes_exactly_its_fields_and_their_defaults() -> None:
    # BlackboardEntry's __new__ spells out its fields (docs/adr/0025): a field added to
    # the class but not to __new__, or a default that differs, fails here.
    parameters = list(inspect.signature(BlackboardEntry).parameters.values())
    fields = dataclasses.fields(BlackboardEntry)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        if field.default_factory is not dataclasses.MISSING:
            assert field.default_factory() == {}  # ks_history: a fresh dict, see below
        else:
            assert parameter.default is field.default, field.name
    first, second = BlackboardEntry(), BlackboardEntry()
    assert first.ks_history == {} and first.ks_history is not second.ks_history
    given = {"decrement": 1}
    assert BlackboardEntry(ks_history=given).ks_history is given


def test_the_entry_copies_pickles_and_replaces_as_a_frozen_dataclass() -> None:
    entry = BlackboardEntry(
        "less_than_3", measurement={"x": 5}, stage=Stage.WORKING, chain=Chain.ON_FAIL
    )
    assert entry == BlackboardEntry(
        predicate="less_than_3", measurement={"x": 5}, stage=Stage.WORKING, chain=Chain.ON_FAIL
    )
    for twin in (copy.copy(entry), copy.deepcopy(entry), pickle.loads(pickle.dumps(entry))):
        _same_fields(twin, entry)
    replaced = dataclasses.replace(entry, measurement=2, generation=3)
    assert (replaced.measurement, replaced.generation, replaced.predicate) == (
        2,
        3,
        "less_than_3",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.measurement = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        BlackboardEntry(nonsense=1)  # type: ignore[call-arg]


def _same_fields(twin: BlackboardEntry, entry: BlackboardEntry) -> None:
    assert type(twin) is BlackboardEntry and twin == entry and repr(twin) == repr(entry)
    assert twin.measurement is not entry.measurement or twin is not entry

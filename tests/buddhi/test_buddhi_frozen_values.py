"""The values evaluate_item builds per item stay frozen dataclasses with their signatures.

Their ``__init__`` is ``buddhi._frozen.fast_init``'s (slots set through their member
descriptors, for speed); these tests hold it to the contract of the dataclass-generated
one it replaces: the same parameters and defaults, keyword calls, ``replace``, equality
and hashing, ``__post_init__`` checks, and no way to assign or delete a field. The
kernel's hot path builds them with ``buddhi._frozen.builder`` (a twin class whose
instances become the frozen class): what it returns must be indistinguishable from
what the class builds.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from buddhi import (
    GLOBAL_SCOPE,
    Admission,
    AdmissionRequest,
    Ask,
    AskOption,
    ConvergenceReport,
    Decision,
    Disposition,
    Exclusions,
    GraduatedBar,
    InvalidAsk,
    Item,
    Outcome,
    RouteJudgment,
    RouterPick,
    Scope,
    ScopeCounter,
    Spend,
    evaluate_item,
)
from buddhi._frozen import builder, fast_init
from buddhi.errors import BudgetError
from buddhi.reference import build_seams

PICK = RouterPick("m", "low")
SAMPLES: list[Any] = [
    Outcome(Item("i", "s"), Disposition.DISCARDED, Decision.WORTH_ACTING),
    RouteJudgment(True, 0.9, 0.8),
    InvalidAsk("i", ("bad",), None),
    Spend("m", "low", 1, PICK),
    ConvergenceReport(False, 0, 0, False),
    Ask("i", "q", (AskOption("a"), AskOption("b", recommended=True)), 0.5),
    AdmissionRequest(GLOBAL_SCOPE, "i", "s", 0.5, GraduatedBar()),
    Admission("i", GLOBAL_SCOPE, 0.0, 0.5, 0.9, 1, 10),
    ScopeCounter(Scope(GLOBAL_SCOPE, 10)),
    Exclusions("s"),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_the_signature_is_the_fields_with_their_defaults(value: Any) -> None:
    cls = type(value)
    params = list(inspect.signature(cls).parameters.values())
    expected = [(f.name, f.default) for f in dataclasses.fields(cls)]
    got = [
        (p.name, dataclasses.MISSING if p.default is inspect.Parameter.empty else p.default)
        for p in params
    ]
    assert got == expected
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    assert cls.__init__.__annotations__ == {**hints, "return": None}


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_the_value_stays_frozen(value: Any) -> None:
    name = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, name, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(value, name)
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        value.not_a_field = 1
    assert not hasattr(value, "__dict__")


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_keyword_calls_replace_pickle_equality_and_hash_still_work(value: Any) -> None:
    cls = type(value)
    kwargs = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    again = cls(**kwargs)
    assert again == value and hash(again) == hash(value) and repr(again) == repr(value)
    assert dataclasses.replace(value) == value
    assert pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(TypeError):
        cls(**kwargs, bogus=1)
    with pytest.raises(TypeError):
        cls()


def test_post_init_checks_still_run() -> None:
    with pytest.raises(BudgetError, match="finite number in"):
        AdmissionRequest(GLOBAL_SCOPE, "i", "s", 1.5, GraduatedBar())
    with pytest.raises(BudgetError, match="scope path"):
        AdmissionRequest((), "i", "s", 0.5, GraduatedBar())


def test_every_outcome_evaluate_item_builds_is_frozen() -> None:
    outcome = evaluate_item(Item("i", "s"), build_seams())
    assert outcome.disposition is Disposition.ESCALATED
    for value in (outcome, outcome.spend, outcome.convergence, outcome.route, outcome.ask):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_a_builder_builds_exactly_what_the_class_builds(value: Any) -> None:
    cls = type(value)
    build = builder(cls)
    args = [getattr(value, f.name) for f in dataclasses.fields(value)]
    built = build(*args)
    assert type(built) is cls and isinstance(built, cls)
    assert built == value and hash(built) == hash(value) and repr(built) == repr(value)
    assert pickle.loads(pickle.dumps(built)) == value
    assert dataclasses.replace(built) == value
    name = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, name, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, name)
    assert not hasattr(built, "__dict__")
    required = [f for f in dataclasses.fields(value) if f.default is dataclasses.MISSING]
    assert build(*args[: len(required)]) == cls(*args[: len(required)])  # the defaults
    with pytest.raises(TypeError):
        build(*args, bogus=1)


def test_a_builder_runs_post_init() -> None:
    build = builder(AdmissionRequest)
    with pytest.raises(BudgetError, match="finite number in"):
        build(GLOBAL_SCOPE, "i", "s", 1.5, GraduatedBar())


def test_evaluate_item_builds_outcomes_of_the_public_classes() -> None:
    outcome = evaluate_item(Item("i", "s"), build_seams())
    values = [outcome, outcome.spend, outcome.convergence, outcome.route, outcome.ask]
    assert [type(value).__name__ for value in values] == [
        "Outcome",
        "Spend",
        "ConvergenceReport",
        "RouteJudgment",
        "Ask",
    ]
    assert type(outcome) is Outcome and type(outcome.admission) is Admission
    assert type(outcome.route) is RouteJudgment and type(outcome.ask) is Ask


def test_fast_init_refuses_what_it_cannot_copy_faithfully() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclass(frozen=True, slots=True)
    class Factory:
        x: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        x: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        x: int
        y: dataclasses.InitVar[int]

        def __post_init__(self, y: int) -> None:
            pass

    for cls in (NoSlots, NotFrozen, Factory, KeywordOnly, WithInitVar, int):
        with pytest.raises(TypeError):
            fast_init(cls)
        with pytest.raises(TypeError):
            builder(cls)

"""The public faces of buddhi: curated __all__ lists, the error tree, and no upward imports."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys

import pytest

import buddhi
from buddhi import errors

EXPECTED = {
    "buddhi": [
        "GLOBAL_SCOPE",
        "Admission",
        "AdmissionRefused",
        "AdmissionRequest",
        "Ask",
        "AskOption",
        "Attempt",
        "Bar",
        "BuddhiError",
        "BudgetExhausted",
        "BudgetTree",
        "Clock",
        "Context",
        "ConvergencePolicy",
        "ConvergenceReport",
        "Decision",
        "Disposition",
        "EffortScale",
        "EscalationTransport",
        "ExclusionCause",
        "Exclusions",
        "GraduatedBar",
        "InvalidAsk",
        "Item",
        "OOBSource",
        "Outcome",
        "PolicyPack",
        "RawInput",
        "Resolution",
        "RouteJudgment",
        "Router",
        "RouterPick",
        "Scope",
        "ScopeCounter",
        "ScopePath",
        "ScopeSpec",
        "Seams",
        "SourceExcluded",
        "Spend",
        "Store",
        "Stream",
        "StreamReport",
        "SystemClock",
        "Tier",
        "TriggerHook",
        "assess_admission",
        "condition",
        "evaluate_item",
        "supervise_stream",
        "supervise_stream_of_streams",
    ],
    "buddhi.reference": [
        "DEFAULT_CAUSES",
        "DEFAULT_EFFORTS",
        "DEFAULT_POLICY",
        "PLACEHOLDERS",
        "BlindOOBSource",
        "CollectingTransport",
        "MemoryStore",
        "Policy",
        "RecordedResolutions",
        "ReferencePack",
        "StaticRouter",
        "build_seams",
    ],
    "buddhi.testing": ["CONTENDERS", "FakeClock", "StoreFactory", "check_store"],
    "buddhi.stage0": ["RawInput", "condition"],
    "buddhi.closure": ["evaluate_item", "supervise_stream", "supervise_stream_of_streams"],
    "buddhi.decisions": [
        "InvalidAsk",
        "aggregate_budget",
        "check_oob_resolution",
        "decide_spend",
        "has_converged",
        "route_judgment",
        "validate_and_ask",
        "worth_acting",
    ],
}


def ruff_order(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("module_name", sorted(EXPECTED))
def test_all_is_curated_and_sorted(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == EXPECTED[module_name]
    assert module.__all__ == sorted(module.__all__, key=ruff_order)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_the_seven_dispositions_and_decisions() -> None:
    assert [d.name for d in buddhi.Disposition] == [
        "DISCARDED",
        "CONVERGED",
        "MODEL_HANDLED",
        "INVALID_ASK",
        "RESOLVED_OOB",
        "ESCALATED",
        "DENIED",
    ]
    assert [d.value for d in buddhi.Decision] == [
        "worth_acting",
        "decide_spend",
        "has_converged",
        "route_judgment",
        "validate_and_ask",
        "check_oob_resolution",
        "aggregate_budget",
    ]


def test_every_public_name_is_documented() -> None:
    for module_name, names in EXPECTED.items():
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert (value.__doc__ or "").strip(), f"{module_name}.{name} has no docstring"


def test_the_error_tree_in_the_docstring_is_the_real_tree() -> None:
    doc = errors.__doc__ or ""
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = re.match(r"^(\s*)(?:[│ ]*[├└]── )?([A-Z]\w+)\b", line)
        if not match or not line.startswith("    "):
            continue
        depth = len(line) - len(line.lstrip(" │├└─"))
        name = match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            drawn[name] = stack[-1][1]
        stack.append((depth, name))
    assert set(drawn) | {"BuddhiError"} == set(errors.__all__)
    for name, parent in drawn.items():
        assert getattr(errors, parent) in getattr(errors, name).__bases__, (name, parent)


def test_every_error_has_the_one_root() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.BuddhiError), name


@pytest.mark.parametrize(
    "statement",
    [
        "import buddhi",
        "import buddhi, buddhi.reference, buddhi.testing, buddhi.closure, buddhi.stage0",
    ],
)
def test_buddhi_imports_nothing_from_pybb_or_blackboard(statement: str) -> None:
    code = (
        f"{statement}, sys\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "assert not loaded & {'pybb', 'blackboard'}, loaded & {'pybb', 'blackboard'}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_seed_command_passes() -> None:
    code = (
        "import buddhi, sys; "
        "assert not any(m.split('.')[0] in ('pybb','blackboard') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""The packages' public faces and the direction of their dependencies.

The first test imports each package in a fresh process and looks at what got loaded;
the layer rules below read every module of ``src/`` without importing it (the graph of
``test_import_graph``: runtime, ``TYPE_CHECKING`` and function-local imports alike) and
follow its imports transitively, so a subpackage cannot reach a layer above it through a
deferred import or through a module in between.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Mapping

import pytest

from test_import_graph import SRC, import_graph

FORBIDDEN = {
    "blackboard": {"pybb", "buddhi"},
    "pybb": {"buddhi"},
    "buddhi": {"pybb", "blackboard"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_loads_nothing_above_it(package: str) -> None:
    code = (
        f"import sys, {package}\nprint(','.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    )
    loaded = set(
        subprocess.check_output([sys.executable, "-c", code], text=True).strip().split(",")
    )
    assert not loaded & FORBIDDEN[package], f"{package} imports {loaded & FORBIDDEN[package]}"


@pytest.mark.parametrize(
    "package",
    ["blackboard", "blackboard.faults", "blackboard.stores", "pybb", "buddhi", "buddhi.errors"],
)
def test_all_is_sorted_and_complete(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)  # the order ruff's RUF022 keeps
    for name in exported:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
    root = package.split(".")[0]
    own = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and getattr(v, "__module__", "").split(".")[0] == root
        and not isinstance(v, type(module))
    }
    assert own <= set(exported), f"public but not exported: {own - set(exported)}"


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


def test_blackboard_exports_the_seed_names() -> None:
    import blackboard

    assert {
        "create_model",
        "Level",
        "Premise",
        "Agent",
        "Accept",
        "Reject",
        "Written",
        "Conflict",
        "Rejected",
        "RejectionCause",
        "ProposedContribution",
        "ProposedPremiseWrite",
        "ProposedWrite",
        "AdmissionRule",
        "BoardReader",
        "Contribution",
        "PremiseState",
        "BlackboardError",
        "UndeclaredRegionError",
        "RegionKindError",
    } <= set(blackboard.__all__)
    # What pybb needs of the kernel, public (issue 12): a write judged once, fault points.
    assert {"Judged"} <= set(blackboard.__all__)
    assert callable(blackboard.Control.judge)
    import blackboard.faults

    assert {"POINTS", "fault_point", "install", "SeededPlan"} <= set(blackboard.faults.__all__)
    assert {c.name for c in blackboard.RejectionCause} >= {
        "ADMISSION",
        "NOT_PERMITTED",
        "RUN_CLOSED",
    }


# -- layers, subpackage by subpackage -------------------------------------------------------

ENGINE = ("pybb._engine",)
"""pybb's engine: Blackboard, BlackboardEntry, KnowledgeSource, Controller, the worker."""
APPS = (
    "pybb.attestation",
    "pybb.cli",
    "pybb.human",
    "pybb.inbox",
    "pybb.supervision",
    "pybb.workloads",
)
"""pybb's applications, built on the engine."""
CONTROLLER = ("pybb._engine.controller",)
"""The controller, which the human loop's parts talk to through the board only."""
HUMAN_LOOP = ("pybb.human", "pybb.inbox")

# (what is checked, the modules it covers, what they must not reach, those excepted)
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = [
    ("blackboard imports neither pybb nor buddhi", ("blackboard",), ("pybb", "buddhi"), ()),
    ("buddhi imports no pybb", ("buddhi",), ("pybb",), ()),
    (
        "buddhi's core (all but buddhi.board) imports no blackboard",
        ("buddhi",),
        ("blackboard",),
        ("buddhi.board",),
    ),
    ("pybb's engine imports no application", ENGINE, APPS, ()),
    ("pybb.human and pybb.inbox import no controller", HUMAN_LOOP, CONTROLLER, ()),
]


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _reach(graph: Mapping[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` imports, directly or not, each with the module it came from."""
    came_from: dict[str, str] = {}
    todo = [start]
    while todo:
        node = todo.pop()
        for target in sorted(graph[node]):
            if target not in came_from and target != start:
                came_from[target] = node
                todo.append(target)
    return came_from


def _path(came_from: Mapping[str, str], start: str, end: str) -> str:
    steps = [end]
    while steps[-1] != start:
        steps.append(came_from[steps[-1]])
    return " -> ".join(reversed(steps))


def layer_violations(
    graph: Mapping[str, set[str]],
    covered: tuple[str, ...],
    forbidden: tuple[str, ...],
    excepted: tuple[str, ...] = (),
) -> list[str]:
    """Each import path from a covered module to a forbidden one, shortest first found."""
    found = []
    for module in sorted(graph):
        if not _under(module, covered) or _under(module, excepted):
            continue
        came_from = _reach(graph, module)
        for target in sorted(came_from):
            if _under(target, forbidden):
                found.append(_path(came_from, module, target))
    return found


def _missing(graph: Mapping[str, set[str]], prefixes: tuple[str, ...]) -> list[str]:
    return [p for p in prefixes if not any(_under(m, (p,)) for m in graph)]


@pytest.mark.parametrize(
    ("rule", "covered", "forbidden", "excepted"), RULES, ids=[r[0] for r in RULES]
)
def test_a_layer_reaches_nothing_above_it(
    rule: str, covered: tuple[str, ...], forbidden: tuple[str, ...], excepted: tuple[str, ...]
) -> None:
    graph = import_graph(SRC)
    absent = _missing(graph, covered) + _missing(graph, forbidden)
    # A rule covers nothing when its modules, or all it forbids, are not in src/. That is
    # expected until pybb's engine moves into pybb/_engine/; once the engine package
    # exists, it is a rename this test missed, and it fails rather than pass for ever.
    if _missing(graph, covered) or len(_missing(graph, forbidden)) == len(forbidden):
        if _missing(graph, ENGINE):
            pytest.skip(f"{rule}: waits for pybb's engine in {ENGINE[0]} ({absent} not in src/)")
        pytest.fail(f"{rule} covers nothing: {absent} not in src/; update the names in this test")
    violations = layer_violations(graph, covered, forbidden, excepted)
    assert not violations, f"{rule}, but:\n  " + "\n  ".join(violations)


def test_the_layer_check_finds_a_reach_through_a_module_in_between() -> None:
    graph = {
        "pybb._engine.run": {"pybb._engine.util"},
        "pybb._engine.util": {"pybb.human.ask"},  # e.g. under TYPE_CHECKING
        "pybb.human.ask": set(),
        "pybb.cli": {"pybb._engine.run"},  # an application may use the engine
    }
    assert layer_violations(graph, ENGINE, APPS) == [
        "pybb._engine.run -> pybb._engine.util -> pybb.human.ask",
        "pybb._engine.util -> pybb.human.ask",
    ]
    assert layer_violations(graph, ("pybb.cli",), ENGINE) == [
        "pybb.cli -> pybb._engine.run",
        "pybb.cli -> pybb._engine.run -> pybb._engine.util",
    ]
    assert layer_violations(graph, ENGINE, APPS, excepted=("pybb._engine",)) == []

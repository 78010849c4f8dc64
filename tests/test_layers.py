"""The packages' public faces and the direction of their dependencies."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

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


@pytest.mark.parametrize("package", ["blackboard", "blackboard.stores", "pybb", "buddhi"])
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
    assert {c.name for c in blackboard.RejectionCause} >= {
        "ADMISSION",
        "NOT_PERMITTED",
        "RUN_CLOSED",
    }

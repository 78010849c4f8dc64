"""The public face of pybb.supervision, and the direction of the dependencies it adds."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


def _loaded(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(','.join(sorted(sys.modules)))"
    return set(subprocess.check_output([sys.executable, "-c", code], text=True).strip().split(","))


@pytest.mark.parametrize("package", ["pybb", "pybb.attestation", "pybb.human", "pybb.inbox"])
def test_the_controller_and_its_other_applications_load_no_buddhi(package: str) -> None:
    loaded = _loaded(f"import {package}")
    assert not {m for m in loaded if m.split(".")[0] == "buddhi"}
    assert "pybb.supervision" not in loaded


def test_the_wiring_loads_buddhi_but_not_the_web_stack() -> None:
    loaded = _loaded("import pybb.supervision, pybb.supervision.attestation")
    assert {"buddhi", "buddhi.board", "pybb.human"} <= loaded
    assert not {"uvicorn", "starlette", "jinja2"} & {m.split(".")[0] for m in loaded}


@pytest.mark.parametrize("module", ["pybb.supervision", "pybb.supervision.attestation"])
def test_all_is_sorted_and_complete(module: str) -> None:
    imported = importlib.import_module(module)
    exported = list(imported.__all__)
    assert exported == sorted(exported, key=_isort_key)
    for name in exported:
        assert hasattr(imported, name), f"{module}.__all__ names missing {name}"
    own = {
        name
        for name, value in vars(imported).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "") in _defined_in(imported)
        and not isinstance(value, type(imported))
    }
    assert own <= set(exported), f"public but not exported: {own - set(exported)}"


def _defined_in(module: object) -> set[str]:
    """The module itself and its private implementation modules (its own names)."""
    name = module.__name__  # type: ignore[attr-defined]
    return {name} | {m for m in sys.modules if m.startswith(f"{name}._")}


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


def test_the_supervisor_refuses_a_board_without_the_human_loop() -> None:
    from pybb import Blackboard
    from pybb.supervision import SupervisionError, Supervisor

    board = Blackboard(None, "plain")
    with pytest.raises(SupervisionError, match="lacks the regions"):
        Supervisor(board)
    board.close()


def test_a_person_may_write_answers_but_not_decisions_or_the_budget() -> None:
    from blackboard import Rejected, RejectionCause
    from pybb.supervision import SUPERVISION, supervised_blackboard

    board = supervised_blackboard(None, "guarded")
    control = board.model.control
    forged = control.write("human:mallory", SUPERVISION, {"id": "decision:x", "kind": "decision"})
    assert isinstance(forged, Rejected) and forged.cause is RejectionCause.ADMISSION
    budget = control.set_premise("human:mallory", "budget", {}, expected_version=1)
    assert isinstance(budget, Rejected) and "people answer asks" in budget.reason
    board.close()

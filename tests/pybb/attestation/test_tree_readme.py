"""Every ```python block of src/pybb/attestation/README.md runs, in order, in one namespace."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[3] / "src" / "pybb" / "attestation" / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_worked_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    module = types.ModuleType("attestation_readme")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, code in enumerate(blocks, start=1):
        exec(
            compile(code, f"src/pybb/attestation/README.md#block{number}", "exec"), module.__dict__
        )


def test_the_readme_draws_the_tree_and_names_the_first_command() -> None:
    text = README.read_text(encoding="utf-8")
    assert "```mermaid" in text and "on_pass" in text and "on_fail" in text
    assert "pybb attest --demo 200" in text

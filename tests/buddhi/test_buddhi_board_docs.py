"""Every ```python block of docs/buddhi/durable.md runs, in order, in one namespace."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "buddhi" / "durable.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_durable_store_page_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    module = types.ModuleType("docs_buddhi_durable")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, code in enumerate(blocks, start=1):
        exec(compile(code, f"docs/buddhi/durable.md#block{number}", "exec"), module.__dict__)


def test_the_extending_page_points_to_the_durable_store() -> None:
    extending = (PAGE.parent / "extending.md").read_text(encoding="utf-8")
    assert "durable.md" in extending

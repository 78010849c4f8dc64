"""Every ```python block of docs/human-loop.md runs, in order, in one namespace."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "human-loop.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_human_loop_page_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = PAGE.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 3 and "```mermaid" in text
    module = types.ModuleType("docs_human_loop")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, code in enumerate(blocks, start=1):
        exec(compile(code, f"docs/human-loop.md#block{number}", "exec"), module.__dict__)

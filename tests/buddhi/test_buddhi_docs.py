"""Every ```python block in docs/buddhi runs, in order, one namespace per page."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "buddhi"
PAGES = ("architecture", "decisions", "closure", "extending", "budget", "glossary")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(page: str) -> list[str]:
    return BLOCK.findall((DOCS / f"{page}.md").read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES)
def test_the_page_exists_and_its_examples_run(
    page: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each page runs as one real module, so dataclasses and annotations behave as in a file.
    module = types.ModuleType(f"docs_buddhi_{page}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, code in enumerate(blocks(page), start=1):
        compiled = compile(code, f"docs/buddhi/{page}.md#block{number}", "exec")
        exec(compiled, module.__dict__)


@pytest.mark.parametrize("page", ["architecture", "decisions", "closure", "extending", "budget"])
def test_the_pages_that_teach_code_have_examples(page: str) -> None:
    assert blocks(page), f"{page}.md has no python example"


def test_the_architecture_page_draws_the_seed_diagram_in_mermaid() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert "```mermaid\nflowchart TB" in text
    for name in ("worth_acting", "aggregate_budget", "PolicyPack", "OOBSource", "Stream.as_item"):
        assert name in text


def test_the_glossary_defines_every_term_of_the_seed() -> None:
    text = (DOCS / "glossary.md").read_text(encoding="utf-8").lower()
    for term in (
        "attention",
        "herbert simon",
        "disposition",
        "closure",
        "seam",
        "scope",
        "bar",
        "exclusion lattice",
        "stage 0",
        "transient failure",
        "escalation confidence",
        "out of band",
        "router",
        "policy pack",
        "effort ceiling",
        "iteration budget",
    ):
        assert term in text, term

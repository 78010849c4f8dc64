"""The README's Python examples run as written: the front door must not lie."""

from __future__ import annotations

import re

from storekit import REPO


def test_every_python_block_in_the_readme_runs() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})

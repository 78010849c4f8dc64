"""Fixtures of the human-loop tests: a SQLite board with the human loop declared.

Not a conftest.py (a nested conftest shadows the others under pytest's default import
mode); test modules take them with ``from human_fixtures import *``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from human_support import open_board

from blackboard import Model

__all__ = ["board", "db"]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "board.db"


@pytest.fixture
def board(db: Path) -> Iterator[Model]:
    model = open_board(db)
    yield model
    model.close()

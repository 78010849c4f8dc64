"""Fixtures shared by every test package: the stores a test runs over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pg_guard import pytest_sessionfinish, pytest_sessionstart
from storekit import StoreSpec, build

# The session fails loudly if the machine's PostgreSQL server was restarted or reloaded.
__all__ = ["pytest_sessionfinish", "pytest_sessionstart"]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    """Every backend: memory, SQLite, and PostgreSQL (skipped locally when no server answers)."""
    spec = build(request.param, tmp_path)
    yield spec
    spec.close_all()


@pytest.fixture(params=["memory", "sqlite"])
def local_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    """The embedded backends only."""
    spec = build(request.param, tmp_path)
    yield spec
    spec.close_all()

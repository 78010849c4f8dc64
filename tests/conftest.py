"""Fixtures shared by every test package: the stores a test runs over."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from blackboard.stores import MemoryStore, SQLiteStore, Store

IN_CI = os.environ.get("CI", "").lower() == "true"
NIGHTLY = os.environ.get("PYBB_NIGHTLY") == "1"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def sized(pr: int, nightly: int) -> int:
    """The PR-tier size of a reliability test, or its nightly size under PYBB_NIGHTLY=1."""
    return nightly if NIGHTLY else pr


@dataclass
class StoreSpec:
    """One backend a test runs over: ``open()`` gives a fresh handle on the same storage."""

    kind: str
    url: str | None
    _opener: Callable[[], Store]
    _opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        store = self._opener()
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


def _memory(tmp_path: Path) -> StoreSpec:
    shared = MemoryStore()
    return StoreSpec("memory", None, lambda: shared)


def _sqlite(tmp_path: Path) -> StoreSpec:
    path = tmp_path / "board.db"
    return StoreSpec("sqlite", f"sqlite:///{path}", lambda: SQLiteStore(path))


def _postgres(tmp_path: Path) -> StoreSpec:
    pytest.skip("the PostgreSQL store has not landed yet")


BACKENDS: dict[str, Callable[[Path], StoreSpec]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    """Every backend: memory, SQLite, and PostgreSQL (skipped locally when no server answers)."""
    spec = _build(request.param, tmp_path)
    yield spec
    spec.close_all()


@pytest.fixture(params=["memory", "sqlite"])
def local_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    """The embedded backends only."""
    spec = _build(request.param, tmp_path)
    yield spec
    spec.close_all()


def _build(kind: str, tmp_path: Path) -> StoreSpec:
    return BACKENDS[kind](tmp_path)

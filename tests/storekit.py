"""What every test package shares: the backends a test runs over, and test sizes.

A module of its own (not conftest.py) so that `from storekit import ...` is unambiguous
when test folders have conftest.py files of their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


PG_URL = os.environ.get("PYBB_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server the tests use; each test gets a schema of its own in it."""

_pg_down: list[str] = []  # why the server did not answer, remembered for the session


def pg_unavailable(reason: str) -> None:
    """Skip a PostgreSQL test with ``reason``, or fail it under CI=true, where it must run."""
    if IN_CI:
        pytest.fail(f"CI=true and the PostgreSQL tests cannot run: {reason}")
    pytest.skip(reason)


def pg_server() -> str:
    """The server's URL once it answers (like pg_isready, with a short timeout)."""
    if not _pg_down:
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=3, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return PG_URL
        except ImportError:
            _pg_down.append("psycopg is not installed: pip install 'mrpybb[postgres]'")
        except Exception as exc:
            _pg_down.append(f"no PostgreSQL server answers at {PG_URL} ({exc}); set PYBB_PG_URL")
    pg_unavailable(_pg_down[0])
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class PostgresSpec(StoreSpec):
    """A StoreSpec over a fresh schema, dropped with everything in it when the test ends."""

    schema: str = ""
    server: str = ""

    def close_all(self) -> None:
        super().close_all()
        drop_pg_schema(self.server, self.schema)


def new_pg_schema(server: str) -> str:
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema


def drop_pg_schema(server: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _postgres(tmp_path: Path) -> StoreSpec:
    server = pg_server()
    from blackboard.stores._postgres import PostgresStore

    schema = new_pg_schema(server)
    url = f"{server}{'&' if '?' in server else '?'}schema={schema}"
    return PostgresSpec("postgres", url, lambda: PostgresStore(url), schema=schema, server=server)


BACKENDS: dict[str, Callable[[Path], StoreSpec]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


def build(kind: str, tmp_path: Path) -> StoreSpec:
    """The StoreSpec of backend ``kind`` over fresh storage under ``tmp_path``."""
    return BACKENDS[kind](tmp_path)

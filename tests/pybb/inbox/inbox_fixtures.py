"""Fixtures of the inbox tests: a SQLite run with hostile asks, a token table, the real app.

Not a conftest.py (a nested conftest shadows the others under pytest's default import
mode); test modules take them with ``from inbox_fixtures import *``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inbox_support import AppClient, FakeClock, app_for, hostile_ask, new_board, post_asks

from blackboard import Model
from pybb.inbox import TokenTable

__all__ = ["alice", "app", "bob", "client", "client2", "clock", "model", "tokens"]


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Model]:
    board = new_board(tmp_path / "run.db")
    post_asks(board, [hostile_ask(n) for n in range(4)])
    post_asks(board, [hostile_ask(9, to=("human:bob",))])
    yield board
    board.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tokens(tmp_path: Path, clock: FakeClock) -> TokenTable:
    return TokenTable(tmp_path / "tokens.json", clock=clock)


@pytest.fixture
def alice(tokens: TokenTable) -> str:
    return tokens.issue("alice")


@pytest.fixture
def bob(tokens: TokenTable) -> str:
    return tokens.issue("bob")


@pytest.fixture
def app(model: Model, tokens: TokenTable) -> Any:
    return app_for(model, tokens)


@pytest.fixture
def client(app: Any) -> Iterator[AppClient]:
    c = AppClient(app)
    yield c
    c.close()


@pytest.fixture
def client2(app: Any) -> Iterator[AppClient]:
    c = AppClient(app)
    yield c
    c.close()

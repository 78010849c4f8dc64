"""Fixtures for the pybb tests: blackboards over every embedded store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pybb import Blackboard


@pytest.fixture
def open_board(local_store_spec: Any) -> Iterator[Callable[..., Blackboard]]:
    """``open_board(board_id)``: a blackboard on the test's store (memory or SQLite).

    Opening the same board id again gives a second handle on the same board, as a
    restarted process would get.
    """
    opened: list[Blackboard] = []

    def make(board_id: str = "t", **options: Any) -> Blackboard:
        board = Blackboard(local_store_spec.open(), board_id, **options)
        opened.append(board)
        return board

    yield make
    for board in opened:
        board.close()

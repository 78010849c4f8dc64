"""RA-08 model_based_stateful on PostgreSQL: the same state machine as memory and SQLite.

``test_stateful.BoardMachine`` drives proposals, compare-and-sets, grants, revokes,
closes, idempotent repeats and kernel restarts (reopening the store: a new pool), and a
pure-Python reference predicts every outcome; here each example gets a schema of its own
on the server. Sizes are smaller than the embedded stores' (each step is a round trip or
three); nightly sizes under PYBB_NIGHTLY=1. The negative control runs the machine over a
compare-and-set that ignores the version it was given: it must be caught.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/blackboard: the machine

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import rule
from test_stateful import BoardMachine

from blackboard import WriteResult
from blackboard.stores import Store
from blackboard.stores._postgres import PostgresStore
from storekit import drop_pg_schema, new_pg_schema, pg_server, sized

pytestmark = pytest.mark.postgres


class PgBoardMachine(BoardMachine):
    """The machine over a fresh schema per example."""

    backend = "postgres"
    store_class: type[PostgresStore] = PostgresStore

    def __init__(self) -> None:
        self.server = pg_server()
        self.schema = new_pg_schema(self.server)
        self.url = f"{self.server}{'&' if '?' in self.server else '?'}schema={self.schema}"
        super().__init__()

    def _store(self) -> Store:
        return self.store_class(self.url, min_size=1, max_size=2)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            drop_pg_schema(self.server, self.schema)


TestPgBoard = PgBoardMachine.TestCase
TestPgBoard.settings = settings(
    max_examples=sized(100, 1000),
    stateful_step_count=sized(40, 80),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class UnguardedPgMachine(PgBoardMachine):
    """Negative control: a compare-and-set that ignores the version it was given."""

    def __init__(self) -> None:
        super().__init__()
        self._unguard()

    @rule()
    def restart_kernel(self) -> None:
        super().restart_kernel()
        self._unguard()

    def _unguard(self) -> None:
        real = self.model.control.set_premise

        def unguarded(
            writer: str,
            premise: str,
            value: Any,
            *,
            expected_version: int,
            idempotency_key: str | None = None,
        ) -> WriteResult:
            current = self.model.reader.read_premise(premise).version
            return real(
                writer, premise, value, expected_version=current, idempotency_key=idempotency_key
            )

        # the negative control swaps the method on this one Control instance
        self.model.control.set_premise = unguarded  # type: ignore[method-assign]


_NEGATIVE = settings(
    max_examples=60, stateful_step_count=30, deadline=None, database=None,
    phases=[Phase.generate],  # finding it is the point; shrinking on a server is slow
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip


def test_the_machine_catches_a_postgres_cas_without_a_version_guard() -> None:
    pg_server()
    case = UnguardedPgMachine.TestCase  # settings is a class variable: set it on the class
    case.settings = _NEGATIVE
    test = case("runTest")
    with pytest.raises(AssertionError):
        test.runTest()

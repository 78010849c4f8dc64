"""RA-02, the server's half: ten immediate stops of PostgreSQL lose no committed write.

A writer appends to a board without pause, each write under an idempotency key, and
keeps every write the store acknowledged. Meanwhile the test stops the server with
``pg_ctlcluster ... stop -m immediate`` (every backend killed, no checkpoint: a crash)
and starts it again, ten times. The writer retries what failed under the same key, so a
commit whose answer was lost lands once. Afterwards every acknowledged write is on the
board at the sequence it was acknowledged with, each key once, the sequence gap-free.
The negative control acknowledges before the commit is durable (``synchronous_commit =
off``): the same check must find acknowledged writes missing after the crashes.

The server is always started again at the end, whatever happened (the fixture checks).
Locally the test skips when the cluster cannot be controlled (not root, no
``pg_ctlcluster``); under ``CI=true`` it must run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from pg_harness import PgSpace, pg_space

from blackboard import Control, Level, StoreError, Written, create_model
from blackboard.stores._postgres import PostgresStore
from storekit import PG_URL, pg_server, pg_unavailable, sized

__all__ = ["pg_space"]

pytestmark = pytest.mark.postgres

CRASHES = sized(10, 30)


@dataclass(frozen=True)
class Cluster:
    """The PostgreSQL cluster behind the test server, as pg_ctlcluster names it."""

    version: str
    name: str

    def run(self, *action: str) -> None:
        command = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name]
        subprocess.run([*command, *action], check=True, capture_output=True, timeout=120)

    def answering(self) -> bool:
        try:
            with psycopg.connect(PG_URL, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def crash(self) -> None:
        self.run("stop", "-m", "immediate")

    def start(self) -> None:
        """Start the cluster (if it is down) and wait until it answers."""
        deadline = time.monotonic() + 120
        while not self.answering():
            if time.monotonic() > deadline:
                raise AssertionError(f"PostgreSQL {self.version}/{self.name} did not come back")
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "start"],
                capture_output=True,
                timeout=120,
            )
            time.sleep(0.2)


def find_cluster() -> Cluster | None:
    """The local cluster listening on the test server's port, if this process may control it."""
    named = os.environ.get("PYBB_PG_CLUSTER")  # e.g. "15 main"
    if named:
        version, name = named.split()
        return Cluster(version, name)
    if shutil.which("pg_lsclusters") is None or shutil.which("pg_ctlcluster") is None:
        return None
    if os.geteuid() != 0:
        return None
    port = str(urlsplit(PG_URL).port or 5432)
    listing = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == port:
            return Cluster(fields[0], fields[1])
    return None


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    pg_server()
    found = find_cluster()
    if found is None:
        pg_unavailable(
            "cannot stop and start the PostgreSQL cluster (needs root and pg_ctlcluster)"
        )
    assert found is not None
    try:
        yield found
    finally:
        found.start()  # never leave the server stopped, whatever the test did


@dataclass
class Writer:
    """Writes without pause; retries a failed write under its key until it is acknowledged."""

    url: str
    board: str
    store_class: type[PostgresStore] = PostgresStore
    acked: list[tuple[int, int]] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        store = self.store_class(self.url, retries=2, timeout=2.0)
        try:
            control = create_model([Level("events")], store=store, board_id=self.board).control
            i = 0
            while not self.stop.is_set():
                if self._write(control, i):
                    i += 1
        finally:
            store.close()

    def _write(self, control: Control, i: int) -> bool:
        try:
            result = control.write("w", "events", {"i": i}, idempotency_key=f"k{i}")
        except StoreError:
            self.failures += 1
            time.sleep(0.02)
            return False
        assert isinstance(result, Written), result
        self.acked.append((i, result.sequence))
        return True


def crash_while_writing(
    space: PgSpace, cluster: Cluster, crashes: int, store_class: type[PostgresStore], board: str
) -> Writer:
    create_model([Level("events")], store=space.url, board_id=board).close()
    writer = Writer(space.url, board, store_class)
    thread = threading.Thread(target=writer.run)
    thread.start()
    try:
        for _ in range(crashes):
            seen = len(writer.acked)
            deadline = time.monotonic() + 60
            while len(writer.acked) < seen + 50 and time.monotonic() < deadline:
                time.sleep(0.01)  # writes flowing since the last restart
            cluster.crash()
            cluster.start()
    finally:
        cluster.start()
        writer.stop.set()
        thread.join(120)
    assert not thread.is_alive(), "the writer never finished"
    return writer


def lost_writes(space: PgSpace, writer: Writer) -> list[str]:
    rows, head = space.rows(writer.board)
    stored = {row.seq: row.content["i"] for row in rows}
    problems = [f"acknowledged write {i} (seq {seq}) missing" for i, seq in writer.acked
                if stored.get(seq) != i]  # fmt: skip
    seqs = [row.seq for row in rows]
    if seqs != list(range(1, len(rows) + 1)) or head != len(rows):
        problems.append(f"sequence numbers are not 1..{len(rows)} (head {head})")
    if len(set(stored.values())) != len(stored):
        problems.append("a write was applied twice")
    return problems


class AsyncCommitStore(PostgresStore):
    """BROKEN ON PURPOSE: COMMIT returns before the WAL is flushed (an ack that can be lost)."""

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        super()._configure(conn)
        conn.execute("SET synchronous_commit = off")


def test_immediate_server_stops_lose_no_committed_write(
    pg_space: PgSpace, cluster: Cluster
) -> None:
    writer = crash_while_writing(pg_space, cluster, CRASHES, PostgresStore, "crash")
    assert writer.failures > 0, "no write ever failed: the server was not really stopped"
    assert len(writer.acked) >= 50 * CRASHES
    assert lost_writes(pg_space, writer) == []


def test_negative_control_acks_before_the_flush_are_lost(
    pg_space: PgSpace, cluster: Cluster
) -> None:
    lost: list[str] = []
    for attempt in range(5):
        writer = crash_while_writing(pg_space, cluster, 1, AsyncCommitStore, f"unsafe-{attempt}")
        lost = lost_writes(pg_space, writer)
        if lost:
            break
    assert any("missing" in p for p in lost), "acks before the WAL flush were never lost"

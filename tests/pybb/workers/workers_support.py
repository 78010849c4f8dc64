"""What the worker tests share: a PostgreSQL schema per test, worker processes, checkers.

Worker processes are real ``python -m pybb worker`` commands, as an operator starts
them; they load test applications from ``worker_apps`` by ``module:function``. The board
is read back with plain psycopg, not through the code under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from blackboard.stores import MemoryStore
from pybb.testing import entries_digest
from pybb.workloads import w1
from storekit import drop_pg_schema, new_pg_schema, pg_server

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]


@dataclass
class PgRun:
    """One test's schema on the server."""

    server: str
    schema: str

    @property
    def url(self) -> str:
        return f"{self.server}{'&' if '?' in self.server else '?'}schema={self.schema}"

    def connect(self) -> Any:
        import psycopg

        conn = psycopg.connect(self.server, autocommit=True)
        conn.execute(f'SET search_path TO "{self.schema}"')
        return conn

    def rows(self, board: str) -> list[tuple[int, str, str, Any, str | None]]:
        """``(seq, region, writer, content, idempotency key)`` of every record, in order."""
        with self.connect() as conn:
            return [
                (int(seq), region, writer, json.loads(payload), ikey)
                for seq, region, writer, payload, ikey in conn.execute(
                    "SELECT seq, region, writer, payload, ikey FROM bb_records"
                    " WHERE board_id = %s ORDER BY seq",
                    (board,),
                ).fetchall()
            ]

    def claims(self, board: str) -> dict[str, tuple[str | None, int]]:
        """Every claim row of the board: key to (holder, token)."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT key, holder, token FROM bb_claims WHERE board_id = %s", (board,)
            ).fetchall()
        return {key: (holder, int(token)) for key, holder, token in rows}


@pytest.fixture
def pg_run() -> Iterator[PgRun]:
    server = pg_server()
    space = PgRun(server, new_pg_schema(server))
    yield space
    drop_pg_schema(server, space.schema)


def child_environment() -> dict[str, str]:
    paths = [str(HERE), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def start_worker(
    url: str,
    board: str,
    app: str,
    *,
    name: str,
    lease: float = 30.0,
    batch: int = 16,
    options: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "pybb", "worker", "--store", url, "--run", board,
        "--app", app, "--name", name, "--lease", str(lease), "--batch", str(batch),
    ]  # fmt: skip
    for key, value in (options or {}).items():
        command += ["--app-option", f"{key}={value}"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_environment()
    )


def finish(workers: Sequence[subprocess.Popen[bytes]], timeout: float = 180) -> list[str]:
    """Wait for every worker; their last lines (each must have exited 0 or been killed)."""
    lines = []
    deadline = time.monotonic() + timeout
    for worker in workers:
        out, err = worker.communicate(timeout=max(deadline - time.monotonic(), 1))
        assert worker.returncode in (0, -9), err.decode()[-3000:]
        lines.append(out.decode().strip())
    return lines


def w1_reference(n: int) -> str:
    """The entries digest of W1 run by one controller in memory."""
    board, controller = w1(n, MemoryStore(), board_id="reference")
    controller.run()
    return entries_digest(board)


def duplicate_applications(rows: Sequence[tuple[int, str, str, Any, str | None]]) -> list[str]:
    """Idempotency keys, and (entry, source, attempt) triples, applied more than once."""
    keys = Counter(row[4] for row in rows if row[4] is not None)
    attempts = Counter(
        (c["key"], c["source"], c["attempt"]) for _, region, _, c, _ in rows
        if region == "pybb.attempts"
    )  # fmt: skip
    return [f"key {k} x{n}" for k, n in keys.items() if n > 1] + [
        f"attempt {a} x{n}" for a, n in attempts.items() if n > 1
    ]


def overlapping_work(ledger: Path, killed: dict[int, float] | None = None) -> list[str]:
    """Entries two processes worked on at the same moment, from the sources' ledger.

    Each execution logs its start and end with the machine's monotonic clock (shared by
    every process). A killed process's unfinished execution ends when it was killed.
    """
    killed = killed or {}
    open_: dict[tuple[int, str, str], float] = {}
    spans: dict[str, list[tuple[float, float, int]]] = {}
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        event = json.loads(line)
        ident = (event["pid"], event["key"], event["source"])
        if event["op"] == "start":
            open_[ident] = event["t"]
        elif ident in open_:
            spans.setdefault(event["key"], []).append((open_.pop(ident), event["t"], event["pid"]))
    for (pid, key, _), start in open_.items():
        spans.setdefault(key, []).append((start, killed.get(pid, float("inf")), pid))
    problems = []
    for key, intervals in spans.items():
        intervals.sort()
        end, owner = intervals[0][1], intervals[0][2]
        for start, stop, pid in intervals[1:]:
            if start < end and pid != owner:
                problems.append(f"{key}: worked by {owner} and {pid} at once")
            if stop > end:
                end, owner = stop, pid
    return problems

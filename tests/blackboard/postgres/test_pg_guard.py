"""The session guard (``pg_guard``) catches a test that restarts or reloads the server.

Each case runs a small pytest session in a child process with the guard installed and
``PYBB_PG_URL`` pointed at a private cluster (``pg_private``), never the machine's
server: a session whose test leaves the server alone passes; one whose test restarts it,
reloads its configuration or stops it fails with the guard's message although its test
passed; a server that does not answer when the session starts is not compared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_private import ClusterUnavailableError, PrivateCluster, free_port

from pg_guard import server_times
from storekit import REPO, pg_unavailable

pytestmark = pytest.mark.postgres

HERE = Path(__file__).resolve().parent

SESSION = """
import os

import psycopg
from pg_private import PrivateCluster

CLUSTER = PrivateCluster.from_json(os.environ["PYBB_TEST_CLUSTER"])


def test_leaves_the_server_alone():
    with psycopg.connect(CLUSTER.url, autocommit=True) as conn:
        conn.execute("SELECT 1")


def test_restarts_the_server():
    CLUSTER.restart()


def test_stops_the_server():
    CLUSTER.crash()


def test_reloads_the_configuration():
    with psycopg.connect(CLUSTER.url, autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A private cluster for the child sessions to restart, stopped and deleted afterwards."""
    try:
        made = PrivateCluster.create()
    except ClusterUnavailableError as exc:
        pg_unavailable(str(exc))
        raise  # pragma: no cover (pg_unavailable skips or fails)
    try:
        yield made
    finally:
        made.remove()


def run_session(
    cluster: PrivateCluster, folder: Path, test: str, server: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one test of SESSION under the guard, the private cluster as "the" server."""
    (folder / "test_session.py").write_text(SESSION)
    paths = [REPO / "src", REPO / "tests", HERE, os.environ.get("PYTHONPATH", "")]
    env = dict(
        os.environ,
        PYBB_PG_URL=server or cluster.url,
        PYBB_TEST_CLUSTER=cluster.to_json(),
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # the child needs none; loading them takes seconds
        PYTHONPATH=os.pathsep.join(str(p) for p in paths if str(p)),
    )
    command = [sys.executable, "-m", "pytest", "-p", "pg_guard", "-p", "no:cacheprovider",
               f"test_session.py::{test}", "--rootdir", str(folder)]  # fmt: skip
    try:
        return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
    finally:
        if not cluster.running():
            cluster.start()  # after test_stops_the_server, for the next case


def test_a_session_that_leaves_the_server_alone_passes(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    done = run_session(cluster, tmp_path, "test_leaves_the_server_alone")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "changed during this test session" not in done.stdout


@pytest.mark.parametrize(
    ("test", "change"),
    [
        ("test_restarts_the_server", "pg_postmaster_start_time() (it was restarted)"),
        ("test_reloads_the_configuration", "pg_conf_load_time() (its configuration was"),
        ("test_stops_the_server", "it no longer answers"),
    ],
)
def test_a_session_that_restarts_or_reloads_the_server_fails(
    cluster: PrivateCluster, tmp_path: Path, test: str, change: str
) -> None:
    done = run_session(cluster, tmp_path, test)
    assert "1 passed" in done.stdout, done.stdout + done.stderr  # the test itself passed...
    assert done.returncode == pytest.ExitCode.TESTS_FAILED  # ...the guard failed the session
    assert f"{cluster.url} changed during this test session" in done.stdout
    assert change in done.stdout


def test_a_server_that_does_not_answer_at_the_start_is_not_compared(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    assert server_times(nobody) is None
    done = run_session(cluster, tmp_path, "test_restarts_the_server", server=nobody)
    assert done.returncode == 0, done.stdout + done.stderr

"""A pytest plugin: the session leaves the machine's PostgreSQL server as it found it.

No test may stop, restart or reconfigure the server at ``PYBB_PG_URL`` (the tests that
crash a server start a private cluster of their own, ``pg_private``). This plugin reads
that server's ``pg_postmaster_start_time()`` and ``pg_conf_load_time()`` when the session
starts and again when it ends; if either changed (a restart, a crash, a configuration
reload) or the server stopped answering, it says so loudly and fails the session. A server
that does not answer at the start is not compared. ``tests/conftest.py`` installs it.
"""

from __future__ import annotations

import pytest

from storekit import PG_URL

_SEEN = pytest.StashKey[tuple[str, str] | None]()


def server_times(url: str) -> tuple[str, str] | None:
    """The server's (start time, configuration load time), or None if it does not answer."""
    try:
        import psycopg
    except ImportError:
        return None
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_postmaster_start_time()::text, pg_conf_load_time()::text"
            ).fetchone()
    except psycopg.Error:
        return None
    return None if row is None else (str(row[0]), str(row[1]))


def changes(before: tuple[str, str], after: tuple[str, str] | None) -> list[str]:
    """What differs between two readings of ``server_times`` (empty: nothing)."""
    if after is None:
        return ["it no longer answers"]
    names = ("pg_postmaster_start_time() (it was restarted)",
             "pg_conf_load_time() (its configuration was reloaded)")  # fmt: skip
    return [f"{name}: {old} -> {new}" for name, old, new in zip(names, before, after, strict=True)
            if old != new]  # fmt: skip


def pytest_sessionstart(session: pytest.Session) -> None:
    session.stash[_SEEN] = server_times(PG_URL)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.stash.get(_SEEN, None)
    if before is None:
        return
    found = changes(before, server_times(PG_URL))
    if not found:
        return
    lines = [
        f"the PostgreSQL server at {PG_URL} changed during this test session:",
        *(f"  {change}" for change in found),
        "A test stopped, restarted or reconfigured a server it did not start; tests that",
        "crash a server must use a private cluster (tests/blackboard/postgres/pg_private.py).",
        "(Or someone else on this machine did it meanwhile.)",
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("!", "the machine's PostgreSQL server changed", red=True, bold=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:  # pragma: no cover (-p no:terminal)
        print("\n".join(lines))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED

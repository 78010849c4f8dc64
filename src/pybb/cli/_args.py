"""Argument types and store checks the subcommands share.

An argparse ``type`` that raises ``argparse.ArgumentTypeError`` makes argparse print the
usage and one line naming the option, and exit 2: a bad number never reaches the code
that would overflow on it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from pybb.cli._errors import CommandError

if TYPE_CHECKING:
    from pybb.human import AssignmentPolicy

__all__ = [
    "assignment_file",
    "board_id",
    "check_reachable",
    "check_store",
    "count",
    "hours",
    "port",
    "positive",
    "seconds",
]

_SQLITE_OPTIONS = frozenset({"synchronous"})


def port(text: str) -> int:
    """A TCP port 0..65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; give 1..65535") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port; give 1..65535 (0: any free)")
    return value


def count(text: str) -> int:
    """A whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give 0 or more")
    return value


def positive(text: str) -> int:
    """A whole number, 1 or more."""
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive; give 1 or more")
    return value


def _finite(text: str, unit: str, most: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not math.isfinite(value) or not 0 < value <= most:
        raise argparse.ArgumentTypeError(
            f"{text} is not a usable number of {unit}; give a finite number above 0, at most "
            f"{most:g}"
        )
    return value


def hours(text: str) -> float:
    """A finite positive number of hours, at most ten years' worth."""
    return _finite(text, "hours", 24 * 366 * 10)


def seconds(text: str) -> float:
    """A finite positive number of seconds, at most a day."""
    return _finite(text, "seconds", 24 * 3600)


def board_id(text: str) -> str:
    """A non-empty board id without surrounding blanks."""
    if not text or text.strip() != text or "\x00" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a board id; give a non-empty name without surrounding spaces"
        )
    return text


def check_store(url: str, *, shared: bool = False) -> None:
    """Refuse a store URL no pybb command could use as asked; do nothing for a good one.

    ``shared``: the store must already exist and be reachable by other processes (a
    worker joins a run someone submitted; it never creates an empty board file).

    Raises:
        CommandError: Naming the URL and what to give instead.
    """
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        return
    unknown = sorted(set(parse_qs(parts.query, keep_blank_values=True)) - _SQLITE_OPTIONS)
    if unknown:
        raise CommandError(
            f"--store {url!r}: {', '.join(unknown)} is not a store option (only synchronous=); "
            "pybb writes to its board, so a read-only store (mode=ro) cannot be used: give "
            "the file's URL without it, on a disk you may write"
        )
    file = parts.path[1:] if parts.path.startswith("/") else parts.path
    if file and file != ":memory:":
        _check_writable(url, Path(file))
    if not shared:
        return
    if file in ("", ":memory:") or file.startswith("file::memory:"):
        raise CommandError(
            f"--store {url!r} is an in-memory database: a worker would share nothing with "
            "anyone; give the file of the run, e.g. sqlite:///pybb-attest.db"
        )
    if not Path(file).is_file():
        raise CommandError(
            f"--store {url!r}: there is no file {os.path.abspath(file)!r}, so there is no run "
            "to work on; give the file pybb attest --submit wrote (workers do not create runs)"
        )


def _check_writable(url: str, file: Path) -> None:
    """A SQLite board is written (its lease, its log): refuse a read-only place up front.

    Checked here because SQLite itself only says "unable to open database file".
    """
    folder = file.parent if str(file.parent) else Path(".")
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return
    if read_only:
        raise CommandError(
            f"--store {url!r}: the file system of {str(folder)!r} is read-only, and pybb "
            "writes to its board (a resumed run, a lease, the report step); remount it "
            "writable, or copy the store to a writable disk and give that --store; nothing "
            "was changed"
        )
    if file.exists() and not os.access(file, os.W_OK):
        raise CommandError(
            f"--store {url!r}: {str(file)!r} is read-only for this user; give a store file "
            "you may write (or fix its permissions); nothing was changed"
        )


def check_reachable(url: str, *, timeout: int = 3) -> None:
    """Fail fast, in one line, when a PostgreSQL URL's server cannot be reached.

    The store's pool retries a server that is away for as long as its timeout (30 s)
    before giving up, which is right for a worker riding out a restart and wrong for a
    command someone just mistyped: one direct connection with a short timeout first.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        return
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        return  # open_store says what to install
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"]
    try:
        params = conninfo_to_dict(urlunsplit(parts._replace(query=urlencode(query))))
        given = params.get("connect_timeout")
        params["connect_timeout"] = min(int(str(given)), timeout) if given else timeout
        conn = psycopg.connect(make_conninfo("", **params))
    except (psycopg.Error, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandError(
            f"cannot connect to the PostgreSQL store {parts.hostname or 'localhost'}:"
            f"{parts.port or 5432}: {first}; check that the server runs and that the URL "
            "names a database you may use"
        ) from None
    conn.close()


def assignment_file(text: str) -> AssignmentPolicy:
    """An assignment policy from a JSON file (or TOML, when it ends in ``.toml``).

    It holds ``default`` (``human:<name>`` or ``team:<name>``, optional) and ``rules``, a
    list of ``{"to": ..., "reason": ..., "class": ..., "scope": ...}``; see
    :meth:`pybb.human.AssignmentPolicy.from_json`.
    """
    from pybb.human import AssignmentPolicy, MalformedContentError

    path = Path(text)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {exc.strerror}") from None
    toml = path.suffix.lower() == ".toml"
    try:
        data = tomllib.loads(raw.decode("utf-8")) if toml else json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        kind = "TOML" if toml else "JSON (name it .toml for TOML)"
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}: {exc}") from None
    try:
        return AssignmentPolicy.from_json(data)
    except MalformedContentError as exc:
        raise argparse.ArgumentTypeError(
            f'{text!r}: {exc}; it takes {{"default": "team:<name>", "rules": '
            f'[{{"to": "human:<name>", "reason": ..., "class": ..., "scope": ...}}]}}'
        ) from None

"""The one place where a ``pybb`` command's failure becomes a sentence and an exit status.

Every subcommand's handler runs inside :func:`guarded` (``pybb.cli.main`` does that), so
no command needs its own ``try``: a store or usage problem is one line saying what is
wrong and what to do, exit status :data:`EXIT_USAGE`; Ctrl-C is "interrupted; the same
command resumes", :data:`EXIT_INTERRUPTED`; anything else is a bug, one line and
:data:`EXIT_INTERNAL` (``pybb -v`` shows its traceback).

Every command's board writes are transactions, so a failure at any point leaves the store
as the last committed write left it: that is why each message can say "run the same
command again".
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import sys
from collections.abc import Callable
from typing import Final, TextIO

from blackboard import BlackboardError
from pybb.errors import PybbError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "describe",
    "guarded",
]

EXIT_OK: Final = 0
"""The command did what it was asked."""
EXIT_FAILED: Final = 1
"""The command ran, and what it found is what ``--fail-on`` (or the ground truth) fails on."""
EXIT_USAGE: Final = 2
"""The command line, the fleet or the store cannot be used; nothing was done about it."""
EXIT_INTERNAL: Final = 3
"""A bug in pybb: the message says so; ``pybb -v`` shows the traceback."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (SIGINT), as shells report it: the same command resumes."""

_log = logging.getLogger("pybb.cli")


class CommandError(PybbError):
    """A command refuses to go on: its message is the sentence the operator reads."""


def _full(text: str) -> bool:
    return "disk is full" in text or "No space left" in text or "database or disk is full" in text


def _read_only(text: str) -> bool:
    return "readonly database" in text or "Read-only file system" in text


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def describe(exc: BaseException) -> str:
    """The sentence for a failure: what is wrong and how to fix it."""
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    errnos = {e.errno for e in chain if isinstance(e, OSError)}
    if errno.ENOSPC in errnos or _full(text):
        return (
            f"the disk is full ({exc}); free some space (or give a --store or --report on "
            "another disk) and run the same command again: it resumes where it stopped, "
            "every write before this one is kept"
        )
    if errno.EROFS in errnos or _read_only(text):
        return (
            f"cannot write: the file system is read-only ({exc}); remount it writable or "
            "copy the store to a writable disk and give that --store; nothing was changed"
        )
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return f"cannot use{where}: {exc.strerror or exc}; check the path and its permissions"
    if isinstance(exc, sqlite3.Error):
        return f"the SQLite store failed: {exc}; check the --store file"
    return str(exc)


def guarded(prog: str, handler: Callable[[], int], *, err: TextIO | None = None) -> int:
    """Run ``handler`` and turn what it raises into one line on stderr and an exit status."""
    stream = err or sys.stderr
    try:
        return int(handler())
    except KeyboardInterrupt:
        print(
            f"\n{prog}: interrupted; the same command resumes where it stopped "
            "(every write before Ctrl-C is kept)",
            file=stream,
            flush=True,
        )
        return EXIT_INTERRUPTED
    except (BlackboardError, PybbError, OSError, sqlite3.Error) as exc:
        _log.debug("%s failed", prog, exc_info=True)
        print(f"{prog}: {describe(exc)}", file=stream, flush=True)
        return EXIT_USAGE
    except Exception as exc:  # a bug: still one line, the traceback only when asked for
        _log.debug("%s failed", prog, exc_info=True)
        if _is_buddhi_error(exc):  # a policy or budget the operator gave: usage
            print(f"{prog}: {exc}", file=stream, flush=True)
            return EXIT_USAGE
        print(
            f"{prog}: internal error ({type(exc).__name__}: {exc}); this is a bug in pybb: "
            "run it again with pybb -v for the traceback and report it",
            file=stream,
            flush=True,
        )
        return EXIT_INTERNAL


def _is_buddhi_error(exc: BaseException) -> bool:
    # By lookup, not import: the plain commands do not load buddhi.
    errors = sys.modules.get("buddhi.errors")
    base = getattr(errors, "BuddhiError", None)
    return isinstance(base, type) and isinstance(exc, base)

"""How the ``pybb`` command configures logging (library code never does).

One handler on the root logger, on stderr: rich's ``RichHandler`` when stderr is a
terminal, plain ``time level name: message`` lines otherwise, or with ``--log-json`` one
JSON object per line (``time``, ``level``, ``logger``, ``message``, and ``exc`` when
there is a traceback) for machines. ``-v`` shows DEBUG (and the traceback of a failure),
``-q`` only warnings and errors; the default is INFO, so a worker's progress lines show.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

__all__ = ["JsonFormatter", "configure_logging"]

_PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The pool's own retries of an unreachable server are noise next to the command's one
# line; its warnings stay available with -v.
NOISY_LOGGERS = ("psycopg.pool", "uvicorn.access")
"""Loggers the command quiets unless asked to be verbose."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


def configure_logging(
    verbosity: int = 0, *, json_lines: bool = False, stream: TextIO | None = None
) -> logging.Handler:
    """Install the command's one root handler; return it (tests remove it again)."""
    out = stream or sys.stderr
    level = logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    handler: logging.Handler
    if json_lines:
        handler = logging.StreamHandler(out)
        handler.setFormatter(JsonFormatter())
    elif out.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(file=out), show_path=False, rich_tracebacks=False)
    else:
        handler = logging.StreamHandler(out)
        handler.setFormatter(logging.Formatter(_PLAIN))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity > 0 else logging.ERROR)
    return handler

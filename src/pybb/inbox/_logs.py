"""Keeping secrets out of the logs: uvicorn's access log prints no query strings.

The inbox never puts a token in a URL, but a person may paste one there; the access log
would print it. The filter cuts every logged path at its ``?``.
"""

from __future__ import annotations

import logging

__all__ = ["ACCESS_LOGGER", "RedactQueryStrings", "redact_access_log"]

ACCESS_LOGGER = "uvicorn.access"
"""The logger of uvicorn's access log."""


class RedactQueryStrings(logging.Filter):
    """Replace the query string of an access-log line's path with ``?…``."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's path argument; never drop the record."""
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path = args[2]
            if "?" in path:
                record.args = (*args[:2], path.split("?", 1)[0] + "?…", *args[3:])
        return True


def redact_access_log(name: str = ACCESS_LOGGER) -> None:
    """Install :class:`RedactQueryStrings` on the access logger (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactQueryStrings) for f in logger.filters):
        logger.addFilter(RedactQueryStrings())

"""Measurements as the board keeps them: JSON values, copied on the way in and out.

The kernel stores canonical JSON, so a measurement must be made of dict (str keys),
list, str, int, finite float, bool and None. Copying on the way in means a value a
knowledge source keeps a reference to cannot change the board behind the controller's
back; copying on the way out means a source that mutates ``get_entry(key).measurement``
in place changes only its own copy.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_DEPTH", "NotJSONError", "copy_value", "describe"]

MAX_DEPTH = 200
"""The kernel's nesting limit; a deeper value would be refused at commit time."""


class NotJSONError(ValueError):
    """A value the board cannot keep; ``str()`` says which part and why."""


def copy_value(value: Any, depth: int = 0) -> Any:
    """Return a fresh copy of a JSON value, or raise :class:`NotJSONError`.

    Subclasses of the JSON types (an ``IntEnum``, a ``defaultdict``) come back as the
    plain type, as they would from a durable store.
    """
    kind = type(value)
    if kind is int or kind is str or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise NotJSONError(f"holds the non-finite number {value!r}; JSON has no such value")
        return value
    if depth >= MAX_DEPTH:
        raise NotJSONError(f"nests deeper than {MAX_DEPTH} levels; flatten it")
    if kind is dict:
        return {_key(k): copy_value(v, depth + 1) for k, v in value.items()}
    if kind is list:
        return [copy_value(v, depth + 1) for v in value]
    return _copy_subclass(value, depth)


def _copy_subclass(value: Any, depth: int) -> Any:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return copy_value(float(value), depth)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return copy_value(dict(value), depth)
    if isinstance(value, list):
        return copy_value(list(value), depth)
    raise NotJSONError(
        f"holds {describe(value)} of type {type(value).__name__}, which is not JSON; use dict, "
        "list, str, int, float, bool or None"
    )


def _key(key: object) -> str:
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str(key)
    raise NotJSONError(f"has the non-string key {describe(key)}; JSON object keys must be strings")


def describe(value: object, limit: int = 60) -> str:
    """A short ``repr`` for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""Canonical JSON: what the board keeps, and how it checks that a value can be kept."""

from __future__ import annotations

import json
import reprlib
from typing import Any

from blackboard.errors import ContentError

__all__ = ["JSONValue", "decode", "encode", "is_utf8"]

JSONValue = Any
"""A value made only of dict (str keys), list, str, int, float (finite), bool and None."""

_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"), check_circular=True
)


def encode(value: object, what: str) -> str:
    """Return the canonical JSON text of ``value``, or raise :class:`ContentError`.

    Canonical means sorted keys and no spaces, so equal values have equal texts. Only
    values that survive a round trip unchanged are accepted: tuples, non-string keys and
    non-finite floats would come back different from a durable store, so they are refused.
    """
    _check(value, what, depth=0)
    try:
        text = _encoder.encode(value)
    except (ValueError, TypeError, RecursionError) as exc:  # pragma: no cover - _check is stricter
        raise ContentError(what, f"is not JSON-serialisable: {exc}") from exc
    if not is_utf8(text):
        raise ContentError(what, f"holds {_surrogate(text)}")
    return text


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be kept as UTF-8: no lone surrogates (``json.loads`` makes them)."""
    if text.isascii():  # O(1) in CPython: the common case costs nothing
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _surrogate(text: str) -> str:
    index = next(i for i, char in enumerate(text) if 0xD800 <= ord(char) <= 0xDFFF)
    return f"the lone surrogate {text[index]!r}, which is not Unicode text; remove or replace it"


def decode(text: str) -> JSONValue:
    """Decode JSON text that :func:`encode` produced."""
    return json.loads(text)


_MAX_DEPTH = 200


def _check(value: object, what: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ContentError(what, f"nests deeper than {_MAX_DEPTH} levels; flatten it")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ContentError(
                what, f"holds the non-finite number {value!r}; JSON has no such value"
            )
        return
    if isinstance(value, list):
        for item in value:
            _check(item, what, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ContentError(
                    what, f"has the non-string key {_short(key)}; JSON object keys must be strings"
                )
            _check(item, what, depth + 1)
        return
    raise ContentError(
        what,
        f"holds {_short(value)} of type {type(value).__name__}, which is not JSON; use dict, list, "
        "str, int, float, bool or None",
    )


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60


def _short(value: object) -> str:
    return _repr.repr(value)

"""Canonical JSON: what the board keeps, and how it checks that a value can be kept."""

from __future__ import annotations

import json
import json.encoder
import reprlib
from collections.abc import Callable
from typing import Any, Final

from blackboard.errors import ContentError

try:  # a faster encoder for the common case; json's own gives the same text without it
    import orjson
except ImportError:  # pragma: no cover - a dependency; kept optional for vendored copies
    orjson = None  # type: ignore[assignment]

__all__ = ["UNDECODED", "JSONValue", "decode", "encode", "encode_decoded", "is_utf8"]

JSONValue = Any
"""A value made only of dict (str keys), list, str, int, float (finite), bool and None."""

# check_circular is off because _check refuses anything nested deeper than _MAX_DEPTH,
# which every cycle is; the output is the same either way.
_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"), check_circular=False
)
# JSONEncoder.encode builds this C encoder afresh on every call; building it once halves
# the cost of encoding a small contribution. Same function, same arguments, same text.
# It is undocumented, so fall back to the encoder itself where it is missing.
_make_c_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_encoder: Any = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)
_orjson_dumps: Callable[..., bytes] | None = None if orjson is None else orjson.dumps
_orjson_loads: Callable[[bytes], Any] = json.loads if orjson is None else orjson.loads
_SORT_KEYS = 0 if orjson is None else orjson.OPT_SORT_KEYS
# Subclasses, dataclasses and datetimes raise rather than being written as orjson would.
_ROUND_TRIP = (
    0
    if orjson is None
    else orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def encode(value: object, what: str) -> str:
    """Return the canonical JSON text of ``value``, or raise :class:`ContentError`.

    Canonical means sorted keys and no spaces, so equal values have equal texts. Only
    values that survive a round trip unchanged are accepted: tuples, non-string keys and
    non-finite floats would come back different from a durable store, so they are refused.
    """
    if _check(value, what, 0) and _orjson_dumps is not None:
        # Only exact dicts, lists, str, int, bool and None get here, where orjson writes
        # the very text json does, 4-7x faster (tests/blackboard/test_canonical_json.py).
        # Floats do not: orjson writes 1e-07 as 1e-7. It refuses ints past 64 bits and
        # lone surrogates, which json's path below then encodes or reports as before.
        try:
            return _orjson_dumps(value, option=_SORT_KEYS).decode()
        except TypeError:
            pass
    return _json_text(value, what)


def encode_decoded(value: object, what: str) -> tuple[str, JSONValue]:
    """:func:`encode`, and ``decode`` of its text where that comes for less than decoding.

    Returns:
        The canonical text and either a value of its own equal to ``decode(text)`` (same
        types, same key order, sharing nothing mutable with ``value``) or
        :data:`UNDECODED` where only decoding the text gives that.

    Raises:
        ContentError: as :func:`encode` does.
    """
    round_trip = _round_trip(value)
    if round_trip is not None:
        return round_trip
    if _check(value, what, 0) and _orjson_dumps is not None:
        try:
            raw = _orjson_dumps(value, option=_SORT_KEYS)
        except TypeError:
            pass
        else:
            # orjson read back what it wrote: exact dicts (in the text's sorted key order),
            # lists, str, bool, None and ints within the 64 bits it just wrote, which it
            # reads as ints; json.loads of the same text gives exactly these, about 2x slower.
            return raw.decode(), _orjson_loads(raw)
    return _json_text(value, what), UNDECODED


def _round_trip(value: object) -> tuple[str, JSONValue] | None:
    """The text and decoded copy of a value that JSON gives back equal, or None: ask _check.

    What _check's walk in Python proves, orjson's round trip proves in C, for a third less
    (the copy is read back either way): if reading the text gives a value equal to
    ``value``, nothing was lost (a tuple comes back a list, NaN and the infinities null, a
    plain enum its value: none of them equal). Subclasses of the builtins, dataclasses and
    datetimes make orjson raise, as do non-string keys, lone surrogates and ints past 64
    bits; enums of int or str, which compare equal to their values, get json's own text.
    Two things equality cannot see are checked on the text: a float orjson may write
    unlike json (with an exponent, or below 1e-4, where json takes one), and nesting past
    _MAX_DEPTH. What fails any of it goes to _check, which refuses or encodes it as before.
    """
    dumps = _orjson_dumps
    if dumps is None:  # pragma: no cover - orjson is a dependency
        return None
    try:
        raw = dumps(value, option=_ROUND_TRIP)
    except TypeError:
        return None
    text = raw.decode()  # searched as str: bytes' ``in`` costs three times as much
    if "e+" in text or "e-" in text or "0.0000" in text:  # a float json may write otherwise
        return None
    # Each level of nesting takes two characters: a short text cannot nest too deep.
    if len(text) > 2 * _MAX_DEPTH and text.count("[") + text.count("{") > _MAX_DEPTH:
        return None
    decoded = _orjson_loads(raw)
    if decoded != value:
        return None
    return text, decoded


def _json_text(value: object, what: str) -> str:
    try:
        # CPython always has the C encoder; _encoder.encode is the same text without it.
        text = _encoder.encode(value) if _c_encoder is None else "".join(_c_encoder(value, 0))
    except (ValueError, TypeError, RecursionError) as exc:  # pragma: no cover - _check is stricter
        raise ContentError(what, f"is not JSON-serialisable: {exc}") from exc
    if not is_utf8(text):
        raise ContentError(what, f"holds {_surrogate(text)}")
    return text


class _Undecoded:
    """The type of :data:`UNDECODED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDECODED"

    # One of it only: ``content is UNDECODED`` is how the store tells it; a copy, a deep
    # copy (``dataclasses.asdict``, ``copy.deepcopy`` of a PendingWrite) or an unpickled
    # one that were another object would be kept as a record's content.
    def __reduce__(self) -> str:
        return "UNDECODED"


UNDECODED: Final[Any] = _Undecoded()
"""In place of a decoded value: "not at hand, decode the text" (see encode_decoded)."""


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


# The decoder's scanner (C where CPython has it): what JSONDecoder.raw_decode calls,
# without raw_decode's Python frame. It raises StopIteration for text that starts with
# no value, and ValueError (JSONDecodeError) for malformed text.
_decoder: Any = json.JSONDecoder()  # scan_once is set in its __init__, untyped
_scan_once = _decoder.scan_once


def decode(text: str) -> JSONValue:
    """Decode JSON text that :func:`encode` produced."""
    # encode() never writes surrounding whitespace, so skip json.loads' two regex scans
    # for it; anything else (whitespace, trailing data, bad text) goes to json.loads.
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


_MAX_DEPTH = 200


_PLAIN = frozenset({str, int, bool, type(None)})  # exact types that are always JSON


def _check(value: Any, what: str, depth: int) -> bool:
    """Refuse what JSON cannot keep; a fast path for exact dicts and lists of plain values.

    Skipping a plain child is the same as checking it while its depth is within bounds;
    at the bound every child must fail the depth check, so the general path runs.

    Returns:
        Whether ``value`` is made of exact dicts, lists, str, int, bool and None only
        (no float, no subclass): the values orjson encodes as json does.
    """
    kind = type(value)
    if kind in _PLAIN and depth <= _MAX_DEPTH:
        return True
    exact = True
    if kind is dict and depth < _MAX_DEPTH:
        for key, item in value.items():
            if type(key) is not str:
                _check_key(key, what)
                exact = False
            if type(item) not in _PLAIN and not _check(item, what, depth + 1):
                exact = False
        return exact
    if kind is list and depth < _MAX_DEPTH:
        for item in value:
            if type(item) not in _PLAIN and not _check(item, what, depth + 1):
                exact = False
        return exact
    _check_any(value, what, depth)
    return False


def _check_key(key: object, what: str) -> None:
    if not isinstance(key, str):
        raise ContentError(
            what, f"has the non-string key {_short(key)}; JSON object keys must be strings"
        )


def _check_any(value: object, what: str, depth: int) -> None:
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
            _check_key(key, what)
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

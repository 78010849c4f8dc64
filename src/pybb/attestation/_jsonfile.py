"""Strict JSON for evidence and class files: every problem names the file and the field.

Files are hostile input: they are read with a size cap, decoded as strict UTF-8, and
parsed refusing duplicate keys, ``NaN``/``Infinity``, fractions and exponents, and
nesting deep enough to exhaust the parser. :class:`Fields` then checks each value's
type and form, raising the caller's :class:`FleetError` subclass with the dotted path
of the field at fault.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from pybb.attestation._fleet_errors import FleetError, show

__all__ = [
    "NAME",
    "ErrorFactory",
    "Fields",
    "fspath",
    "parse_json",
    "read_capped",
    "relative_to_root",
    "show",
]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A device id or class name: 1-64 letters, digits, ``.``, ``_``, ``-``."""

_HEX = re.compile(r"[0-9a-fA-F]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,2}")

ErrorFactory = Callable[[str, str | None], FleetError]
"""Builds the error for ``(problem, field)``."""


class _RefusedError(ValueError):
    """A JSON construct the strict parser refuses."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RefusedError(f"the key {show(key)} appears twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> NoReturn:
    raise _RefusedError(f"{name} is not a JSON number; write the value as a string or integer")


def _no_float(text: str) -> NoReturn:
    raise _RefusedError(
        f"the number {show(text)} has a fraction or exponent; only integers are used"
    )


def read_capped(path: Path, limit: int, error: ErrorFactory) -> bytes:
    """Read a regular file of at most ``limit`` bytes.

    The size is checked with ``stat`` before a byte is read, so a huge file costs
    neither the time nor the memory of reading it; a file that grows past ``limit``
    between the ``stat`` and the read is refused too (at most ``limit + 1`` bytes read).
    """
    try:
        if not path.is_file():
            raise error("it is missing or not a regular file", None)
        size = path.stat().st_size
        if size > limit:
            raise error(
                f"it is {size} bytes, over the cap of {limit} bytes (not read); collect it "
                "again, or raise the cap if it truly is that large",
                None,
            )
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"it cannot be read ({exc.strerror or exc})", None) from exc
    if len(data) > limit:
        raise error(f"it is larger than {limit} bytes", None)
    return data


def parse_json(data: bytes, error: ErrorFactory) -> object:
    """Decode strict UTF-8 and parse strict JSON."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"it is not UTF-8 (byte offset {exc.start}: {exc.reason})", None) from None
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_no_float,
        )
    except _RefusedError as exc:
        raise error(str(exc), None) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"it is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", None
        ) from None
    except RecursionError:
        raise error("it nests arrays or objects too deeply to be evidence", None) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise error(f"it holds a value that cannot be read ({exc})", None) from None


class Fields:
    """Checks the fields of one parsed JSON document, naming each field it refuses.

    Args:
        error: Builds the error for ``(problem, field)``.
    """

    def __init__(self, error: ErrorFactory) -> None:
        self.error = error

    def fail(self, field: str | None, problem: str) -> NoReturn:
        """Raise the error for ``field``."""
        raise self.error(problem, field)

    def obj(
        self,
        value: object,
        field: str | None,
        required: tuple[str, ...] = (),
        optional: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """An object with exactly the ``required`` keys and some of the ``optional`` ones."""
        if not isinstance(value, dict):
            self.fail(field, f"must be a JSON object, not {_kind(value)}")
        for key in required:
            if key not in value:
                self.fail(_join(field, key), "is missing")
        if required or optional:
            allowed = set(required) | set(optional)
            for key in value:
                if key not in allowed:
                    self.fail(
                        _join(field, str(key)),
                        f"is not a known field (known: {', '.join(sorted(allowed))})",
                    )
        return value

    def string(self, value: object, field: str, *, limit: int = 4096) -> str:
        """A string of at most ``limit`` characters."""
        if not isinstance(value, str):
            self.fail(field, f"must be a string, not {_kind(value)}")
        if len(value) > limit:
            self.fail(field, f"is {len(value)} characters long; the most is {limit}")
        return value

    def name(self, value: object, field: str) -> str:
        """A device id or class name (see :data:`NAME`)."""
        text = self.string(value, field, limit=256)
        if not NAME.fullmatch(text):
            self.fail(
                field,
                f"{show(text)} is not a name; use 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
            )
        return text

    def boolean(self, value: object, field: str) -> bool:
        """``true`` or ``false``."""
        if not isinstance(value, bool):
            self.fail(field, f"must be true or false, not {_kind(value)}")
        return value

    def integer(self, value: object, field: str, low: int, high: int) -> int:
        """An integer in ``low..high``."""
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(field, f"must be an integer, not {_kind(value)}")
        if not low <= value <= high:
            self.fail(field, f"{show(value)} is out of range {low}..{high}")
        return value

    def array(self, value: object, field: str, *, limit: int) -> list[Any]:
        """An array of at most ``limit`` items."""
        if not isinstance(value, list):
            self.fail(field, f"must be a JSON array, not {_kind(value)}")
        if len(value) > limit:
            self.fail(field, f"holds {len(value)} items; the most is {limit}")
        return value

    def digest(self, value: object, field: str, size: int) -> bytes:
        """A digest of ``size`` bytes written as ``2 * size`` hex digits."""
        text = self.string(value, field, limit=1024)
        if len(text) != 2 * size or not _HEX.fullmatch(text):
            self.fail(
                field,
                f"{show(text)} is not a {size}-byte digest; write it as {2 * size} hex digits",
            )
        return bytes.fromhex(text)

    def pcr(self, key: object, field: str, high: int) -> int:
        """A PCR index written as a decimal string key (``"7"``)."""
        if not isinstance(key, str) or not _DECIMAL.fullmatch(key) or int(key) > high:
            self.fail(field, f"{show(key)} is not a PCR index; use a decimal from 0 to {high}")
        return int(key)

    def mapping(self, value: object, field: str, *, limit: int) -> Mapping[str, Any]:
        """An object of at most ``limit`` keys, keys checked by the caller."""
        checked = self.obj(value, field)
        if len(checked) > limit:
            self.fail(field, f"holds {len(checked)} keys; the most is {limit}")
        return checked


def _join(field: str | None, key: str) -> str:
    return key if field is None else f"{field}.{key}"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def relative_to_root(root: Path, value: str) -> Path | None:
    """``root / value`` if it stays inside ``root`` once symlinks are resolved, else ``None``."""
    if not value or "\x00" in value or "\\" in value or value.startswith("/"):
        return None
    if re.match(r"[A-Za-z]:", value) or ".." in value.split("/"):
        return None
    try:
        resolved = (root / value).resolve()
        inside = resolved.is_relative_to(root.resolve())
    except (OSError, ValueError, RuntimeError):
        return None
    return resolved if inside else None


def fspath(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when inside it, for messages."""
    if root is not None:
        try:
            return os.fspath(path.relative_to(root))
        except ValueError:
            pass
    return os.fspath(path)

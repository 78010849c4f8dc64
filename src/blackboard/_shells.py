"""Frozen records built at the cost of mutable ones, for the kernel's hot path.

A frozen slotted dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (a frozen class refuses plain assignment): about 1.6 us for a
:class:`~blackboard.Record` of eight fields, built several times for every write. A
*shell* is a plain class with the very same ``__slots__``: its fields are set by plain
assignment, then the object's class becomes the frozen one (CPython allows that between
two classes of one layout). What comes out is exactly an instance of the frozen class,
equal to and indistinguishable from the one its constructor builds, in about 0.2 us.

The builders that use a shell sit beside their classes (``new_record`` in
``_records.py`` and so on) and take every field positionally, in declaration order; a
test holds each builder's output equal to the constructor's, field by field.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any


def shell_of(frozen: type[Any]) -> type[Any]:
    """A mutable class laid out as ``frozen`` (a frozen, slotted dataclass).

    Raises:
        TypeError: ``frozen`` is not a slotted dataclass whose slots are its fields in
            order (a builder setting the shell's slots would miss a field).
    """
    if not is_dataclass(frozen):
        raise TypeError(f"{frozen.__name__} is not a dataclass")
    names = tuple(f.name for f in fields(frozen))
    if getattr(frozen, "__slots__", None) != names or frozen.__bases__ != (object,):
        raise TypeError(f"{frozen.__name__} must be a slotted dataclass with no base class")
    shell = type(f"_{frozen.__name__}Shell", (), {"__slots__": names})
    probe: Any = object.__new__(shell)
    probe.__class__ = frozen  # fails here, at import, if the layouts ever differ
    return shell

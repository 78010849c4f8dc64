"""Frozen, slotted dataclasses built at a plain object's cost, for a hot path.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__(self, name, value)`` (its own ``__setattr__`` refuses): a global
look-up, an attribute look-up and a generic call per field, about 1.6 us for a
:class:`~blackboard.Record`'s eight fields. The kernel builds several such objects for
every write (``Record``, ``PendingWrite``, ``Appended``, ``Written``) and pybb's engine
several per record it proposes (``ProposedContribution``, ``BlackboardEntry``).

:func:`builder` makes the cheaper constructor once per class: an instance of a private
twin class with the very same ``__slots__`` (and no frozen ``__setattr__``) takes the
fields as plain slot stores, then its ``__class__`` becomes the frozen class, which
CPython allows only between identical layouts (``builder`` tries it once, so a layout
that differs fails when the builder is made, not on a write). What comes out is an
ordinary instance of the frozen class, as if its constructor had built it: equal, hashed,
printed, copied and pickled the same, and frozen; nothing else ever holds the twin.
About a fifth of the constructor's time for eight fields, a third for three.

This is the kernel's and its applications' one such mechanism (docs/adr/0025); only
``buddhi``, which is usable without the kernel, keeps its own (``buddhi._frozen``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["builder"]

_T = TypeVar("_T")


def builder(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of ``cls`` taking every field, positionally, in the fields' order.

    No defaults: a hot path passes each field (so a field added to ``cls`` breaks the
    call loudly, not silently). ``cls`` must be a frozen, slotted dataclass of plain
    ``init`` fields, based on ``object``, without ``__post_init__`` (none is run).

    Raises:
        TypeError: ``cls`` is not such a class.
    """
    names = _field_names(cls)
    twin = type(
        f"{cls.__name__}Twin",
        (),
        {"__slots__": cls.__dict__["__slots__"], "__module__": __name__},
    )
    arguments = ", ".join(names)
    body = "".join(f"    built.{name} = {name}\n" for name in names)
    source = (
        f"def build_{cls.__name__}({arguments}):\n"
        f"    built = _new(_twin)\n{body}    built.__class__ = _cls\n    return built\n"
    )
    probe: Any = object.__new__(twin)
    probe.__class__ = cls  # raises TypeError here if the layouts ever differ
    scope: dict[str, Any] = {"_twin": twin, "_cls": cls, "_new": object.__new__}
    exec(source, scope)  # the way dataclasses itself builds ``__init__``
    build: Callable[..., _T] = scope[f"build_{cls.__name__}"]
    build.__doc__ = f"Build a {cls.__qualname__} from its fields (see blackboard.frozen)."
    return build


def _field_names(cls: type) -> list[str]:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"builder() needs a frozen, slotted dataclass, got {cls!r}")
    if cls.__bases__ != (object,) or hasattr(cls, "__post_init__"):
        raise TypeError(
            f"builder() needs a class based on object alone, without __post_init__: {cls!r}"
        )
    names = [field.name for field in dataclasses.fields(cls) if field.init]
    taken = list(inspect.signature(cls).parameters)  # an InitVar is taken, not a field
    if taken != names or len(names) != len(dataclasses.fields(cls)):
        raise TypeError(f"builder() needs plain init fields only: {cls!r}")
    return names

"""Cheaper construction of the frozen, slotted dataclasses built once per item.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``: a global lookup, an attribute lookup and a
generic setattr per field, about 110 ns each; an eight-field ``Outcome`` took ~880 ns,
five times a whole iteration of the benchmark's bare loop. Two remedies, neither of
which changes what a value is or lets anyone change it once built:

* :func:`fast_init` replaces the public ``__init__`` with one that calls each slot's
  member descriptor directly (``Outcome.item.__set__``), about half the cost, and
  changes nothing else: the same parameters, defaults and annotations (so
  ``inspect.signature``, ``dataclasses.replace`` and keyword calls see what they saw),
  ``__post_init__`` still runs, and ``__setattr__`` and ``__delattr__`` are still the
  dataclass's, which raise :class:`dataclasses.FrozenInstanceError`.
* :func:`builder` makes a private constructor for the kernel's own hot path, about half
  that again: a twin class with the same slots and no frozen ``__setattr__`` takes the
  fields as plain slot stores, then the new object's ``__class__`` becomes the frozen
  class, which Python allows only between identical layouts (it raises ``TypeError``
  otherwise). What it returns is an ordinary instance of the frozen class, as if built
  by it; nothing else ever holds the twin.

This is buddhi's one fast-construction mechanism, kept because it pays on a path users
see: on ``bench/buddhi_items.py``'s mixed items, ``evaluate_item`` runs 1.3-1.4x faster
with both remedies than with plain dataclasses, and neither remedy alone reached 1.3x
(``bench/RESULTS.md``, 2026-12-01). The kernel and pybb share ``blackboard.frozen``'s
builder (docs/adr/0025); buddhi is usable without the kernel, so it keeps its own.
"""

from __future__ import annotations

import dataclasses
from types import MemberDescriptorType
from typing import Any, TypeVar

__all__ = ["builder", "fast_init"]

_T = TypeVar("_T")


def fast_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted dataclass an ``__init__`` that sets slots directly.

    Apply it above ``@dataclass(frozen=True, slots=True)``. Only plain fields are
    supported (no ``default_factory``, ``init=False``, ``kw_only`` or ``InitVar``),
    which is all the classes it is used on have; anything else is refused at import.

    Raises:
        TypeError: ``cls`` is not a frozen slotted dataclass of plain fields.
    """
    scope: dict[str, Any] = {}
    names = _plain_fields(cls, scope)
    body = [f"    _set_{name}(self, {name})" for name in names]
    for name in names:
        slot = cls.__dict__[name]
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"fast_init needs {cls.__name__}.{name} to be a slot")
        scope[f"_set_{name}"] = slot.__set__
    init = _compile_init(cls, names, body, scope)
    generated = cls.__init__
    init.__qualname__ = generated.__qualname__
    init.__module__ = generated.__module__
    init.__annotations__ = dict(generated.__annotations__)
    init.__doc__ = generated.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def builder(cls: type[_T]) -> type[_T]:
    """Return a private constructor of a frozen, slotted dataclass, for the hot path.

    Call it as the class itself (same parameters and defaults); it returns an instance
    of ``cls``, frozen, with ``__post_init__`` run. It is typed as ``cls`` because it
    takes exactly ``cls``'s arguments; it is not a subclass, so never use it in
    ``isinstance``.

    Raises:
        TypeError: ``cls`` is not a frozen slotted dataclass of plain fields.
    """
    scope: dict[str, Any] = {"_cls": cls}
    names = _plain_fields(cls, scope)
    body = [f"    self.{name} = {name}" for name in names]
    body.append("    self.__class__ = _cls")
    namespace = {
        "__slots__": cls.__dict__["__slots__"],
        "__module__": cls.__module__,
        "__qualname__": f"{cls.__qualname__}Builder",
        "__doc__": f"Builds a {cls.__name__}; see buddhi._frozen.builder.",
        "__init__": _compile_init(cls, names, body, scope),
    }
    # Typed as cls, not a subclass of it: it takes cls's arguments and returns a cls.
    return type(f"{cls.__name__}Builder", (), namespace)


def _plain_fields(cls: type, scope: dict[str, Any]) -> list[str]:
    """Check ``cls`` and return its field names; put their defaults in ``scope``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"a frozen, slotted dataclass is needed, got {cls!r}")
    fields = dataclasses.fields(cls)
    if len(cls.__dataclass_fields__) != len(fields):  # type: ignore[attr-defined]
        raise TypeError(f"plain fields only: {cls.__name__} has an InitVar")
    names = []
    for field in fields:
        if field.default_factory is not dataclasses.MISSING or not field.init or field.kw_only:
            raise TypeError(f"plain fields only: {cls.__name__}.{field.name}")
        names.append(field.name)
        if field.default is not dataclasses.MISSING:
            scope[f"_default_{field.name}"] = field.default
    return names


def _compile_init(cls: type, names: list[str], body: list[str], scope: dict[str, Any]) -> Any:
    params = [
        name if f"_default_{name}" not in scope else f"{name}=_default_{name}" for name in names
    ]
    if hasattr(cls, "__post_init__"):
        body = [*body, "    self.__post_init__()"]
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(source, scope)  # the way dataclasses itself builds __init__
    return scope["__init__"]

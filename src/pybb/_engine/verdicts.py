"""Judging a measurement: the predicate registry and the verdict it gives.

A predicate that raises gives a failing verdict that names the exception: the entry is
worked on (or escalated) like any failing one, and the report says why it failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pybb._engine.projection import EntryState
from pybb.errors import PredicateError, UnregisteredPredicateError

__all__ = ["Predicate", "Predicates", "Verdict"]

Predicate = Callable[[Any], Any]
"""A condition on a measurement (or one component): truthy means good standing."""

Verdict = tuple[bool | dict[str, bool], bool, str | None]
"""``(result, good_standing, error)``: the seed's result, its standing, what raised."""


class Predicates:
    """Predicate name to function (the seed's ``predicate_registry``), and judging with them."""

    def __init__(self) -> None:
        self.registry: dict[str, Predicate] = {}

    def register(self, name: str, predicate: Predicate) -> None:
        """Make ``name`` judge measurements with ``predicate``.

        Raises:
            PredicateError: The name is not a non-empty string or ``predicate`` is not callable.
        """
        if not isinstance(name, str) or not name:
            raise PredicateError(f"a predicate name must be a non-empty string, got {name!r}")
        if not callable(predicate):
            raise PredicateError(
                f"predicate {name!r} must be callable (measurement -> bool), got {predicate!r}"
            )
        self.registry[name] = predicate

    def verdict(self, entry: EntryState, measurement: Any) -> Verdict:
        """The entry's verdict on ``measurement`` (component by component, if it has them)."""
        if entry.conditions is None:  # ``_judge`` inline: a verdict or two per attempt
            name = entry.predicate or ""
            predicate = self.registry.get(name)
            if predicate is None:
                raise UnregisteredPredicateError(entry.key, name, sorted(self.registry))
            try:
                passed = bool(predicate(measurement))
            except Exception as exc:
                return False, False, _raised(name, exc)
            return passed, passed, None
        result: dict[str, bool] = {}
        errors: list[str] = []
        for component, name in entry.conditions.items():
            result[component], error = self._judge(entry, name, measurement[component])
            if error is not None:
                errors.append(f"{component}: {error}")
        return result, all(result.values()), "; ".join(errors) or None

    def check(self, entries: Mapping[str, EntryState], keys: Iterable[str]) -> None:
        """Refuse, before anything is written, entries whose predicates are not registered.

        Raises:
            UnregisteredPredicateError: Naming the entry, the predicate and those registered.
        """
        registry = self.registry
        for key in keys:
            entry = entries[key]
            if entry.conditions is None:  # most entries: one name, without a list around it
                if entry.predicate not in registry:
                    raise UnregisteredPredicateError(key, entry.predicate or "", sorted(registry))
                continue
            for name in entry.conditions.values():
                if name not in registry:
                    raise UnregisteredPredicateError(key, name or "", sorted(registry))

    def _judge(self, entry: EntryState, name: str, value: Any) -> tuple[bool, str | None]:
        predicate = self.registry.get(name)
        if predicate is None:
            raise UnregisteredPredicateError(entry.key, name, sorted(self.registry))
        try:
            return bool(predicate(value)), None
        except Exception as exc:
            return False, _raised(name, exc)


def _raised(name: str, exc: Exception) -> str:
    return f"predicate {name!r} raised {type(exc).__name__}: {exc}"

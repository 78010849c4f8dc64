"""Budget use per scope, as the inbox shows it: a small seam with a board-backed fill."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from blackboard import BoardReader, Premise

__all__ = ["BUDGET_PREMISE", "BudgetView", "NoBudget", "PremiseBudgetView", "ScopeUsage"]

BUDGET_PREMISE = "budget"
"""The premise :class:`PremiseBudgetView` reads by default."""


@dataclass(frozen=True, slots=True)
class ScopeUsage:
    """How much of one budget scope is spent.

    Attributes:
        scope: The scope's path, e.g. ``"fleet/site-a"``.
        spent: How much was used.
        ceiling: How much may be used.
    """

    scope: str
    spent: float
    ceiling: float

    @property
    def fraction(self) -> float:
        """``spent / ceiling`` in [0, 1] (1 when the ceiling is 0)."""
        if self.ceiling <= 0:
            return 1.0
        return max(0.0, min(1.0, self.spent / self.ceiling))


class BudgetView(Protocol):
    """Where the inbox reads budget use from (a ``buddhi`` budget tree, a premise...)."""

    def usage(self) -> Sequence[ScopeUsage]:
        """Each scope's use, in the order to show them."""
        ...


class NoBudget:
    """A budget view that shows nothing (the model declares no budget)."""

    def usage(self) -> Sequence[ScopeUsage]:
        """No scopes."""
        return ()


class PremiseBudgetView:
    """Reads ``{scope_path: {"spent": n, "ceiling": m}}`` from a premise of the board.

    The premise may hold the object itself or its JSON text; malformed scopes are left out.

    Args:
        reader: The board.
        premise: The premise's name.
    """

    def __init__(self, reader: BoardReader, premise: str = BUDGET_PREMISE) -> None:
        self._reader = reader
        self._premise = premise

    def usage(self) -> Sequence[ScopeUsage]:
        """Each scope's use, sorted by scope path."""
        value: Any = self._reader.read_premise(self._premise).value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return ()
        if not isinstance(value, dict):
            return ()
        found = (_scope(str(path), entry) for path, entry in sorted(value.items()))
        return tuple(s for s in found if s is not None)

    @classmethod
    def for_reader(cls, reader: BoardReader) -> BudgetView:
        """The default view of a board: its ``budget`` premise if declared, else nothing."""
        region = reader.regions.get(BUDGET_PREMISE)
        return cls(reader) if isinstance(region, Premise) else NoBudget()


def _scope(path: str, entry: object) -> ScopeUsage | None:
    if not isinstance(entry, dict):
        return None
    spent, ceiling = entry.get("spent"), entry.get("ceiling")
    if _number(spent) and _number(ceiling):
        return ScopeUsage(path, float(spent), float(ceiling))
    return None


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

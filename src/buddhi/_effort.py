"""Effort: the pack's scale of efforts, the Router's pick, and the clamped spend."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from buddhi._errors import PolicyError, UnknownEffortError
from buddhi._frozen import fast_init

__all__ = ["EffortScale", "RouterPick", "Spend"]


@dataclass(frozen=True, slots=True)
class RouterPick:
    """The Router's per-item recommendation.

    Attributes:
        model: The model to spend on the item.
        effort: The effort to spend, a name from the pack's :class:`EffortScale`.
    """

    model: str
    effort: str


@fast_init
@dataclass(frozen=True, slots=True)
class Spend:
    """What ``decide_spend`` settled on: the pick after clamping.

    Attributes:
        model: The model to spend.
        effort: The effort after clamping to the stream's effort ceiling.
        iterations: The iterations allowed: the effort's, capped by what is left of the
            iteration budget.
        requested: The Router's unclamped pick.
        clamped_by: What lowered the pick: ``"effort_ceiling"``, ``"iteration_budget"``.
    """

    model: str
    effort: str
    iterations: int
    requested: RouterPick
    clamped_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EffortScale:
    """The pack's ordered efforts, lowest first, each with the iterations it allows.

    Attributes:
        levels: ``(name, iterations)`` pairs, lowest effort first, iterations increasing.
    """

    levels: tuple[tuple[str, int], ...]
    _rank: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        _require_levels(self.levels)
        ranks = {name: rank for rank, (name, _) in enumerate(self.levels)}
        object.__setattr__(self, "_rank", ranks)

    @classmethod
    def of(cls, levels: Iterable[tuple[str, int]]) -> EffortScale:
        """Build a scale from ``(name, iterations)`` pairs, lowest effort first."""
        return cls(tuple(levels))

    @property
    def names(self) -> tuple[str, ...]:
        """The effort names, lowest first."""
        return tuple(name for name, _ in self.levels)

    @property
    def highest(self) -> str:
        """The highest effort."""
        return self.levels[-1][0]

    def rank(self, effort: str, *, named_by: str = "a Router pick") -> int:
        """Return an effort's position in the scale, 0 for the lowest.

        Raises:
            UnknownEffortError: The effort is not in the scale.
        """
        rank = self._rank.get(effort)
        if rank is None:
            raise UnknownEffortError(
                f"{named_by} names effort {effort!r}, which the pack's scale does not define; "
                f"use one of {list(self.names)}",
                effort=effort,
                known=self.names,
            )
        return rank

    def iterations(self, effort: str) -> int:
        """Return the iterations an effort allows.

        Raises:
            UnknownEffortError: The effort is not in the scale.
        """
        rank = self._rank.get(effort)
        if rank is None:
            rank = self.rank(effort)  # raises, naming the effort
        return self.levels[rank][1]


def _require_levels(levels: object) -> None:
    if not isinstance(levels, tuple) or not levels:
        raise PolicyError(f"an effort scale needs at least one (name, iterations), got {levels!r}")
    previous = -1
    for level in levels:
        if not (isinstance(level, tuple) and len(level) == 2 and isinstance(level[0], str)):
            raise PolicyError(f"an effort level is a (name, iterations) pair, got {level!r}")
        iterations = level[1]
        if (
            isinstance(iterations, bool)
            or not isinstance(iterations, int)
            or iterations <= previous
        ):
            raise PolicyError(
                f"effort {level[0]!r}: iterations must be whole numbers increasing from the "
                f"lowest effort, got {iterations!r} after {previous}"
            )
        previous = iterations
    if len({name for name, _ in levels}) != len(levels):
        raise PolicyError(f"effort names must be unique, got {[name for name, _ in levels]}")

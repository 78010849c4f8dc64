"""The stop detector's parameters and report, and the detector itself."""

from __future__ import annotations

import math
from dataclasses import dataclass

from buddhi._errors import PolicyError
from buddhi._frozen import builder, fast_init
from buddhi._items import Attempt

__all__ = ["ConvergencePolicy", "ConvergenceReport", "detect_convergence"]


@dataclass(frozen=True, slots=True)
class ConvergencePolicy:
    """When an item's iterations count as converged.

    An item converges when its last ``window`` counted attempts all scored, and their
    scores lie within ``tolerance`` of each other. Transient failures are not counted,
    up to ``max_transient_retries`` of them; past that bound each further transient
    failure counts as a failure, which breaks convergence.

    Attributes:
        window: How many trailing counted attempts must agree, at least 1.
        tolerance: The widest spread of scores that still agrees, at least 0.
        max_transient_retries: The bounded-retry allowance for transient failures.
    """

    window: int = 3
    tolerance: float = 0.0
    max_transient_retries: int = 3

    def __post_init__(self) -> None:
        _require_count("window", self.window, minimum=1)
        _require_count("max_transient_retries", self.max_transient_retries, minimum=0)
        tolerance = self.tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
            raise PolicyError(f"convergence tolerance must be a number, got {tolerance!r}")
        if not math.isfinite(tolerance) or tolerance < 0:
            raise PolicyError(f"convergence tolerance must be finite and >= 0, got {tolerance!r}")


@fast_init
@dataclass(frozen=True, slots=True)
class ConvergenceReport:
    """What the stop detector saw.

    Attributes:
        converged: Whether the item converged.
        counted: How many attempts counted towards convergence.
        transient_excluded: How many transient failures were left out of the count.
        retries_exhausted: Whether transient failures went past the retry bound.
    """

    converged: bool
    counted: int
    transient_excluded: int
    retries_exhausted: bool


def detect_convergence(
    history: tuple[Attempt, ...], policy: ConvergencePolicy
) -> ConvergenceReport:
    """Run the stop detector over an item's history.

    Args:
        history: The item's attempts, oldest first.
        policy: The convergence parameters.

    Returns:
        The report; a transient failure within the retry bound is never read as progress
        nor as agreement: it is simply not counted.
    """
    if not history:
        return _NO_HISTORY
    # One pass, no intermediate lists: this runs for every item with a history.
    retries = policy.max_transient_retries
    counted: list[Attempt] = []
    excluded = 0
    exhausted = False
    for attempt in history:
        if attempt.transient:
            if excluded < retries:
                excluded += 1
                continue
            exhausted = True
        counted.append(attempt)
    return _report(_agree(counted, policy), len(counted), excluded, exhausted)


_NO_HISTORY = ConvergenceReport(False, 0, 0, False)
_report = builder(ConvergenceReport)  # ConvergenceReport(...) at half the cost


def _agree(counted: list[Attempt], policy: ConvergencePolicy) -> bool:
    window = policy.window
    if len(counted) < window:
        return False
    numbers: list[float] = []
    for attempt in counted[-window:]:
        score = attempt.score
        if score is None:
            return False
        numbers.append(score)
    return max(numbers) - min(numbers) <= policy.tolerance


def _require_count(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PolicyError(f"convergence {name} must be a whole number >= {minimum}, got {value!r}")

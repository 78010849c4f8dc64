"""The two-tier exclusion lattice of a source, and the refusal an exclusion causes.

Apart from the Store seam (:mod:`buddhi._store`, which re-exports these) so that
:class:`SourceExcluded`, which carries an :class:`Exclusions`, needs only the error leaf
(:mod:`buddhi._errors`) and :mod:`buddhi.errors` can re-export it without a circle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from buddhi._errors import AdmissionRefused, ExclusionError
from buddhi._frozen import fast_init

__all__ = ["ExclusionCause", "Exclusions", "SourceExcluded", "Tier"]


class Tier(enum.Enum):
    """The two tiers of the exclusion lattice; a cause lives in exactly one."""

    PERMANENT = "permanent"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class ExclusionCause:
    """Why a source is excluded from interrupting people, and in which tier.

    Attributes:
        name: The cause, from the pack's taxonomy (``"revoked"``, ``"rate_limited"``).
        tier: ``PERMANENT`` causes are never retracted; ``TRANSIENT`` ones may be.
    """

    name: str
    tier: Tier


@fast_init
@dataclass(frozen=True, slots=True)
class Exclusions:
    """A source's place in the two-tier exclusion lattice.

    The lattice orders clear < transient < permanent; a source's level is the
    highest tier holding a cause. The tiers never cross: a cause name held in one tier
    cannot be added in the other, and permanent causes cannot be retracted, so
    retracting transient causes never clears a permanent exclusion.

    Attributes:
        source: The excluded source.
        permanent: The permanent causes held.
        transient: The transient (retractable) causes held.
    """

    source: str
    permanent: frozenset[str] = frozenset()
    transient: frozenset[str] = frozenset()

    @property
    def level(self) -> Tier | None:
        """The highest tier holding a cause, or ``None`` when the source is clear."""
        if self.permanent:
            return Tier.PERMANENT
        return Tier.TRANSIENT if self.transient else None

    @property
    def excluded(self) -> bool:
        """Whether any cause in either tier excludes the source."""
        return bool(self.permanent or self.transient)

    def adding(self, cause: ExclusionCause) -> Exclusions:
        """Return these exclusions with ``cause`` added to its tier.

        Raises:
            ExclusionError: The cause's name is already held in the other tier.
        """
        mine, other = self._tiers(cause.tier)
        if cause.name in other:
            raise ExclusionError(self._crossing(cause))
        return self._with(cause.tier, mine | {cause.name})

    def retracting(self, cause: ExclusionCause) -> Exclusions:
        """Return these exclusions with a transient ``cause`` retracted (absent: unchanged).

        Raises:
            ExclusionError: The cause is permanent, or its name is held as permanent.
        """
        if cause.tier is Tier.PERMANENT or cause.name in self.permanent:
            raise ExclusionError(
                f"cause {cause.name!r} of source {self.source!r} is permanent and cannot be "
                "retracted; only transient causes are retractable"
            )
        return replace(self, transient=self.transient - {cause.name})

    def _tiers(self, tier: Tier) -> tuple[frozenset[str], frozenset[str]]:
        if tier is Tier.PERMANENT:
            return self.permanent, self.transient
        return self.transient, self.permanent

    def _with(self, tier: Tier, causes: frozenset[str]) -> Exclusions:
        if tier is Tier.PERMANENT:
            return replace(self, permanent=causes)
        return replace(self, transient=causes)

    def _crossing(self, cause: ExclusionCause) -> str:
        return (
            f"cause {cause.name!r} of source {self.source!r} is held in the other tier; "
            f"permanent and transient causes never cross, so it cannot be {cause.tier.value}"
        )


class SourceExcluded(AdmissionRefused):
    """The item's source is excluded from interrupting people.

    Attributes:
        item_id: The item whose escalation was refused.
        exclusions: The source's exclusions in both tiers when it was refused.
    """

    def __init__(self, *, item_id: str, exclusions: Exclusions) -> None:
        causes = ", ".join(sorted(exclusions.permanent | exclusions.transient))
        super().__init__(
            f"escalation of item {item_id!r} refused: its source {exclusions.source!r} is "
            f"excluded ({causes}); retract the transient causes to let it escalate again",
            item_id=item_id,
        )
        self.exclusions = exclusions

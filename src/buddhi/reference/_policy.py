"""The reference PolicyPack: a plain frozen dataclass of thresholds, phrasings, taxonomy."""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from buddhi._asks import MAX_OPTIONS, MIN_OPTIONS, Ask, AskOption
from buddhi._budget import GraduatedBar
from buddhi._convergence import ConvergencePolicy
from buddhi._effort import EffortScale, Spend
from buddhi._frozen import builder
from buddhi._items import Item
from buddhi._store import ExclusionCause, Tier
from buddhi.errors import PolicyError

__all__ = ["DEFAULT_CAUSES", "DEFAULT_EFFORTS", "DEFAULT_POLICY", "Policy", "ReferencePack"]

DEFAULT_EFFORTS = EffortScale((("low", 1), ("medium", 3), ("high", 8)))
"""Three efforts: one, three and eight iterations."""

DEFAULT_CAUSES = (
    ExclusionCause("revoked", Tier.PERMANENT),
    ExclusionCause("retired", Tier.PERMANENT),
    ExclusionCause("rate_limited", Tier.TRANSIENT),
    ExclusionCause("muted", Tier.TRANSIENT),
)
"""Two permanent and two transient exclusion causes."""

PLACEHOLDERS = ("item_id", "source", "trigger", "model", "effort", "iterations", "confidence")
"""The fields a question phrasing may use, as ``str.format`` placeholders."""


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the reference pack needs, as plain data.

    Attributes:
        confidence_threshold: At or above it the model handles an item, in [0, 1].
        question: The ask's phrasing, a ``str.format`` template over :data:`PLACEHOLDERS`.
        options: The 2–4 option labels every ask offers.
        recommended: The label of the starred option.
        details: What each option does, one per label (or none at all).
        efforts: The effort taxonomy.
        iteration_budget: The most iterations one item may be given in all.
        convergence: The stop detector's parameters.
        bar: The graduated admission bar.
        exclusion_causes: The exclusion taxonomy.
        discard_sources: Sources whose items ``worth_acting`` discards (keep-all if empty).
        trigger_words: Words that flag an item at Stage 0 when its str payload holds one.
    """

    confidence_threshold: float
    question: str
    options: tuple[str, ...]
    recommended: str
    details: tuple[str, ...] = ()
    efforts: EffortScale = DEFAULT_EFFORTS
    iteration_budget: int = 8
    convergence: ConvergencePolicy = field(default_factory=ConvergencePolicy)
    bar: GraduatedBar = field(default_factory=GraduatedBar)
    exclusion_causes: tuple[ExclusionCause, ...] = DEFAULT_CAUSES
    discard_sources: frozenset[str] = frozenset()
    trigger_words: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_threshold(self.confidence_threshold)
        _check_question(self.question)
        _check_options(self.options, self.recommended, self.details)
        _check_types(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Policy:
        """Build a policy from plain data (e.g. parsed TOML or JSON).

        Raises:
            PolicyError: A threshold or phrasing is missing, a key is unknown, or a
                value is out of range; the message names it.
        """
        known = [f.name for f in fields(cls)]
        required = ("confidence_threshold", "question", "options", "recommended")
        missing = [key for key in required if key not in data]
        if missing:
            raise PolicyError(f"the policy is missing {missing}; every pack needs them")
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise PolicyError(f"the policy has unknown keys {unknown}; known keys are {known}")
        values = dict(data)
        for key in ("options", "details", "trigger_words"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])  # type: ignore[arg-type]
        return cls(**values)  # type: ignore[arg-type]


class ReferencePack:
    """The simplest correct PolicyPack, read from a :class:`Policy`.

    ``worth_acting`` keeps every item except those of ``discard_sources``;
    ``detect_trigger`` flags a str payload holding a trigger word (a no-op without
    words); ``build_ask`` phrases the question, offers the policy's options with the
    recommended one starred, and sets the escalation confidence to
    ``1 - item.confidence``: the less sure the model, the surer a person is needed.

    Args:
        policy: The policy; by default :data:`DEFAULT_POLICY`.
    """

    __slots__ = (
        "_options",
        "bar",
        "confidence_threshold",
        "convergence",
        "efforts",
        "exclusion_causes",
        "iteration_budget",
        "policy",
    )

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = DEFAULT_POLICY if policy is None else policy
        if not isinstance(self.policy, Policy):
            raise PolicyError(f"ReferencePack reads a reference.Policy, got {self.policy!r}")
        self.confidence_threshold: float = self.policy.confidence_threshold
        self.efforts: EffortScale = self.policy.efforts
        self.iteration_budget: int = self.policy.iteration_budget
        self.convergence: ConvergencePolicy = self.policy.convergence
        self.bar: GraduatedBar = self.policy.bar
        causes = {cause.name: cause for cause in self.policy.exclusion_causes}
        self.exclusion_causes: Mapping[str, ExclusionCause] = MappingProxyType(causes)
        self._options = _build_options(self.policy)

    def __repr__(self) -> str:
        return f"ReferencePack({self.policy!r})"

    def detect_trigger(self, item: Item) -> str | None:
        """Flag a str payload that holds a trigger word, case-insensitively."""
        if not self.policy.trigger_words or not isinstance(item.payload, str):
            return None
        text = item.payload.casefold()
        for word in self.policy.trigger_words:
            if word.casefold() in text:
                return f"keyword:{word}"
        return None

    def worth_acting(self, item: Item) -> bool:
        """Keep every item whose source is not listed in ``discard_sources``."""
        return item.source not in self.policy.discard_sources

    def build_ask(self, item: Item, spend: Spend) -> Ask:
        """Phrase the question and offer the policy's options, one starred."""
        question = self.policy.question.format(
            item_id=item.id,
            source=item.source,
            trigger=item.trigger or "",
            model=spend.model,
            effort=spend.effort,
            iterations=spend.iterations,
            confidence=item.confidence,
        )
        return _ask(item.id, question, self._options, 1.0 - item.confidence)


_ask = builder(Ask)  # Ask(...) at half the cost: see buddhi._frozen


def _build_options(policy: Policy) -> tuple[AskOption, ...]:
    details = policy.details or ("",) * len(policy.options)
    return tuple(
        AskOption(label, detail, label == policy.recommended)
        for label, detail in zip(policy.options, details, strict=True)
    )


def _check_threshold(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(f"the confidence_threshold must be a number in [0, 1], got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise PolicyError(f"the confidence_threshold must be a number in [0, 1], got {value!r}")


def _check_question(question: object) -> None:
    if not isinstance(question, str) or not question.strip():
        raise PolicyError(f"the question phrasing must be a non-empty str, got {question!r}")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(question) if name is not None}
    except ValueError as exc:
        msg = f"the question phrasing {question!r} is not a valid template: {exc}"
        raise PolicyError(msg) from exc
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        raise PolicyError(
            f"the question phrasing uses unknown placeholders {unknown}; use {list(PLACEHOLDERS)}"
        )


def _check_options(options: object, recommended: object, details: object) -> None:
    if not isinstance(options, tuple) or not all(isinstance(o, str) and o for o in options):
        raise PolicyError(f"options must be a tuple of non-empty str, got {options!r}")
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS or len(set(options)) != len(options):
        raise PolicyError(
            f"offer {MIN_OPTIONS} to {MAX_OPTIONS} distinct options, got {list(options)}"
        )
    if recommended not in options:
        raise PolicyError(f"the recommended option {recommended!r} is not one of {list(options)}")
    if not isinstance(details, tuple) or len(details) not in (0, len(options)):
        raise PolicyError(f"give one detail per option or none, got {details!r}")


def _check_types(policy: Policy) -> None:
    expected = {
        "efforts": EffortScale,
        "convergence": ConvergencePolicy,
        "bar": GraduatedBar,
        "discard_sources": frozenset,
        "exclusion_causes": tuple,
        "trigger_words": tuple,
    }
    for name, cls in expected.items():
        if not isinstance(getattr(policy, name), cls):
            raise PolicyError(f"the policy's {name} must be a {cls.__name__}")
    budget = policy.iteration_budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise PolicyError(f"the iteration_budget must be a whole number >= 0, got {budget!r}")
    names = [cause.name for cause in policy.exclusion_causes]
    if len(set(names)) != len(names):
        raise PolicyError(f"exclusion cause names must be unique, got {names}")


DEFAULT_POLICY = Policy(
    confidence_threshold=0.8,
    question="{source} raised {item_id}; the model is only {confidence:.0%} sure. How to proceed?",
    options=("Apply the model's fix", "Reject it", "Investigate by hand"),
    recommended="Investigate by hand",
)
"""A working policy: threshold 0.8, three options, investigation recommended."""

"""The pre-reasoned ask a person receives, and the checks that reject a malformed one."""

from __future__ import annotations

import math
from dataclasses import dataclass

from buddhi._frozen import fast_init

__all__ = ["MAX_OPTIONS", "MIN_OPTIONS", "Ask", "AskOption", "ask_defects"]

MIN_OPTIONS = 2
"""The fewest options an ask may offer."""

MAX_OPTIONS = 4
"""The most options an ask may offer."""


@dataclass(frozen=True, slots=True)
class AskOption:
    """One option of an ask.

    Attributes:
        label: The option's short label, unique within the ask.
        detail: What choosing it does.
        recommended: Whether this is the starred recommendation.
    """

    label: str
    detail: str = ""
    recommended: bool = False


@fast_init
@dataclass(frozen=True, slots=True)
class Ask:
    """A pre-reasoned question for a person: 2–4 options, exactly one starred.

    An ``Ask`` can be built malformed on purpose: ``validate_and_ask`` checks it with
    :func:`ask_defects` and ends a malformed one as ``INVALID_ASK`` instead of raising.

    Attributes:
        item_id: The item the ask is about.
        question: The question, phrased by the pack.
        options: The options offered.
        confidence: The escalation confidence: how sure the pack is that a person is
            needed, in [0, 1]; checked against the budget's bar.
    """

    item_id: str
    question: str
    options: tuple[AskOption, ...]
    confidence: float

    @property
    def recommendation(self) -> AskOption | None:
        """The starred option, or ``None`` unless exactly one is starred."""
        starred = [option for option in self.options if option.recommended]
        return starred[0] if len(starred) == 1 else None


def ask_defects(ask: Ask, item_id: str) -> tuple[str, ...]:
    """Return what is wrong with an ask, each as a sentence; empty when it is well formed.

    Args:
        ask: The ask to check.
        item_id: The id of the item the ask must be about.
    """
    options = ask.options
    # A pack usually offers the same options tuple in every ask (the reference pack
    # does): their checks are remembered for the last tuple of plain AskOptions seen.
    seen, option_defects = _last_options
    if options is not seen:
        option_defects = tuple(_option_defects(options))
        if type(options) is tuple and all(type(option) is AskOption for option in options):
            _remember_options(options, option_defects)
    if not option_defects:
        about, question, confidence = ask.item_id, ask.question, ask.confidence
        well_formed = (
            type(about) is str
            and about == item_id
            and type(question) is str
            and question.strip()
            and type(confidence) is float
            and 0.0 <= confidence <= 1.0
        )
        if well_formed:
            return ()
    defects = [*_shape_defects(ask, item_id), *option_defects]
    if not _is_unit(ask.confidence):
        defects.append(f"its confidence must be a finite number in [0, 1], got {ask.confidence!r}")
    return tuple(defects)


_last_options: tuple[object, tuple[str, ...]] = (object(), ())


def _remember_options(options: tuple[AskOption, ...], defects: tuple[str, ...]) -> None:
    """Remember one options tuple's defects: one tuple assignment, so thread-safe.

    Only a tuple of plain (not subclassed) :class:`AskOption` is remembered: frozen, it
    holds the same labels and stars for as long as it lives, and the remembered pair
    keeps it alive, so the identity check in :func:`ask_defects` cannot be fooled by a
    new tuple at a recycled address.
    """
    global _last_options
    _last_options = (options, defects)


def _shape_defects(ask: Ask, item_id: str) -> list[str]:
    defects = []
    if ask.item_id != item_id:
        defects.append(f"it is about item {ask.item_id!r}, not {item_id!r}")
    if not isinstance(ask.question, str) or not ask.question.strip():
        defects.append("its question is empty")
    return defects


def _option_defects(options: object) -> list[str]:
    if not isinstance(options, tuple):
        return [f"its options must be a tuple of AskOption, got {options!r}"]
    starred, labels = 0, set()
    for option in options:
        if not isinstance(option, AskOption):
            return [f"its options must be AskOption values, got {option!r}"]
        starred += option.recommended is True
        labels.add(option.label.strip() if isinstance(option.label, str) else "")
    defects = []
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        defects.append(f"it offers {len(options)} options; offer {MIN_OPTIONS} to {MAX_OPTIONS}")
    if starred != 1:
        defects.append(f"it stars {starred} recommendations; star exactly one")
    if "" in labels:
        defects.append("an option has an empty label")
    elif len(labels) != len(options):
        defects.append(f"its option labels repeat: {[option.label for option in options]}")
    return defects


def _is_unit(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and 0.0 <= value <= 1.0

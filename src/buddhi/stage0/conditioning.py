"""Stage 0 conditioning: map raw input to the typed items the loop consumes, once.

The kernel's fill is a 1:1 identity pass-through: each raw input becomes one item
with its fields unchanged and its payload the very same object. A pack-supplied
trigger-detection hook may flag an item; its flag is recorded in ``Item.trigger``
and the payload is left untouched. Without a hook nothing is flagged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from buddhi._items import Attempt, Item
from buddhi._seams import TriggerHook
from buddhi.errors import ConditioningError, ItemError

__all__ = ["RawInput", "condition"]

RawInput = Item | Mapping[str, object]
"""What Stage 0 accepts: an item (passed through) or a mapping of its fields.

A mapping needs ``id`` and ``source``; it may give ``payload``, ``confidence`` and
``history`` (attempts, or mappings with ``score`` and ``transient``).
"""

_REQUIRED = ("id", "source")
_OPTIONAL = ("payload", "confidence", "history")


def condition(raw: Iterable[RawInput], hook: TriggerHook | None = None) -> tuple[Item, ...]:
    """Type a batch of raw input, one item per input, in order.

    The whole batch is typed before anything is returned, so a bad input yields an
    error and no items at all.

    Args:
        raw: The raw inputs.
        hook: Trigger detection, e.g. ``pack.detect_trigger``; by default a no-op.

    Returns:
        The typed items.

    Raises:
        ConditioningError: An input cannot be typed, its id repeats, or the hook
            returned something other than a str or None; the message names the input.
    """
    items = tuple(_type_one(index, entry) for index, entry in enumerate(raw))
    _reject_duplicates(items)
    if hook is None:
        return items
    return tuple(_flag(index, item, hook) for index, item in enumerate(items))


def _type_one(index: int, entry: object) -> Item:
    if isinstance(entry, Item):
        return entry
    if not isinstance(entry, Mapping):
        raise ConditioningError(
            f"raw input #{index} is a {type(entry).__name__}; give a buddhi.Item or a mapping "
            f"with keys {list(_REQUIRED)} (and optionally {list(_OPTIONAL)})",
            index=index,
        )
    _check_keys(index, entry)
    try:
        return Item(
            entry["id"],
            entry["source"],
            entry.get("payload"),
            entry.get("confidence", 0.0),
            _history(entry.get("history", ())),
        )
    except ItemError as exc:
        raise ConditioningError(f"raw input #{index} cannot be typed: {exc}", index=index) from exc


def _check_keys(index: int, entry: Mapping[object, object]) -> None:
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise ConditioningError(f"raw input #{index} lacks {missing}; add them", index=index)
    unknown = sorted(str(key) for key in entry if key not in _REQUIRED + _OPTIONAL)
    if unknown:
        raise ConditioningError(
            f"raw input #{index} has unknown keys {unknown}; put domain data under 'payload'",
            index=index,
        )


def _history(raw: object) -> tuple[Attempt, ...]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise ItemError(f"history must be a sequence of attempts, got {raw!r}")
    return tuple(_attempt(entry) for entry in raw)


def _attempt(entry: object) -> Attempt:
    if isinstance(entry, Attempt):
        return entry
    if isinstance(entry, Mapping) and set(entry) <= {"score", "transient"}:
        transient = entry.get("transient", False)
        if not isinstance(transient, bool):
            raise ItemError(f"an attempt's 'transient' must be a bool, got {transient!r}")
        return Attempt(entry.get("score"), transient)
    raise ItemError(f"an attempt is an Attempt or a mapping of score/transient, got {entry!r}")


def _reject_duplicates(items: tuple[Item, ...]) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.id in seen:
            raise ConditioningError(
                f"raw input #{index} repeats id {item.id!r} of raw input #{seen[item.id]}; "
                "item ids must be unique in one pass",
                index=index,
            )
        seen[item.id] = index


def _flag(index: int, item: Item, hook: TriggerHook) -> Item:
    flag = hook(item)
    if flag is None:
        return item
    if not isinstance(flag, str) or not flag:
        raise ConditioningError(
            f"the trigger hook returned {flag!r} for raw input #{index}; return a non-empty "
            "str to flag the item or None to leave it",
            index=index,
        )
    return replace(item, trigger=flag)

"""Copies of what the projection holds, as the seed's values: entries, resolutions, history."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from blackboard import Record
from blackboard.frozen import builder
from pybb._engine.projection import GENERATION_MARK, KINDS, EntryState, View, base_key
from pybb._engine.types import BlackboardEntry, HistoryEvent, Resolution, Segment
from pybb._engine.values import copy_value

__all__ = ["SegmentView", "history", "resolution", "snapshot"]


class SegmentView(Mapping[str, BlackboardEntry]):
    """The entries of one segment, read lazily (each value a fresh copy)."""

    def __init__(self, view: View, segment: Segment, get: Any) -> None:
        self._view = view
        self._segment = segment
        self._get = get

    def __getitem__(self, key: str) -> BlackboardEntry:
        if key not in self._view.segments[self._segment]:
            raise KeyError(key)
        entry: BlackboardEntry = self._get(key)
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._view.segments[self._segment]))

    def __len__(self) -> int:
        return len(self._view.segments[self._segment])

    def __contains__(self, key: object) -> bool:
        return key in self._view.segments[self._segment]


def history(records: Iterable[Record], key: str | None) -> list[HistoryEvent]:
    """Pybb's records among ``records`` (about entry ``key``, if given) as history events."""
    events: list[HistoryEvent] = []
    for record in records:
        kind = KINDS.get(record.region or "")
        if kind is None:
            continue
        content = record.content
        named = content.get("key") if isinstance(content, dict) else None
        entry_key = base_key(named) if isinstance(named, str) else named
        if key is not None and entry_key != key:
            continue
        data = copy_value(content) if isinstance(content, dict) else {"value": content}
        if isinstance(named, str) and entry_key != named:  # a reopened entry's generation
            data["key"] = entry_key
            data["generation"] = int(named.rpartition(GENERATION_MARK)[2])
        event = HistoryEvent(record.sequence, kind, entry_key, record.writer, data, record.at)
        events.append(event)
    return events


# Every attempt reads its entry at least once: a BlackboardEntry built as a plain object
# (``frozen``; a test holds it equal to the constructor's, field by field).
_entry = builder(BlackboardEntry)
_SCALARS = frozenset({int, str, bool, type(None)})  # copy_value returns these as they are


def snapshot(state: EntryState, measurement: Any) -> BlackboardEntry:
    """A copy of the entry as the seed's ``BlackboardEntry``, with ``measurement``."""
    scalars = _SCALARS
    result = state.result
    original = state.original
    conditions = state.conditions
    history = state.ks_history
    # ``dict.copy`` takes a quarter of ``dict(...)``'s time; the shared empty history is
    # a mapping proxy, which ``dict(...)`` walks key by key: an empty dict is the same copy.
    copied_history = history.copy() if type(history) is dict else dict(history) if history else {}
    return _entry(
        state.predicate,
        None if conditions is None else conditions.copy(),
        measurement if type(measurement) in scalars else copy_value(measurement),
        result if type(result) in scalars else copy_value(result),
        state.good_standing,
        original if type(original) in scalars else copy_value(original),
        copied_history,
        state.segment,
        state.stage,
        state.source,
        state.chain_name,
        len(state.generations) + 1,
    )


def resolution(stored: Mapping[str, Any]) -> Resolution:
    """The stored resolution record as a ``Resolution``."""
    return Resolution(
        base_key(stored["key"]),
        stored["decision"],
        stored["by"],
        datetime.fromisoformat(stored["at"]),
        copy_value(stored.get("measurement")),
        stored.get("sequence", 0),
    )

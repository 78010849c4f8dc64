"""An incremental index of the human loop on a board: every record is parsed once.

The board's log is append-only and gap-free, so an index that remembers the last
sequence it read only ever needs the records after it. One index is kept per reader
(weakly), so the admission rule and the inbox share it; asking where an ask stands
costs the records that arrived since the last question, not the whole board.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blackboard import BoardReader, RecordKind
from pybb.human._errors import MalformedContentError
from pybb.human._protocol import ANSWERS, ASK_CLOSURES, ASKS, Answer, Ask, Closure

__all__ = ["Snapshot", "lookup", "snapshot"]

_log = logging.getLogger("pybb.human")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The first ask, answer and closure per ask id, each with its sequence number."""

    asks: dict[str, tuple[int, Ask]]
    answers: dict[str, tuple[int, Answer]]
    closures: dict[str, tuple[int, Closure]]


@dataclass
class _Index:
    cursor: int = 0
    asks: dict[str, tuple[int, Ask]] = field(default_factory=dict)
    answers: dict[str, tuple[int, Answer]] = field(default_factory=dict)
    closures: dict[str, tuple[int, Closure]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def catch_up(self, reader: BoardReader) -> None:
        for record in reader.log(self.cursor):
            self.cursor = record.sequence
            if record.kind is RecordKind.LEVEL and record.region in _PARSERS:
                self._add(record.region, record.sequence, record.content)

    def _add(self, level: str, sequence: int, content: Any) -> None:
        try:
            value = _PARSERS[level](content)
        except MalformedContentError as exc:
            _log.debug("skipping malformed %s row at %d: %s", level, sequence, exc)
            return
        if isinstance(value, Ask):
            self.asks.setdefault(value.ask_id, (sequence, value))
        elif isinstance(value, Answer):
            self.answers.setdefault(value.ask_id, (sequence, value))
        else:
            self.closures.setdefault(value.ask_id, (sequence, value))


_PARSERS: dict[str, Callable[[Any], Ask | Answer | Closure]] = {
    ASKS: Ask.from_json,
    ANSWERS: Answer.from_json,
    ASK_CLOSURES: Closure.from_json,
}
_INDEXES: weakref.WeakKeyDictionary[BoardReader, _Index] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def _index(reader: BoardReader) -> _Index:
    with _GUARD:
        index = _INDEXES.get(reader)
        if index is None:
            index = _INDEXES[reader] = _Index()
    return index


def snapshot(reader: BoardReader) -> Snapshot:
    """Everything the human loop holds on the board, as of now."""
    index = _index(reader)
    with index.lock:
        index.catch_up(reader)
        return Snapshot(dict(index.asks), dict(index.answers), dict(index.closures))


def lookup(
    reader: BoardReader, ask_id: str
) -> tuple[tuple[int, Ask] | None, tuple[int, Answer] | None, tuple[int, Closure] | None]:
    """The ask, answer and closure of one ask id, as of now."""
    index = _index(reader)
    with index.lock:
        index.catch_up(reader)
        return index.asks.get(ask_id), index.answers.get(ask_id), index.closures.get(ask_id)

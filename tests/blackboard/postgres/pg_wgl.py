"""A linearizability checker for premise histories (Wing & Gong, with Lowe's memo).

A premise is a versioned register: state ``(value, version)``, read whole, written by a
compare-and-set that names the version it replaces. A history is Jepsen's: each op has
an invocation time and, unless its outcome is unknown (``info``), a completion time and
a result. The checker searches for a total order of the ops that respects real time
(an op that completed before another was invoked comes first) and in which every op's
result is what the register would have answered. ``info`` ops have no completion: one
may take effect at any moment after its invocation, or never.

Histories are checked per premise (P-compositionality), each with a depth-first search
over "which pending op takes effect next", memoising ``(ops taken, state)`` so that no
configuration is explored twice.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

State = tuple[str, int]  # (canonical JSON of the value, version)


@dataclass(frozen=True)
class Op:
    """One client operation on one premise.

    Attributes:
        process: Who issued it (ops of one process never overlap).
        f: ``"read"`` or ``"cas"``.
        key: The premise.
        status: ``"ok"``, ``"fail"`` (a CAS that reported a conflict) or ``"info"``.
        invoke: When it was invoked.
        complete: When it completed (``None`` for ``info``).
        expected: A CAS's expected version.
        value: A CAS's new value.
        result: A read's ``[value, version]``; an ok CAS's new version; a failed CAS's
            current version as the conflict reported it.
    """

    process: Any
    f: str
    key: str
    status: str
    invoke: float
    complete: float | None = None
    expected: int | None = None
    value: Any = None
    result: Any = None


@dataclass(frozen=True)
class Verdict:
    """Whether every premise's history is linearizable; if not, which and why."""

    ok: bool
    key: str | None = None
    detail: str = ""
    ops: int = 0


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def step(state: State, op: Op) -> State | None:
    """The state after ``op`` takes effect in ``state``, or ``None`` if it could not have."""
    _, version = state
    if op.f == "read":
        read_value, read_version = op.result
        return state if (_canon(read_value), read_version) == state else None
    if op.status == "fail":
        return state if version != op.expected and version == op.result else None
    if version != op.expected:
        return None
    if op.status == "ok" and op.result != version + 1:
        return None
    return (_canon(op.value), version + 1)


class _Entry:
    __slots__ = ("index", "is_call", "match", "next", "op", "prev")

    def __init__(self, op: Op | None, index: int, is_call: bool) -> None:
        self.op = op
        self.index = index
        self.is_call = is_call
        self.match: _Entry | None = None
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _entries(ops: Sequence[Op]) -> tuple[_Entry, int]:
    """The history as a linked list of call and return entries, in time order."""
    events: list[tuple[float, int, _Entry]] = []
    returns = 0
    for index, op in enumerate(ops):
        call = _Entry(op, index, True)
        events.append((op.invoke, 0, call))
        if op.status != "info":
            assert op.complete is not None
            ret = _Entry(op, index, False)
            call.match = ret
            events.append((op.complete, 1, ret))  # at equal times, calls come first
            returns += 1
    events.sort(key=lambda e: (e[0], e[1]))
    head = _Entry(None, -1, False)
    previous = head
    for _, _, entry in events:
        previous.next, entry.prev = entry, previous
        previous = entry
    return head, returns


def _lift(entry: _Entry) -> None:
    for node in (entry, entry.match):
        if node is not None:
            assert node.prev is not None
            node.prev.next = node.next
            if node.next is not None:
                node.next.prev = node.prev


def _unlift(entry: _Entry) -> None:
    for node in (entry.match, entry):
        if node is not None:
            assert node.prev is not None
            node.prev.next = node
            if node.next is not None:
                node.next.prev = node


def linearizable(ops: Sequence[Op], initial: State) -> bool:
    """Whether one premise's history has a linearization from ``initial``."""
    head, remaining = _entries([op for op in ops if not (op.f == "read" and op.status != "ok")])
    state, taken = initial, 0
    stack: list[tuple[_Entry, State, int]] = []
    seen: set[tuple[int, State]] = set()
    entry = head.next
    while remaining:
        if entry is None or not entry.is_call:
            # A completed op whose turn has passed was not taken: undo the last choice.
            if not stack:
                return False
            entry, state, taken = stack.pop()
            _unlift(entry)
            remaining += entry.match is not None
            entry = entry.next
            continue
        assert entry.op is not None
        after = step(state, entry.op)
        if after is not None and (taken | 1 << entry.index, after) not in seen:
            seen.add((taken | 1 << entry.index, after))
            stack.append((entry, state, taken))
            state, taken = after, taken | 1 << entry.index
            _lift(entry)
            remaining -= entry.match is not None
            entry = head.next
        else:
            entry = entry.next
    return True


def check(ops: Iterable[Op], initial: dict[str, State]) -> Verdict:
    """Check every premise's history; the first that is not linearizable is reported."""
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    total = 0
    for key, history in sorted(by_key.items()):
        total += len(history)
        if not linearizable(history, initial[key]):
            return Verdict(False, key, f"no linearization of {len(history)} ops on {key!r}")
    return Verdict(True, ops=total)


def read_histories(paths: Iterable[Path]) -> list[Op]:
    """Ops from history files of ``invoke`` / ``ok`` / ``fail`` / ``info`` lines.

    An invoke with no completion (its process was SIGKILLed) becomes an ``info`` op.
    """
    ops: list[Op] = []
    for path in paths:
        pending: dict[tuple[Any, int], dict[str, Any]] = {}
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a line torn by the kill
                continue
            ident = (event["p"], event["n"])
            if event["type"] == "invoke":
                pending[ident] = event
                continue
            call = pending.pop(ident)
            ops.append(_op(call, event))
        ops += [_op(call, None) for call in pending.values()]
    return ops


def _op(call: dict[str, Any], end: dict[str, Any] | None) -> Op:
    status = "info" if end is None else end["type"]
    return Op(
        process=call["p"],
        f=call["f"],
        key=call["key"],
        status=status,
        invoke=call["t"],
        complete=None if end is None or status == "info" else end["t"],
        expected=call.get("expected"),
        value=call.get("value"),
        result=None if end is None else end.get("result"),
    )

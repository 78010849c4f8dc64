"""Checking what a caller gives a blackboard: keys, entries, components, resolutions.

Each check raises the pybb error that names the offending value (nothing is written);
each builder returns the JSON content of the record to write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from blackboard import Region
from pybb._engine.projection import GENERATION_MARK, SEGMENT_BY_VALUE, EntryState, record_key
from pybb._engine.types import BlackboardEntry, Segment, Stage
from pybb._engine.values import NotJSONError, copy_value, describe
from pybb.errors import (
    ComponentError,
    EntryError,
    EntryExistsError,
    PybbError,
    ReopenError,
    ResolutionError,
)

__all__ = [
    "MAX_KEY",
    "check_component",
    "check_conditions",
    "check_key",
    "copy_json",
    "entry_content",
    "reopen_content",
    "resolution_content",
    "same_entry",
]

_SCALARS = frozenset({int, str, bool, type(None)})
# ``Segment.value`` is the enum machinery's property: read once, not per entry written.
_SEGMENT_TEXT = {segment: segment.value for segment in Segment}

MAX_KEY = 128
"""The longest entry key (idempotency keys built from it must fit the kernel's limit)."""


def check_key(key: object) -> None:
    """Refuse an entry key the board cannot use."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise EntryError(
            None,
            f"key {key!r} is not usable; use a non-empty string of at most {MAX_KEY} characters",
        )
    if GENERATION_MARK in key:
        raise EntryError(
            None,
            f"key {key!r} holds the character U+001F, which marks a reopened entry's "
            "generation in its records; leave it out of the key",
        )


def entry_content(key: str, entry: object, segment: Segment | str) -> dict[str, Any]:
    check_key(key)
    if not isinstance(entry, BlackboardEntry):
        raise EntryError(key, f"expected a BlackboardEntry, got {describe(entry)}")
    plain = type(segment) is str or type(segment) is Segment
    found = SEGMENT_BY_VALUE.get(segment) if plain else None
    if found is None:
        try:
            found = Segment(segment)
        except ValueError:
            raise EntryError(key, f"segment {segment!r} is not 'certify' or 'escalate'") from None
    measurement = entry.measurement
    if type(measurement) not in _SCALARS:  # which copy_value returns as they are
        measurement = copy_json(key, measurement, "measurement")
    content: dict[str, Any] = {
        "key": key,
        "segment": _SEGMENT_TEXT[found],
        "measurement": measurement,
    }
    if entry.conditions is not None:
        if entry.predicate is not None:
            raise EntryError(
                key,
                "it has both a predicate and conditions; give predicate for a single value "
                "or conditions for a dict of components, not both",
            )
        content["conditions"] = check_conditions(key, entry.conditions, measurement)
    elif entry.predicate is not None:
        if not isinstance(entry.predicate, str) or not entry.predicate:
            raise EntryError(key, f"predicate {entry.predicate!r} must be a non-empty name")
        content["predicate"] = entry.predicate
    else:
        raise EntryError(
            key,
            "it has neither a predicate nor conditions; give predicate='name' (or "
            "conditions={'component': 'name'} for a dict measurement)",
        )
    return content


def check_conditions(key: str, conditions: object, measurement: Any) -> dict[str, str]:
    if not isinstance(conditions, Mapping) or not conditions:
        raise EntryError(
            key,
            f"conditions must be a non-empty mapping of component to predicate name, got "
            f"{describe(conditions)}",
        )
    for component, name in conditions.items():
        if not isinstance(component, str) or not isinstance(name, str) or not name:
            raise EntryError(
                key,
                f"condition {component!r}: {name!r} must map a component name to a predicate name",
            )
    if not isinstance(measurement, dict) or set(measurement) != set(conditions):
        have = sorted(measurement) if isinstance(measurement, dict) else describe(measurement)
        raise EntryError(
            key,
            f"its conditions name components {sorted(conditions)} but its measurement has "
            f"{have}; give the measurement exactly the components the conditions name",
        )
    return dict(conditions)


def check_component(state: EntryState, component: object) -> None:
    if state.conditions is None or not isinstance(state.measurement, dict):
        raise ComponentError(
            state.key,
            component,
            f"it has a single measurement, not components; there is no "
            f"component {component!r} to write (write the whole measurement instead)",
        )
    if component not in state.conditions:
        raise ComponentError(
            state.key,
            component,
            f"it has no component {component!r}; its components are {sorted(state.conditions)}",
        )


def copy_json(key: str, value: Any, what: str) -> Any:
    try:
        return copy_value(value)
    except NotJSONError as exc:
        raise EntryError(key, f"its {what} {exc}") from None


def same_entry(state: EntryState, content: Mapping[str, Any]) -> bool:
    return (
        state.predicate == content.get("predicate")
        and (state.generations[0]["conditions"] if state.generations else state.conditions)
        == content.get("conditions")
        and state.first == content["measurement"]
        and state.origin is Segment(content["segment"])
    )


def resolution_content(
    state: EntryState, decision: object, by: object, at: object, measurement: Any
) -> dict[str, Any]:
    key = state.key
    for name, value in (("decision", decision), ("by", by)):
        if not isinstance(value, str) or not value:
            raise ResolutionError(key, f"{name} must be a non-empty string, got {value!r}")
    when = datetime.now(UTC) if at is None else at
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise ResolutionError(
            key, f"at must be a timezone-aware datetime, got {at!r}; e.g. datetime.now(UTC)"
        )
    content: dict[str, Any] = {
        "key": state.record_key,
        "decision": decision,
        "by": by,
        "at": when.isoformat(),
    }
    if measurement is not None:
        try:
            copied = copy_value(measurement)
        except NotJSONError as exc:
            raise ResolutionError(key, f"the new measurement {exc}") from None
        if state.conditions is not None:
            try:
                check_conditions(key, state.conditions, copied)
            except EntryError as exc:
                raise ResolutionError(key, exc.problem) from None
        content["measurement"] = copied
    return content


_SETTLED = frozenset({Stage.GOOD, Stage.ESCALATED, Stage.RESOLVED})
MAX_NOTE = 2_000


def reopen_content(
    state: EntryState,
    measurement: Any,
    by: object,
    at: object,
    note: object,
    once: str,
    conditions: object = None,
) -> dict[str, Any]:
    """The record of the entry's next generation: the fresh measurement, who, when, why.

    Raises:
        ReopenError: The entry is still being worked on, or a field is unusable.
    """
    key = state.key
    if state.stage not in _SETTLED:
        raise ReopenError(
            key,
            f"it is still being worked on (its stage is {state.stage.value!r}); reopen an "
            "entry once it is settled (good, escalated or resolved)",
        )
    if not isinstance(by, str) or not by:
        raise ReopenError(key, f"by must be a non-empty string, got {by!r}")
    when = datetime.now(UTC) if at is None else at
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise ReopenError(
            key, f"at must be a timezone-aware datetime, got {at!r}; e.g. datetime.now(UTC)"
        )
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise ReopenError(key, f"note must be a string of at most {MAX_NOTE} characters")
    if measurement is None:
        raise ReopenError(key, "it needs the fresh measurement to run its route on")
    if conditions is not None and state.conditions is None:
        raise ReopenError(
            key, "it judges a single measurement with a predicate; it takes no conditions"
        )
    try:
        copied = copy_value(measurement)
        if state.conditions is not None:
            judged = state.conditions if conditions is None else conditions
            fresh_conditions = check_conditions(key, judged, copied)
    except NotJSONError as exc:
        raise ReopenError(key, f"the fresh measurement {exc}") from None
    except EntryError as exc:
        raise ReopenError(key, exc.problem) from None
    generation = state.generation + 1
    content: dict[str, Any] = {
        "key": record_key(key, generation),
        "segment": Segment.CERTIFY.value,
        "measurement": copied,
        "generation": generation,
        "by": by,
        "at": when.isoformat(),
        "after": {"stage": state.stage.value, "escalation": state.escalation_seq or None},
        "once": once,
    }
    if state.conditions is not None:
        content["conditions"] = fresh_conditions
    else:
        content["predicate"] = state.predicate
    if note:
        content["note"] = note
    return content


def check_board_options(regions: Iterable[Region], writer: object) -> list[Region]:
    """The application's regions, once they and the writer name are usable.

    Raises:
        PybbError: A region takes pybb's prefix, or the writer name is unusable.
    """
    extra = list(regions)
    for region in extra:
        if getattr(region, "name", "").startswith("pybb."):
            raise PybbError(
                f"region {region.name!r} uses the prefix 'pybb.', which is pybb's own; rename it"
            )
    if not isinstance(writer, str) or not writer or writer.startswith(("@", "ks:")):
        raise PybbError(
            f"writer {writer!r} is not usable; give a non-empty name not starting with "
            "'@' (the board's) or 'ks:' (knowledge sources')"
        )
    return extra


def is_written(existing: EntryState | None, content: Mapping[str, Any]) -> bool:
    """Whether the entry ``content`` describes is already on the board (write it again: no-op).

    Raises:
        EntryExistsError: The key already holds a different entry.
    """
    if existing is None:
        return False
    if same_entry(existing, content):
        return True
    raise EntryExistsError(
        existing.key, "the key already holds a different entry; use a new key for a new entry"
    )

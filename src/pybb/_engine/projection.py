"""The in-memory projection of a pybb board: every entry's state, folded from its records.

The projection changes only by :meth:`Projection.apply`, record by record. The live
path applies each record as the controller decides it (before the cycle commits); a
resumed run folds the board's log through the same method. So the two cannot drift:
the partitions, their order and every counter come out the same either way, which is
what makes a resumed run write exactly what an undisturbed run would have written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol

from blackboard import Level, Premise, Region
from pybb._engine.types import AttemptStatus, Chain, Segment, Stage

__all__ = [
    "ATTEMPTS",
    "CHANGES",
    "CYCLE",
    "DISPATCHES",
    "ENTRIES",
    "ESCALATIONS",
    "GENERATION_MARK",
    "HANDOFFS",
    "KINDS",
    "REGIONS",
    "RESOLUTIONS",
    "RESTORES",
    "VERDICTS",
    "EntryState",
    "Projection",
    "View",
    "base_key",
    "record_key",
]

ENTRIES = "pybb.entries"
VERDICTS = "pybb.verdicts"
DISPATCHES = "pybb.dispatches"
ATTEMPTS = "pybb.attempts"
HANDOFFS = "pybb.handoffs"
RESTORES = "pybb.restores"
CHANGES = "pybb.changes"
ESCALATIONS = "pybb.escalations"
RESOLUTIONS = "pybb.resolutions"
CYCLE = "pybb.cycle"

REGIONS: tuple[Region, ...] = (
    Level(ENTRIES, unique="key"),
    Level(VERDICTS),
    Level(DISPATCHES, unique="key"),
    Level(ATTEMPTS),
    Level(HANDOFFS),
    Level(RESTORES),
    Level(CHANGES),
    Level(ESCALATIONS, unique="key"),
    Level(RESOLUTIONS, unique="key"),
    Premise(CYCLE),
)
"""The board's regions. Entries, dispatches, escalations and resolutions are unique per
key, so the kernel itself refuses a second one for an entry, whoever writes it."""

KINDS = {
    ENTRIES: "entry",
    VERDICTS: "verdict",
    DISPATCHES: "dispatch",
    ATTEMPTS: "attempt",
    HANDOFFS: "handoff",
    RESTORES: "restore",
    CHANGES: "change",
    ESCALATIONS: "escalation",
    RESOLUTIONS: "resolution",
    CYCLE: "cycle",
}
"""Each region's name in ``HistoryEvent.kind``."""

GENERATION_MARK = "\x1f"
"""Joins an entry's key and its generation in the records of a reopened entry.

Generation 1 (the entry as first written) keeps the plain key, so boards written before
reopening existed read as they did; generation ``n`` > 1 writes ``<key>`` U+001F ``<n>``, which
the unique levels and the idempotency keys then tell apart from the generations before
it (``docs/adr/0019``). Entry keys may not hold the mark."""


def record_key(key: str, generation: int) -> str:
    """The key the records of ``generation`` of entry ``key`` carry."""
    return key if generation == 1 else f"{key}{GENERATION_MARK}{generation}"


def base_key(key: str) -> str:
    """The entry a record key names (the key itself for a first generation)."""
    cut = key.rfind(GENERATION_MARK)
    return key if cut < 0 else key[:cut]


def _split(key: str) -> tuple[str, int] | None:
    base, mark, number = key.rpartition(GENERATION_MARK)
    if not mark or not number.isdigit():
        return None
    return base, int(number)


# Stage.X costs about 0.1 µs a look-up (the enum metaclass); these run per record and
# per entry of every cycle.
_NEW, _WORKING = Stage.NEW, Stage.WORKING
_EVALUATED, _GOOD = Stage.EVALUATED, Stage.GOOD
_CERTIFY = Segment.CERTIFY
_ON_PASS = Chain.ON_PASS
# ``AttemptStatus(value)`` goes through the enum metaclass (about 0.5 µs); a dict does not.
_STATUS = {status.value: status for status in AttemptStatus}
_CHAINS = {chain.value: chain for chain in Chain}
SEGMENT_BY_VALUE = {segment.value: segment for segment in Segment}
"""Each ``Segment`` by its value: a dict look-up, where ``Segment(value)`` costs ~0.5 µs."""

# What most entries hold at rest: one shared empty value each, not one per entry (a
# settled entry of W1 weighed about 1 KiB, of which 64-200 bytes were empty containers
# and a copy of its route's chain). The shared ones are never mutated: the projection
# replaces them on an entry's first attempt (``ks_history``, ``attempts``).
_NO_SCOPES: Mapping[str, str] = MappingProxyType({})
_NO_HISTORY: Mapping[str, int] = MappingProxyType({})
_NO_ATTEMPTS: tuple[Mapping[str, Any], ...] = ()


class EntryState:
    """One entry's current state. Mutated only by :class:`Projection`."""

    __slots__ = (
        "attempts",
        "chain",
        "chain_name",
        "conditions",
        "escalation",
        "escalation_seq",
        "generations",
        "good_standing",
        "judgement_error",
        "key",
        "ks_history",
        "measurement",
        "origin",
        "original",
        "original_result",
        "position",
        "predicate",
        "provisional",
        "record_key",
        "resolution",
        "result",
        "retry_at",
        "scopes",
        "segment",
        "source",
        "stage",
    )

    def __init__(self, content: Mapping[str, Any]) -> None:
        self.key: str = content["key"]
        predicate = content.get("predicate")
        # Interned: a board read back from its store decodes a fresh copy per record.
        self.predicate: str | None = None if predicate is None else sys.intern(predicate)
        self.conditions: dict[str, str] | None = content.get("conditions")
        self.measurement: Any = content["measurement"]
        self.original: Any = content["measurement"]
        self.result: bool | dict[str, bool] | None = None
        self.original_result: bool | dict[str, bool] | None = None
        self.good_standing = False
        self.judgement_error: str | None = None  # what the last verdict's predicate raised
        segment = content["segment"]
        self.segment = (
            SEGMENT_BY_VALUE[segment]
            if type(segment) is str and segment in SEGMENT_BY_VALUE
            else Segment(segment)
        )
        self.origin = self.segment
        self.stage = _NEW if self.segment is _CERTIFY else Stage.ESCALATED
        # The source whose partition holds the entry, if it is being worked on: kept by
        # the projection whenever the stage or the place on the chain changes (it is
        # asked a dozen times per entry and cycle).
        self.source: str | None = None
        self.chain_name: Chain | None = None
        self.chain: tuple[str, ...] = ()
        self.scopes: Mapping[str, str] = _NO_SCOPES
        self.position = 0
        self.provisional = False
        self.ks_history: Mapping[str, int] = _NO_HISTORY
        # This generation's attempt records (their content) since it was last settled.
        self.attempts: Sequence[Mapping[str, Any]] = _NO_ATTEMPTS
        self.retry_at: datetime | None = None
        # The escalation record's content while it is not committed; once it has a
        # sequence the board holds it and ``Blackboard.get_escalation`` reads it back.
        self.escalation: Mapping[str, Any] | None = None
        self.escalation_seq = 0
        self.resolution: Mapping[str, Any] | None = None
        # The generations before this one, as they ended, each with the record that opened
        # the next (one slot, a tuple: the empty one is shared, so a board of a million
        # entries that never reopen pays a pointer each).
        self.generations: tuple[Mapping[str, Any], ...] = ()
        # The key this generation's records carry (see :func:`record_key`): the key itself
        # until a reopening; kept, not derived, as every record the controller writes names it.
        self.record_key: str = self.key

    @property
    def generation(self) -> int:
        """1 as first written, one more at each reopening."""
        return len(self.generations) + 1

    @property
    def reopening(self) -> Mapping[str, Any] | None:
        """The record that opened this generation (``None`` for the first)."""
        return self.generations[-1]["next"] if self.generations else None

    @property
    def first(self) -> Any:
        """The measurement as first written (before any reopening)."""
        return self.generations[0]["original"] if self.generations else self.original

    def component_passes(self, component: str) -> bool:
        """Whether ``component`` meets its condition and the entry is not provisional."""
        result = self.result
        return not self.provisional and isinstance(result, dict) and bool(result.get(component))


_OPEN_STAGES = frozenset({Stage.NEW, Stage.EVALUATED, Stage.WORKING})


class View(Protocol):
    """The projection as its readers see it: the journal alone changes it.

    Each queue is a mapping used as an ordered set (keys in the order they joined it).
    """

    @property
    def entries(self) -> Mapping[str, EntryState]:
        """Every entry's state, by key."""
        ...

    @property
    def unsettled(self) -> Mapping[str, None]:
        """Entries a controller still has to work on."""
        ...

    @property
    def segments(self) -> Mapping[Segment, Mapping[str, None]]:
        """The keys of each segment."""
        ...

    @property
    def stages(self) -> Mapping[Stage, int]:
        """How many entries stand at each stage."""
        ...

    @property
    def dirty(self) -> Mapping[str, None]:
        """Entries whose measurement changed since their last verdict."""
        ...

    @property
    def undispatched(self) -> Mapping[str, None]:
        """Entries judged but not yet dispatched onto a chain."""
        ...

    @property
    def partitions(self) -> Mapping[str, Mapping[str, None]]:
        """Each source's partition: the keys placed on it."""
        ...

    @property
    def ready(self) -> Mapping[str, None]:
        """Entries whose component source fixed its component (success handoff due)."""
        ...

    @property
    def waiting(self) -> Mapping[str, None]:
        """Entries waiting for a retry."""
        ...

    @property
    def unescalated(self) -> Mapping[str, None]:
        """Entries written to the escalate segment that have no escalation record yet."""
        ...

    @property
    def cycle(self) -> int:
        """The board's cycle count."""
        ...

    @property
    def head(self) -> int:
        """The sequence number of the last record folded."""
        ...

    def open_work(self, key: str) -> bool:
        """Whether the entry still needs a controller."""
        ...

    def needs_work(self, key: str, component: str | None) -> bool:
        """Whether a source (scoped to ``component``) has something to do on ``key``."""
        ...


class Projection:
    """Every entry's state and the work queues, folded from the board's records.

    ``unsettled`` holds the entries a controller still has to work on (new, evaluated or
    working; with ``dirty``, also resolved ones whose new measurement awaits a verdict):
    what ``pybb worker`` claims from.
    """

    def __init__(self) -> None:
        self.entries: dict[str, EntryState] = {}
        self.unsettled: dict[str, None] = {}
        self.segments: dict[Segment, dict[str, None]] = {s: {} for s in Segment}
        self.stages: dict[Stage, int] = dict.fromkeys(Stage, 0)
        self.dirty: dict[str, None] = {}
        self.undispatched: dict[str, None] = {}
        self.partitions: dict[str, dict[str, None]] = {}
        self.ready: dict[str, None] = {}
        self.waiting: dict[str, None] = {}
        self.unescalated: dict[str, None] = {}
        self.cycle = 0
        self.cycle_version = 1
        self.head = 0
        # Committed attempts read from the board since its last cycle record: what a
        # cycle cut short after committing part of its work had done (docs/adr/0020).
        self.interrupted: dict[str, str] = {}
        self.interrupted_source: str | None = None
        # Every entry of a route has the same chain and scopes: one copy each.
        self._chains: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._scopes: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
        self._appliers: dict[str, Callable[[EntryState, Mapping[str, Any], int], None]] = {
            VERDICTS: self._verdict,
            DISPATCHES: self._dispatch,
            ATTEMPTS: self._attempt,
            HANDOFFS: self._handoff,
            RESTORES: self._restore,
            CHANGES: self._change,
            ESCALATIONS: self._escalation,
            RESOLUTIONS: self._resolution,
        }

    # -- applying records ------------------------------------------------------------

    def apply(self, region: str, content: Any, sequence: int = 0, version: int = 0) -> None:
        """Fold one record into the state (``sequence`` is 0 until the record is committed)."""
        if region == CYCLE:
            self.cycle = int(content)
            self.cycle_version = version or self.cycle_version + 1
            if self.interrupted_source is not None:
                self.interrupted = {}
                self.interrupted_source = None
            return
        if region == ENTRIES:
            if "generation" in content:
                self._reopen(content, sequence)
            else:
                self._entry(content)
            return
        applier = self._appliers.get(region)
        key = content.get("key") if isinstance(content, dict) else None
        entry = self.entries.get(key) if isinstance(key, str) else None
        if entry is None:
            entry = self._later_generation(key) if isinstance(key, str) else None
        elif entry.generations:
            entry = None  # a record of its first generation, come after it was reopened
        if applier is not None and entry is not None:
            applier(entry, content, sequence)

    def _later_generation(self, key: str) -> EntryState | None:
        """The entry a record key ``<key>`` U+001F ``<n>`` names, if ``n`` is its generation now."""
        split = _split(key) if GENERATION_MARK in key else None
        if split is None:
            return None
        entry = self.entries.get(split[0])
        return entry if entry is not None and entry.generation == split[1] else None

    def _reopen(self, content: Mapping[str, Any], sequence: int) -> None:
        """Open the next generation of an entry: a fresh measurement, its chain to run again."""
        split = _split(content["key"])
        entry = None if split is None else self.entries.get(split[0])
        if entry is None or split is None or split[1] != entry.generation + 1:
            return  # not the next generation of an entry on the board: nothing to open
        self._leave(entry)
        ended = {
            "generation": entry.generation,
            "original": entry.original,
            "conditions": entry.conditions,
            "escalation": entry.escalation,
            "escalation_seq": entry.escalation_seq,
            "resolution": entry.resolution,
            "stage": entry.stage.value,
            "next": {**content, "sequence": sequence},
        }
        entry.generations = (*entry.generations, ended)
        entry.record_key = record_key(entry.key, entry.generation)
        entry.measurement = entry.original = content["measurement"]
        if "conditions" in content:  # the fresh measurement may have other components
            entry.conditions = content["conditions"]
        entry.result = entry.original_result = None
        entry.good_standing = entry.provisional = False
        entry.judgement_error = None
        entry.chain_name, entry.chain, entry.scopes, entry.position = None, (), _NO_SCOPES, 0
        entry.ks_history = _NO_HISTORY
        entry.attempts = _NO_ATTEMPTS
        entry.escalation, entry.escalation_seq, entry.resolution = None, 0, None
        self.unescalated.pop(entry.key, None)
        self.undispatched.pop(entry.key, None)
        self._move(entry, Segment.CERTIFY)
        self._stage(entry, Stage.NEW)
        self.dirty[entry.key] = None

    def _entry(self, content: Mapping[str, Any]) -> None:
        entry = EntryState(content)
        self.entries[entry.key] = entry
        self.segments[entry.segment][entry.key] = None
        self.stages[entry.stage] += 1
        if entry.stage in _OPEN_STAGES:
            self.dirty[entry.key] = None
            self.unsettled[entry.key] = None
        else:
            # Written straight to the escalate segment: never judged, but it still owes
            # an escalation record (and its observers a word), which a controller writes.
            self.unescalated[entry.key] = None
            self.unsettled[entry.key] = None

    def _verdict(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        self._judged(entry, content)
        if entry.stage is _NEW:
            self._stage(entry, _EVALUATED)
            self.undispatched[entry.key] = None
        elif entry.stage is _WORKING:
            self._settle(entry)

    def _judged(self, entry: EntryState, content: Mapping[str, Any]) -> None:
        """Take in a verdict's result; the caller moves the entry's stage on."""
        entry.result = content["result"]
        entry.good_standing = bool(content["good_standing"])
        entry.judgement_error = content.get("error")
        entry.provisional = False
        self.dirty.pop(entry.key, None)
        if entry.original_result is None:
            entry.original_result = entry.result

    def _dispatch(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        if "good_standing" in content:  # the first verdict, carried by its dispatch (ADR 0026)
            if entry.stage is _NEW:
                # Straight onto its chain below, not into the evaluated stage and out again.
                self._judged(entry, content)
            else:
                self._verdict(entry, content, sequence)
        self.undispatched.pop(entry.key, None)
        name = content["chain"]
        entry.chain_name = _CHAINS[name] if type(name) is str and name in _CHAINS else Chain(name)
        chain = tuple(content["sources"])
        entry.chain = self._chains.setdefault(chain, chain)
        scopes = content.get("scopes")
        if scopes:
            shape = tuple(scopes.items())
            entry.scopes = self._scopes.setdefault(shape, MappingProxyType(dict(scopes)))
        else:
            entry.scopes = _NO_SCOPES
        entry.position = 0
        if entry.chain:
            self._stage(entry, _WORKING)
            self._place(entry)
        elif entry.chain_name is _ON_PASS:
            self._stage(entry, _GOOD)
        else:
            self._stage(entry, Stage.WORKING)  # nothing can help: an escalation follows

    def _attempt(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        source = content["source"]
        history = entry.ks_history
        if not isinstance(history, dict):  # the shared empty one
            history = entry.ks_history = {}
        history[sys.intern(source)] = content["attempt"]
        try:
            _STATUS[content["status"]]
        except (KeyError, TypeError):  # not a status: the enum says so, as it always did
            AttemptStatus(content["status"])
        # The record itself, not its summary: most entries settle in good standing and
        # drop theirs unread; an escalation's report reads them (``records.escalation_content``).
        attempts = entry.attempts
        if isinstance(attempts, list):
            attempts.append(content)
        else:  # the shared empty one
            entry.attempts = [content]
        if "writes" in content:
            entry.measurement = apply_writes(entry.measurement, content["writes"])
        if "result" in content:
            entry.result = content["result"]
            entry.good_standing = bool(content["good_standing"])
            entry.judgement_error = content.get("error")
            entry.provisional = False
        when = content.get("retry_at")
        if when is not None or entry.retry_at is not None:
            self._retry_at(entry, when)
        if sequence:  # read from the board, not decided here
            self.interrupted[entry.key] = source
            self.interrupted_source = source
        if entry.stage is _WORKING and entry.source == source:
            self._settle(entry)

    def _handoff(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        restored = content.get("restore")
        if restored:  # a failure handoff's restore, carried by it (ADR 0026)
            self._restore(entry, restored, sequence)
        self._leave(entry)
        entry.position += 1
        _point(entry)
        self._place(entry)

    def _restore(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        component = content.get("component")
        if component is None:
            entry.measurement = content["value"]
            entry.result = entry.original_result
        else:
            entry.measurement = {**entry.measurement, component: content["value"]}
            if isinstance(entry.result, dict) and isinstance(entry.original_result, dict):
                entry.result = {**entry.result, component: entry.original_result[component]}
        entry.good_standing = _passes(entry.result) and not entry.provisional
        if entry.stage is _GOOD:
            self.dirty[entry.key] = None  # a settled entry that changes is judged again

    def _change(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        writes = [[content.get("component"), content["value"]]]
        entry.measurement = apply_writes(entry.measurement, writes)
        entry.result = None
        entry.good_standing = False
        self.ready.pop(entry.key, None)
        self.dirty[entry.key] = None

    def _escalation(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        self.unescalated.pop(entry.key, None)
        self._leave(entry)
        self._move(entry, Segment.ESCALATE)
        self._stage(entry, Stage.ESCALATED)
        entry.escalation = content if sequence == 0 else None
        entry.escalation_seq = sequence
        entry.attempts = _NO_ATTEMPTS  # the escalation record carries them in its report

    def _resolution(self, entry: EntryState, content: Mapping[str, Any], sequence: int) -> None:
        self._leave(entry)
        self._move(entry, Segment.CERTIFY)
        self._stage(entry, Stage.RESOLVED)
        entry.resolution = {**content, "sequence": sequence}
        if "measurement" in content:
            entry.measurement = content["measurement"]
            entry.result = None
            entry.good_standing = False
            self.dirty[entry.key] = None

    # -- queue bookkeeping -------------------------------------------------------------

    def _place(self, entry: EntryState) -> None:
        source = entry.source
        if source is None:
            return
        self.partitions.setdefault(source, {})[entry.key] = None
        if entry.chain_name is _ON_PASS:
            entry.provisional = True
            entry.good_standing = False
        if entry.scopes:  # else no component to be ready (most routes scope none)
            self._check_ready(entry)

    def _leave(self, entry: EntryState) -> None:
        source = entry.source
        if source is not None:
            self.partitions.get(source, {}).pop(entry.key, None)
        self.ready.pop(entry.key, None)
        if entry.retry_at is not None:
            self._retry_at(entry, None)

    def _settle(self, entry: EntryState) -> None:
        if entry.good_standing:
            self._leave(entry)
            self._stage(entry, _GOOD)
            entry.attempts = _NO_ATTEMPTS  # only escalations report them; free the memory
        elif entry.scopes:  # else no component to be ready
            self._check_ready(entry)

    def _check_ready(self, entry: EntryState) -> None:
        component = entry.scopes.get(entry.source or "")
        if component is not None and entry.component_passes(component):
            self.ready[entry.key] = None

    def _retry_at(self, entry: EntryState, when: str | None) -> None:
        if when is None and entry.retry_at is None:
            return  # not waiting (only this method puts an entry in ``waiting``)
        entry.retry_at = None if when is None else datetime.fromisoformat(when)
        if entry.retry_at is None:
            self.waiting.pop(entry.key, None)
        else:
            self.waiting[entry.key] = None

    def _stage(self, entry: EntryState, stage: Stage) -> None:
        self.stages[entry.stage] -= 1
        self.stages[stage] += 1
        entry.stage = stage
        position, chain = entry.position, entry.chain  # ``_point``, without its call
        entry.source = chain[position] if stage is _WORKING and position < len(chain) else None
        if stage in _OPEN_STAGES:
            self.unsettled[entry.key] = None
        else:
            self.unsettled.pop(entry.key, None)

    def _move(self, entry: EntryState, segment: Segment) -> None:
        self.segments[entry.segment].pop(entry.key, None)
        self.segments[segment][entry.key] = None
        entry.segment = segment

    # -- questions the controller asks --------------------------------------------------

    def open_work(self, key: str) -> bool:
        """Whether the entry still needs a controller (unsettled, or awaiting a verdict)."""
        return key in self.unsettled or key in self.dirty

    def needs_work(self, key: str, component: str | None) -> bool:
        """Whether a source (scoped to ``component``) has something to do on ``key``."""
        entry = self.entries[key]
        if entry.stage is not _WORKING:
            return False
        if component is None:
            return not entry.good_standing
        return not entry.component_passes(component)


def _point(entry: EntryState) -> None:
    """Set ``entry.source`` from its stage and place on its chain (after either changed)."""
    position = entry.position
    chain = entry.chain
    entry.source = chain[position] if entry.stage is _WORKING and position < len(chain) else None


def apply_writes(measurement: Any, writes: list[list[Any]]) -> Any:
    """The measurement after ``writes`` (``[component or None, value]`` pairs, in order)."""
    for component, value in writes:
        measurement = value if component is None else {**measurement, component: value}
    return measurement


def _passes(result: bool | dict[str, bool] | None) -> bool:
    if isinstance(result, dict):
        return all(result.values())
    return bool(result)

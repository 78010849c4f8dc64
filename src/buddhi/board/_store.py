"""BoardStore: the buddhi Store seam filled on a blackboard board."""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from blackboard import (
    Conflict,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    Rejected,
    WriteResult,
    Written,
    create_model,
)
from blackboard.errors import BlackboardError
from blackboard.faults import fault_point
from blackboard.stores import Store as BoardBackend
from buddhi._budget import Scope, ScopePath
from buddhi._store import (
    Admission,
    AdmissionRequest,
    Clock,
    ExclusionCause,
    Exclusions,
    ScopeCounter,
    Store,
    SystemClock,
    assess_admission,
)
from buddhi.board._codec import (
    ADMISSIONS_LEVEL,
    AUDIT_KEY,
    BUDGET_PREMISE,
    EXCLUSIONS_PREMISE,
    Budget,
    chain_of,
    counters_of,
    decode_counter,
    decode_exclusions,
    describe_cause,
    encode_counter,
    encode_exclusions,
    scope_key,
    usage,
)
from buddhi.errors import (
    AdmissionRefused,
    BudgetExhausted,
    ScopeConflictError,
    SeamError,
    SourceExcluded,
    StoreError,
)

__all__ = ["BUDGET_PREMISES", "BUDGET_REGIONS", "DEFAULT_ATTEMPTS", "BoardStore"]

BUDGET_REGIONS: tuple[Premise | Level, ...] = (
    Premise(BUDGET_PREMISE),
    Premise(EXCLUSIONS_PREMISE),
    Level(ADMISSIONS_LEVEL, unique=AUDIT_KEY),
)
"""The regions a board needs to hold a BoardStore; declare them in a shared model."""

BUDGET_PREMISES: Mapping[str, Any] = MappingProxyType({BUDGET_PREMISE: {}, EXCLUSIONS_PREMISE: {}})
"""The opening values of the two premises of :data:`BUDGET_REGIONS` (no scope, no exclusion)."""

DEFAULT_ATTEMPTS = 100
"""How many compare-and-set attempts one call makes before it gives up with StoreError."""

DEFAULT_WRITER = "buddhi"
"""The writer name BoardStore writes the board under."""

# After a lost compare-and-set a call waits a random time (full jitter) of up to one
# attempt's duration, doubling with each further loss up to _BACKOFF_CAP: sized by the
# backend's own latency, losers spread out instead of burning the cores the winner needs.
_BACKOFF_FLOOR = 0.0005
_BACKOFF_CAP = 0.1

_log = logging.getLogger("buddhi.board")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Plan(Generic[T]):
    """What one attempt decided: its result, the premise's new value, and its audit record.

    ``value`` ``None`` writes no premise; then an ``audit`` record (a refusal) is
    appended on its own, and none (nothing changed) writes nothing at all.
    """

    result: T
    value: dict[str, Any] | None = None
    audit: dict[str, Any] | None = None


class BoardStore(Store):
    """The buddhi Store on a blackboard board: durable, and atomic across processes.

    Every counter of the store lives in one premise (``budget``), so a multi-scope
    admission that charges the whole path is one compare-and-set; see
    :mod:`buddhi.board` for the premise shapes and the atomicity argument.

    Args:
        store: Where the board lives: ``None`` (memory), ``"sqlite:///path.db"``,
            ``"postgresql://..."``, or an open ``blackboard.stores.Store`` (which the
            BoardStore then uses but never closes).
        board_id: The board; reopening an existing one resumes its counters.
        clock: Where windows read the time; by default the wall clock.
        writer: The writer name of its writes on the board.
        attempts: Compare-and-set attempts per call before it raises StoreError.

    Raises:
        StoreError: The store cannot be opened, or the board holds another model.
    """

    def __init__(
        self,
        store: str | BoardBackend | None = None,
        board_id: str = "buddhi",
        *,
        clock: Clock | None = None,
        writer: str = DEFAULT_WRITER,
        attempts: int = DEFAULT_ATTEMPTS,
    ) -> None:
        _check_attempts(attempts)
        try:
            model = create_model(
                BUDGET_REGIONS, premises=BUDGET_PREMISES, store=store, board_id=board_id
            )
        except BlackboardError as exc:
            raise StoreError(
                f"cannot open the budget board {board_id!r}: {exc}; a board shared with "
                "another model takes BoardStore.on_model(model) instead"
            ) from exc
        self._bind(model, clock, writer, attempts, owns_model=True)

    @classmethod
    def on_model(
        cls,
        model: Model,
        *,
        clock: Clock | None = None,
        writer: str = DEFAULT_WRITER,
        attempts: int = DEFAULT_ATTEMPTS,
    ) -> BoardStore:
        """Keep the budget on an application's own board, e.g. a pybb run's.

        The model must declare :data:`BUDGET_REGIONS` with :data:`BUDGET_PREMISES` as
        their opening values. The BoardStore never closes the model.

        Raises:
            StoreError: The model lacks one of the regions, or declares it differently.
        """
        _check_attempts(attempts)
        _require_regions(model)
        store = cls.__new__(cls)  # an alternate constructor: __init__ would open a board
        cls._bind(store, model, clock, writer, attempts, owns_model=False)
        return store

    def _bind(
        self, model: Model, clock: Clock | None, writer: str, attempts: int, *, owns_model: bool
    ) -> None:
        self._model = model
        self._clock: Clock = SystemClock() if clock is None else clock
        self._writer = writer
        self._attempts = attempts
        self._owns_model = owns_model
        self._closed = False

    @property
    def model(self) -> Model:
        """The blackboard model the budget lives on (its reader shows the audit trail)."""
        return self._model

    def __repr__(self) -> str:
        return f"BoardStore(board_id={self._model.board_id!r})"

    # -- the Store seam ------------------------------------------------------------

    def open_scope(self, scope: Scope) -> None:
        """Open a scope with zeroed counters; opening it again unchanged does nothing."""
        if not isinstance(scope, Scope):
            raise SeamError(f"open_scope takes a buddhi.Scope, got {scope!r}")
        self._transact(BUDGET_PREMISE, lambda budget: _opening(budget, scope), "open a scope")

    def admit(self, request: AdmissionRequest) -> Admission:
        """Atomically admit one interrupt, charging the scope and all its ancestors."""
        if not isinstance(request, AdmissionRequest):
            raise SeamError(f"admit takes a buddhi.AdmissionRequest, got {request!r}")
        verdict = self._transact(
            BUDGET_PREMISE, lambda budget: self._assess(request, budget), "admit"
        )
        if isinstance(verdict, AdmissionRefused):
            raise verdict
        return verdict

    def counter(self, path: ScopePath) -> ScopeCounter:
        """Return a scope's counters as of now (``spent`` counts the current window)."""
        if not isinstance(path, tuple):
            raise SeamError(f"a scope path is a tuple of names, got {path!r}")
        return chain_of(self._premise(BUDGET_PREMISE), path)[-1].at(self._clock.now())

    def scopes(self) -> tuple[Scope, ...]:
        """Return every open scope, each after its parent."""
        return tuple(c.scope for c in counters_of(self._premise(BUDGET_PREMISE)))

    def exclude(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically add ``cause`` to ``source``'s exclusions and return the result."""
        _check_cause(source, cause)
        return self._transact(
            EXCLUSIONS_PREMISE, lambda value: _excluding(value, source, cause, True), "exclude"
        )

    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        """Atomically retract a transient ``cause`` from ``source`` and return the result."""
        _check_cause(source, cause)
        return self._transact(
            EXCLUSIONS_PREMISE, lambda value: _excluding(value, source, cause, False), "retract"
        )

    def exclusions(self, source: str) -> Exclusions:
        """Return ``source``'s exclusions (empty tiers when it was never excluded)."""
        return decode_exclusions(self._premise(EXCLUSIONS_PREMISE), source)

    def close(self) -> None:
        """Close the board's store if this BoardStore opened it; closing twice is harmless."""
        if self._closed:
            return
        if self._owns_model:
            with self._kernel("close"):
                self._model.close()
        self._closed = True

    # -- one decision: read, assess, compare-and-set ------------------------------------

    def _assess(
        self, request: AdmissionRequest, budget: Budget
    ) -> _Plan[Admission | AdmissionRefused]:
        now = self._clock.now()
        chain = [counter.at(now) for counter in chain_of(budget, request.scope)]
        exclusions = self.exclusions(request.source)
        verdict = assess_admission(request, chain, exclusions)
        if isinstance(verdict, AdmissionRefused):
            return _Plan(verdict, None, _decision(request, verdict, chain, now))
        last = len(chain) - 1
        charged = [counter.charged(own=depth == last) for depth, counter in enumerate(chain)]
        value = dict(budget)
        for counter in charged:
            value[scope_key(counter.scope.path)] = encode_counter(counter)
        return _Plan(verdict, value, _decision(request, verdict, charged, now))

    def _transact(self, premise: str, plan: Callable[[Any], _Plan[T]], what: str) -> T:
        """Read the premise, plan, and commit at the version read; again on a conflict."""
        for attempt in range(self._attempts):
            started = time.monotonic()
            with self._kernel(what):
                state = self._model.reader.read_premise(premise)
            step = plan(_mapping(premise, state.value))
            if self._commit(premise, state.version, step, what):
                return step.result
            took = max(_BACKOFF_FLOOR, time.monotonic() - started)
            time.sleep(random.uniform(0.0, min(_BACKOFF_CAP, took * 2**attempt)))
        raise StoreError(
            f"BoardStore could not {what} on board {self._model.board_id!r}: the {premise!r} "
            f"premise changed under each of {self._attempts} attempts (heavy contention); "
            "nothing was written by this call. Retry it, or raise attempts="
        )

    def _commit(self, premise: str, version: int, step: _Plan[T], what: str) -> bool:
        """Write one attempt's plan; False when another writer got to the premise first."""
        if step.value is None:
            if step.audit is not None:  # a refusal: recorded, nothing charged
                tag = f"{premise}@{version}#{uuid.uuid4().hex}"
                self._refused(self._write([self._audit(step.audit, tag)], what)[0], what)
            return True
        assert step.audit is not None  # every plan that writes the premise says why
        record = self._audit({**step.audit, "version": version + 1}, f"{premise}@{version}")
        cas = ProposedPremiseWrite(self._writer, premise, step.value, version)
        if premise == BUDGET_PREMISE:
            fault_point("budget.consume")  # RA-02: a crash as the budget is charged
        written, trail = self._write([cas, record], what)
        return self._settle(premise, written, trail, what)

    def _settle(self, premise: str, written: WriteResult, trail: WriteResult, what: str) -> bool:
        if isinstance(written, Written):
            if not isinstance(trail, Written):
                _log.warning(
                    "%s on %r committed, but its audit record was refused: %s",
                    what,
                    self._model.board_id,
                    trail,
                )
            return True
        if isinstance(trail, Written):  # only when a foreign writer set the premise
            self._void(premise, trail.sequence, what)
        if isinstance(written, Conflict):
            return False
        raise StoreError(
            f"the board {self._model.board_id!r} refused to {what}: {written.reason}; "
            "nothing was charged"
        )

    def _void(self, premise: str, sequence: int, what: str) -> None:
        """Mark an audit record whose compare-and-set failed as void (see buddhi.board)."""
        _log.warning(
            "the %r premise was written outside BoardStore; voiding record %d", premise, sequence
        )
        record = {"kind": "void", "voids": sequence}
        self._write([self._audit(record, f"void@{sequence}")], what)

    def _refused(self, result: WriteResult, what: str) -> None:
        if isinstance(result, Rejected):
            raise StoreError(
                f"the board {self._model.board_id!r} refused to record a refusal ({what}): "
                f"{result.reason}"
            )

    def _audit(self, record: Mapping[str, Any], tag: str) -> ProposedContribution:
        return ProposedContribution(self._writer, ADMISSIONS_LEVEL, {**record, AUDIT_KEY: tag})

    def _write(self, proposals: list[ProposedWrite], what: str) -> list[WriteResult]:
        with self._kernel(what):
            return self._model.control.write_all(proposals)

    def _premise(self, premise: str) -> Mapping[str, Any]:
        with self._kernel(f"read the {premise!r} premise"):
            value = self._model.reader.read_premise(premise).value
        return _mapping(premise, value)

    @contextmanager
    def _kernel(self, what: str) -> Iterator[None]:
        """Refuse a closed store; translate the kernel's errors into StoreError."""
        if self._closed:
            raise StoreError("this BoardStore is closed; open a new one to use the board")
        try:
            yield
        except BlackboardError as exc:
            raise StoreError(f"the board {self._model.board_id!r} failed to {what}: {exc}") from exc


# -- the plans ------------------------------------------------------------------------------


def _opening(budget: Budget, scope: Scope) -> _Plan[None]:
    key = scope_key(scope.path)
    if key in budget:
        existing = decode_counter(key, budget[key]).scope
        if existing != scope:
            raise ScopeConflictError(
                f"scope {key!r} is open as {existing}; it cannot be reopened as {scope}"
            )
        return _Plan(None)
    if scope.parent is not None:
        chain_of(budget, scope.parent)  # raises UnknownScopeError for a missing parent
    entry = encode_counter(ScopeCounter(scope))
    definition = {k: entry[k] for k in ("path", "parent", "ceiling", "weight", "window_us")}
    return _Plan(None, {**budget, key: entry}, {"kind": "open_scope", "scope": key, **definition})


def _excluding(
    value: Mapping[str, Any], source: str, cause: ExclusionCause, adding: bool
) -> _Plan[Exclusions]:
    before = decode_exclusions(value, source)
    after = before.adding(cause) if adding else before.retracting(cause)
    if after == before:
        return _Plan(after)
    entries = dict(value)
    if after.excluded:
        entries[source] = encode_exclusions(after)
    else:
        del entries[source]
    audit = {
        "kind": "exclude" if adding else "retract",
        "source": source,
        "cause": describe_cause(cause),
        "exclusions": encode_exclusions(after),
    }
    return _Plan(after, entries, audit)


def _decision(
    request: AdmissionRequest,
    verdict: Admission | AdmissionRefused,
    counters: list[ScopeCounter],
    now: datetime,
) -> dict[str, Any]:
    """The audit record of one admission decision: request, decision, bar, counters after."""
    record: dict[str, Any] = {
        "kind": "admission",
        "request": {
            "item_id": request.item_id,
            "scope": scope_key(request.scope),
            "source": request.source,
            "confidence": request.confidence,
        },
        "counters": usage(counters),
        "at": now.isoformat(),
    }
    if isinstance(verdict, Admission):
        read = {"load": _finite(verdict.load), "required": _finite(verdict.required)}
        return {**record, "decision": "admitted", "bar": read}
    if isinstance(verdict, BudgetExhausted):
        bar: dict[str, Any] = {"required": _finite(verdict.required), "limit": verdict.limit}
        refusal = {"scope": scope_key(verdict.scope), "spent": verdict.spent}
        return {**record, "decision": "budget_exhausted", "bar": bar, "refusal": refusal}
    assert isinstance(verdict, SourceExcluded)
    excluded = encode_exclusions(verdict.exclusions)
    return {**record, "decision": "source_excluded", "bar": None, "exclusions": excluded}


# -- checks ---------------------------------------------------------------------------------


def _mapping(premise: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise StoreError(
            f"the {premise!r} premise holds {value!r}, not a JSON object; open it with "
            "BUDGET_PREMISES as its opening value, and let only BoardStore write it"
        )
    return value


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def _require_regions(model: object) -> None:
    if not isinstance(model, Model):
        raise SeamError(f"BoardStore.on_model takes a blackboard.Model, got {model!r}")
    for region in BUDGET_REGIONS:
        found = model.regions.get(region.name)
        same = found is not None and found.kind == region.kind
        if same and isinstance(region, Level):
            same = isinstance(found, Level) and found.unique == region.unique
        if not same:
            raise StoreError(
                f"the model of board {model.board_id!r} declares {found!r} where BoardStore "
                f"needs {region!r}; add buddhi.board.BUDGET_REGIONS to its regions and "
                "BUDGET_PREMISES to its premises"
            )


def _check_cause(source: object, cause: object) -> None:
    if not isinstance(source, str) or not source:
        raise SeamError(f"an excluded source is a non-empty str, got {source!r}")
    if not isinstance(cause, ExclusionCause):
        raise SeamError(f"an exclusion cause is a buddhi.ExclusionCause, got {cause!r}")


def _check_attempts(attempts: object) -> None:
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise StoreError(f"attempts must be a positive whole number, got {attempts!r}")

"""pybb: the repair controller of seed 000, built on the blackboard kernel.

Entries are measurements with a condition; knowledge sources repair (or confirm) them;
the controller dispatches each entry onto a chain of sources by its first verdict,
retries, hands off, and escalates what nothing could repair. Every change is a
sequenced write on a ``blackboard`` board, so a run on SQLite survives a crash and
resumes where it stopped, and a run on PostgreSQL is shared by :class:`Worker` processes
on many machines (``pybb worker``).
"""

from pybb._engine.blackboard import Blackboard
from pybb._engine.controller import Controller, Predicate, Route
from pybb._engine.seams import Clock, ControllerObserver, SystemClock
from pybb._engine.source import KnowledgeSource, RetryPolicy
from pybb._engine.types import (
    AttemptStatus,
    AttemptSummary,
    BlackboardEntry,
    Chain,
    CycleReport,
    Escalation,
    EscalationReport,
    HaltReason,
    HistoryEvent,
    Resolution,
    RunSummary,
    Segment,
    Stage,
)
from pybb._engine.worker import AppContext, Worker, WorkerApp, WorkerSettings, WorkerSummary
from pybb.errors import (
    AttemptError,
    BoardClosedError,
    ComponentError,
    DuplicateSourceError,
    EntryError,
    EntryExistsError,
    EntryNotFoundError,
    PredicateError,
    PybbError,
    ReopenError,
    ResolutionError,
    RouteError,
    SourceError,
    UnknownSourceError,
    UnregisteredPredicateError,
)

__all__ = [
    "AppContext",
    "AttemptError",
    "AttemptStatus",
    "AttemptSummary",
    "Blackboard",
    "BlackboardEntry",
    "BoardClosedError",
    "Chain",
    "Clock",
    "ComponentError",
    "Controller",
    "ControllerObserver",
    "CycleReport",
    "DuplicateSourceError",
    "EntryError",
    "EntryExistsError",
    "EntryNotFoundError",
    "Escalation",
    "EscalationReport",
    "HaltReason",
    "HistoryEvent",
    "KnowledgeSource",
    "Predicate",
    "PredicateError",
    "PybbError",
    "ReopenError",
    "Resolution",
    "ResolutionError",
    "RetryPolicy",
    "Route",
    "RouteError",
    "RunSummary",
    "Segment",
    "SourceError",
    "Stage",
    "SystemClock",
    "UnknownSourceError",
    "UnregisteredPredicateError",
    "Worker",
    "WorkerApp",
    "WorkerSettings",
    "WorkerSummary",
]

"""The errors pybb raises, all rooted at :class:`PybbError`.

The tree::

    PybbError
    ├── EntryError                  an entry that cannot be written as given
    │   ├── EntryExistsError        the key already holds a different entry
    │   └── ComponentError          a component the entry's measurement does not have
    ├── EntryNotFoundError          no entry under the key (also a KeyError)
    ├── PredicateError              a predicate registered wrongly
    │   └── UnregisteredPredicateError  an entry names a predicate nobody registered
    ├── SourceError                 a knowledge source declared wrongly
    │   └── DuplicateSourceError    two different sources share one name
    ├── RouteError                  a route whose chains cannot be followed
    │   └── UnknownSourceError      a recorded chain names a source that is not registered
    ├── ResolutionError             an out-of-band resolution that cannot be applied
    ├── ReopenError                 an entry that cannot be opened again as asked
    ├── BoardClosedError            the board's kernel run was closed; nothing more lands
    ├── AttemptError                raised *by* a knowledge source to fail its attempt
    ├── EventLogError               (pybb.attestation) a TCG event log that cannot be read
    │   ├── TruncatedLogError       the log ends inside an event
    │   └── UnknownAlgorithmError   a digest algorithm the log or this build cannot hash
    ├── FleetError                  (pybb.attestation) a fleet folder that cannot be used
    │   ├── EvidenceError           a device's evidence file, naming file and field
    │   └── PolicyError             a device class or policy file, naming file and field
    ├── HumanLoopError              (pybb.human) the human-loop protocol misused
    │   └── MalformedContentError   an ask or answer that is not well formed
    ├── InboxError                  (pybb.inbox) the inbox cannot serve as configured
    │   ├── TokenError              a token that cannot be issued or used
    │   ├── BoardNotFoundError      no run with a human loop at that store and board id
    │   └── InboxDependencyError    the inbox extra is not installed
    └── SupervisionError            (pybb.supervision) the human loop wired wrongly

What the application got wrong raises one of these, before anything is written; what a
run decided (an entry escalated, a source failing its attempts) is recorded on the board
instead. ``AttemptError`` is the one a knowledge source raises itself: the controller
records it as a failed attempt, with its ``report``, and the run goes on. Errors of the
board kernel (``blackboard.StoreError`` when the store fails) pass through unchanged.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AttemptError",
    "BoardClosedError",
    "ComponentError",
    "DuplicateSourceError",
    "EntryError",
    "EntryExistsError",
    "EntryNotFoundError",
    "PredicateError",
    "PybbError",
    "ReopenError",
    "ResolutionError",
    "RouteError",
    "SourceError",
    "UnknownSourceError",
    "UnregisteredPredicateError",
]


class PybbError(Exception):
    """The root of every error pybb raises."""


class EntryError(PybbError):
    """An entry that cannot be written as given (no predicate, mismatched components...).

    Attributes:
        key: The entry's key, or ``None`` when the key itself is the problem.
    """

    def __init__(self, key: str | None, problem: str) -> None:
        where = "an entry" if key is None else f"entry {key!r}"
        super().__init__(f"{where}: {problem}")
        self.key = key
        self.problem = problem


class EntryExistsError(EntryError):
    """``write_entry`` under a key that already holds a different entry."""


class ComponentError(EntryError):
    """A component that the entry's dict measurement does not have.

    Attributes:
        component: The component asked for.
    """

    def __init__(self, key: str, component: object, problem: str) -> None:
        super().__init__(key, problem)
        self.component = component


class EntryNotFoundError(PybbError, KeyError):
    """No entry is written under the key."""

    def __init__(self, key: object) -> None:
        super().__init__(
            f"no entry {key!r} on this blackboard; write it with write_entry() first "
            "or check the key"
        )
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class PredicateError(PybbError):
    """A predicate registered with a bad name or a value that is not callable."""


class UnregisteredPredicateError(PredicateError):
    """An entry names a predicate that the controller has no function for.

    Attributes:
        key: The entry.
        predicate: The name it uses.
    """

    def __init__(self, key: str, predicate: str, registered: list[str]) -> None:
        super().__init__(
            f"entry {key!r} uses predicate {predicate!r}, which is not registered "
            f"(registered: {registered}); call controller.register_predicate({predicate!r}, "
            "function) before run()"
        )
        self.key = key
        self.predicate = predicate


class SourceError(PybbError):
    """A knowledge source declared with a bad name, max_attempts, timeout or component."""


class DuplicateSourceError(SourceError):
    """Two different knowledge sources were given one name.

    Attributes:
        name: The shared name.
    """

    def __init__(self, name: str) -> None:
        super().__init__(
            f"two different knowledge sources are named {name!r}; the board records attempts "
            "by source name, so give each source its own name"
        )
        self.name = name


class RouteError(PybbError):
    """A route whose chains cannot be followed (not sources, a source twice in a chain...)."""


class UnknownSourceError(RouteError):
    """The board records an entry at a source this controller has not registered.

    Attributes:
        key: The entry.
        source: The recorded source name.
    """

    def __init__(self, key: str, source: str) -> None:
        super().__init__(
            f"entry {key!r} was dispatched onto a chain that names source {source!r}, but no "
            f"source named {source!r} is registered; add_ks() it before run() (a resumed run "
            "needs the sources it started with)"
        )
        self.key = key
        self.source = source


class ResolutionError(PybbError):
    """An out-of-band resolution that cannot be applied (entry not escalated, bad fields).

    Attributes:
        key: The entry.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"cannot resolve entry {key!r}: {problem}")
        self.key = key
        self.problem = problem


class ReopenError(PybbError):
    """An entry that cannot be opened again (still being worked on, a bad field).

    Attributes:
        key: The entry.
        problem: What is wrong, and how to fix it.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"cannot reopen entry {key!r}: {problem}")
        self.key = key
        self.problem = problem


class BoardClosedError(PybbError):
    """The board's kernel run was closed (``control.abort()``/``complete()``); nothing lands.

    Attributes:
        board_id: The board.
    """

    def __init__(self, board_id: str, reason: str) -> None:
        super().__init__(
            f"board {board_id!r} refuses writes: {reason}; open a new board_id to go on"
        )
        self.board_id = board_id


class AttemptError(PybbError):
    """Raised by a knowledge source to fail its attempt, with a structured report.

    The controller catches it (as it catches any exception from ``execute``), records a
    failed attempt whose error is the message and whose report is ``report``, and goes
    on. When the source's failures end the route, the escalation carries the report.

    Args:
        message: Why the attempt failed, for the person who reads the escalation.
        report: Any JSON value (dict, list, str, number, bool, None) describing it.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report

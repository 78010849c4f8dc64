"""The errors the event-log layer raises, all rooted at :class:`EventLogError`.

The tree::

    PybbError
    └── EventLogError            a log that cannot be read, parsed or replayed
        ├── TruncatedLogError    the log ends inside a structure (or is empty)
        └── UnknownAlgorithmError  a digest algorithm id nobody declared or we cannot hash

Every error names the event number (0-based, the Spec ID event being event 0, as
``tpm2_eventlog`` numbers them) and the byte offset from the start of the log where
parsing stopped, so a person can open the log in a hex editor at that spot.
"""

from __future__ import annotations

from pybb.errors import PybbError

__all__ = ["EventLogError", "TruncatedLogError", "UnknownAlgorithmError"]

_DEFAULT_HINT = (
    "the log is corrupt or was cut short; copy it again from the machine "
    "(e.g. /sys/kernel/security/tpm0/binary_bios_measurements) and retry"
)


class EventLogError(PybbError):
    """A TCG event log could not be read, parsed or replayed.

    Attributes:
        problem: What was wrong, as a sentence fragment quoting the offending value.
        event: The 0-based number of the event being parsed, or ``None`` when the
            failure is not tied to one event (e.g. the file cannot be opened).
        offset: The byte offset from the start of the log where the failing
            structure begins, or ``None`` when not tied to a position.
        hint: What to do about it.
    """

    def __init__(
        self,
        problem: str,
        *,
        event: int | None = None,
        offset: int | None = None,
        hint: str = _DEFAULT_HINT,
    ) -> None:
        self.problem = problem
        self.event = event
        self.offset = offset
        self.hint = hint
        super().__init__(_compose(problem, event, offset, hint))

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.__dict__.copy()))


class TruncatedLogError(EventLogError):
    """The log ends in the middle of a structure, or holds no bytes at all.

    Attributes:
        needed: How many bytes the structure at ``offset`` needs.
        available: How many bytes the log still had from ``offset``.
    """

    def __init__(
        self,
        problem: str,
        *,
        event: int | None,
        offset: int | None,
        needed: int,
        available: int,
        hint: str = _DEFAULT_HINT,
    ) -> None:
        self.needed = needed
        self.available = available
        super().__init__(problem, event=event, offset=offset, hint=hint)


class UnknownAlgorithmError(EventLogError):
    """A digest algorithm id is not declared by the Spec ID event, or cannot be hashed.

    Attributes:
        algorithm_id: The TCG algorithm id (``TPM_ALG_ID``) that was found.
    """

    def __init__(
        self,
        problem: str,
        *,
        event: int | None,
        offset: int | None,
        algorithm_id: int,
        hint: str = _DEFAULT_HINT,
    ) -> None:
        self.algorithm_id = algorithm_id
        super().__init__(problem, event=event, offset=offset, hint=hint)


def _compose(problem: str, event: int | None, offset: int | None, hint: str) -> str:
    where = []
    if event is not None:
        where.append(f"event {event}")
    if offset is not None:
        where.append(f"byte offset {offset} (0x{offset:x})")
    prefix = f"TCG event log, {' at '.join(where)}: " if where else "TCG event log: "
    return f"{prefix}{problem}; {hint}."


def _rebuild(cls: type[EventLogError], state: dict[str, object]) -> EventLogError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, _compose(error.problem, error.event, error.offset, error.hint))
    return error

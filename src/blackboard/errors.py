"""The errors the blackboard kernel raises, all rooted at :class:`BlackboardError`.

The tree::

    BlackboardError
    ├── ModelError              the model declaration itself is inconsistent
    │   ├── ModelMismatchError  reopening a stored run with a different model
    │   └── BoardNotFoundError  attaching to a board the store does not hold
    ├── UndeclaredRegionError   a write or read names a region nobody declared
    ├── RegionKindError         a level write to a premise, or the other way round
    ├── ContentError            content or a premise value that the board cannot keep
    ├── WriterError             a writer name that is empty, not a string, or reserved
    ├── IdempotencyKeyError     an idempotency key reused for a different write
    ├── AdmissionRuleError      the application's admission rule raised or answered nonsense
    ├── SequenceError           a sequence number outside the board's log
    └── StoreError              the store failed; nothing was written
        ├── StoreConfigError    a store URL or option the kernel cannot open
        └── StoreOutcomeUnknownError  the connection died during COMMIT: it may have landed

What the application got wrong raises; what the board decided (a rejection, a
conflict) is returned as a value. A call that raises has written nothing.
"""

from __future__ import annotations

__all__ = [
    "AdmissionRuleError",
    "BlackboardError",
    "BoardNotFoundError",
    "ContentError",
    "IdempotencyKeyError",
    "ModelError",
    "ModelMismatchError",
    "RegionKindError",
    "SequenceError",
    "StoreConfigError",
    "StoreError",
    "StoreOutcomeUnknownError",
    "UndeclaredRegionError",
    "WriterError",
]


class BlackboardError(Exception):
    """The root of every error the kernel raises."""


class ModelError(BlackboardError):
    """The model declaration is inconsistent (duplicate regions, missing opening values...)."""


class ModelMismatchError(ModelError):
    """A stored run was reopened with a model whose declaration differs from the stored one."""

    def __init__(self, board_id: str, stored: str, declared: str) -> None:
        super().__init__(
            f"board {board_id!r} was created with a different model: stored declaration "
            f"{stored} but this model declares {declared}; open it with the same regions "
            "and agents, or use a new board_id"
        )
        self.board_id = board_id
        self.stored = stored
        self.declared = declared


class BoardNotFoundError(ModelError):
    """``attach`` named a board that the store does not hold."""

    def __init__(self, board_id: str) -> None:
        super().__init__(
            f"the store holds no board {board_id!r}; start the run first, or pass the "
            "board_id it was created with"
        )
        self.board_id = board_id


class UndeclaredRegionError(BlackboardError):
    """A write or read names a region that the model does not declare."""

    def __init__(self, region: object, declared: tuple[str, ...]) -> None:
        super().__init__(
            f"region {region!r} is not declared; declared regions are {list(declared)}; "
            "declare it in create_model(regions=...) or fix the name"
        )
        self.region = region
        self.declared = declared


class RegionKindError(BlackboardError):
    """A write names a region of the other kind (a level where a premise is needed, or back)."""

    def __init__(self, region: str, actual: str, wanted: str) -> None:
        super().__init__(
            f"region {region!r} is a {actual}, not a {wanted}; "
            f"use {'write' if actual == 'level' else 'set_premise'} for it"
        )
        self.region = region
        self.actual = actual
        self.wanted = wanted


class ContentError(BlackboardError):
    """Content or a premise value cannot be kept on the board (not JSON, NaN, too deep...)."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what} {problem}")
        self.what = what
        self.problem = problem


class WriterError(BlackboardError):
    """A writer name is not a non-empty string, or uses the reserved '@' prefix."""


class IdempotencyKeyError(BlackboardError):
    """An idempotency key was reused for a write that differs from the first one."""

    def __init__(self, key: str, sequence: int) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used by the write at sequence {sequence}, "
            "which differs from this one; use a fresh key for a new write"
        )
        self.key = key
        self.sequence = sequence


class AdmissionRuleError(BlackboardError):
    """The application's admission rule raised, or returned something other than Accept/Reject."""


class SequenceError(BlackboardError):
    """A sequence number that the board's log does not reach."""


class StoreError(BlackboardError):
    """The store failed to complete an operation; nothing was written by it.

    Except :class:`StoreOutcomeUnknownError`, whose write may have landed.
    """


class StoreConfigError(StoreError):
    """A store URL or option the kernel cannot open."""


class StoreOutcomeUnknownError(StoreError):
    """The connection died during COMMIT and the store could not learn whether it landed.

    The one case where a StoreError does not mean "nothing was written": a write sent
    with an idempotency key can be sent again safely (it returns the first outcome if it
    had landed); read the board before repeating one sent without.
    """

"""The errors ``pybb.human`` raises, rooted at :class:`pybb.errors.PybbError`.

The tree::

    PybbError
    └── HumanLoopError              also: a bad deadline policy, a board that refused a write
        ├── MalformedContentError   an ask, option, answer, closure, person or assignment
        │                           that cannot be kept
        └── LinkError               a notification's link that cannot be accepted
"""

from __future__ import annotations

import enum

from pybb.errors import PybbError

__all__ = ["HumanLoopError", "LinkError", "LinkProblem", "MalformedContentError"]


class HumanLoopError(PybbError):
    """The root of the errors of the human-loop protocol."""


class MalformedContentError(HumanLoopError, ValueError):
    """A value of the human-loop protocol is malformed; nothing was written.

    Attributes:
        kind: What was being built or read: ``"ask"``, ``"option"``, ``"answer"``,
            ``"closure"`` or ``"human"``.
        field: The offending field.
        problem: What is wrong with it and what to do, as a sentence fragment.
    """

    def __init__(self, kind: str, field: str, problem: str) -> None:
        self.kind = kind
        self.field = field
        self.problem = problem
        super().__init__(f"{kind} {field}: {problem}")


class LinkProblem(enum.Enum):
    """Why a link was refused."""

    MALFORMED = "malformed"
    """It is not a pybb link (or was cut short)."""
    BAD_SIGNATURE = "bad_signature"
    """It was not signed with this inbox's secret, or was altered."""
    EXPIRED = "expired"
    """Its time is up."""
    USED = "used"
    """It was accepted before: a link works once."""


class LinkError(HumanLoopError):
    """A link that cannot be accepted; nothing was recorded.

    Attributes:
        problem: Why, as a code.
    """

    def __init__(self, problem: LinkProblem, message: str) -> None:
        self.problem = problem
        super().__init__(message)

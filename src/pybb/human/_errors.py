"""The errors ``pybb.human`` raises, rooted at :class:`pybb.errors.PybbError`.

The tree::

    PybbError
    └── HumanLoopError
        └── MalformedContentError   an ask, option, answer or closure that cannot be kept
"""

from __future__ import annotations

from pybb.errors import PybbError

__all__ = ["HumanLoopError", "MalformedContentError"]


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

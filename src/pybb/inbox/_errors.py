"""The errors ``pybb.inbox`` raises, rooted at :class:`pybb.errors.PybbError`.

The tree::

    PybbError
    └── InboxError
        ├── TokenError            a token or token file that cannot be used
        ├── BoardNotFoundError    the store holds no such run to serve
        └── InboxDependencyError  the inbox extra is not installed (also an ImportError)
"""

from __future__ import annotations

from pybb.errors import PybbError

__all__ = ["BoardNotFoundError", "InboxDependencyError", "InboxError", "TokenError"]


class InboxError(PybbError):
    """The root of the errors of the inbox."""


class TokenError(InboxError, ValueError):
    """A token, or the token file, cannot be used; the message says why and what to do."""


class BoardNotFoundError(InboxError):
    """The store holds no run with the board id asked for.

    Attributes:
        board_id: The board asked for.
    """

    def __init__(self, board_id: str, detail: str) -> None:
        self.board_id = board_id
        super().__init__(detail)


class InboxDependencyError(InboxError, ImportError):
    """The inbox's web dependencies are missing: ``pip install 'mrpybb[inbox]'``."""

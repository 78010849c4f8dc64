"""The errors ``pybb.supervision`` raises, rooted at :class:`pybb.errors.PybbError`.

The tree::

    PybbError
    └── SupervisionError           the wiring cannot supervise, deliver or apply as asked

Budget refusals are not errors: :class:`~pybb.supervision.AskCapReached` is a
``buddhi.AdmissionRefused`` (a decision of the run, recorded as ``DENIED``).
"""

from __future__ import annotations

from pybb.errors import PybbError

__all__ = ["SupervisionError"]


class SupervisionError(PybbError):
    """The human loop's wiring cannot do what it was asked; the message says why and what to do."""

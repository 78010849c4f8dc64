"""The errors pybb raises, all rooted at :class:`PybbError`.

The tree::

    PybbError
    └── (subclasses are added by the controller and by pybb.attestation)

What the application got wrong raises one of these; what a run decided (an entry
escalated, a source failing its attempts) is recorded on the board instead.
"""

from __future__ import annotations

__all__ = ["PybbError"]


class PybbError(Exception):
    """The root of every error pybb raises."""

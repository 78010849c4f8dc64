"""The errors of fleets, device classes and evidence, rooted at :class:`FleetError`.

The tree (beside :class:`~pybb.attestation.EventLogError`, which a log raises)::

    PybbError
    └── FleetError               a fleet, device class, policy or evidence that cannot be used
        ├── EvidenceError        one device's evidence file or value (that device is escalated)
        └── PolicyError          a device class, its policy or its manifest (the run cannot start)

Every error names the file (relative to the fleet folder) and the field, as a dotted
path such as ``quote.sha256.7``, so a person can open the file at the right place.
"""

from __future__ import annotations

from pybb.attestation._report import Reason
from pybb.errors import PybbError

__all__ = ["EvidenceError", "FleetError", "PolicyError", "show"]

_SHOW = 60


def show(value: object) -> str:
    """A short, safe rendering of a value for a message (quoted, escaped, clipped)."""
    text = repr(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"


class FleetError(PybbError):
    """A fleet, device class, policy or evidence that cannot be used.

    Attributes:
        problem: What is wrong, a sentence fragment quoting the offending value.
        path: The file, relative to the fleet folder when there is one; ``None`` for a
            value that did not come from a file.
        field: The dotted path of the offending field (``"quote.sha256.7"``), or
            ``None`` when the problem is the whole file.
        hint: What to do about it.
    """

    what = "fleet"

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        field: str | None = None,
        hint: str = "fix the file and run again",
    ) -> None:
        self.problem = problem
        self.path = path
        self.field = field
        self.hint = hint
        super().__init__(self.explain())

    def explain(self) -> str:
        """The message, composed from the fields (what, where, the problem, what to do)."""
        where = self.what if self.path is None else f"{self.what} file {self.path!r}"
        if self.field is not None:
            where += f", field {show(self.field)}"
        return f"{where}: {self.problem}; {self.hint}."

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.__dict__.copy()))


class EvidenceError(FleetError):
    """One device's evidence cannot be used; that device is escalated, the rest run on.

    Attributes:
        device: The device the evidence is for, when known.
        reason: Why the device is escalated, when it is more than ``bad_evidence`` (a
            quote the verifier refused: ``bad_signature``, ``nonce_reused``, ...).
    """

    what = "evidence"

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        field: str | None = None,
        device: str | None = None,
        hint: str = "fix the evidence file (or collect the evidence again) and run again",
        reason: Reason | None = None,
    ) -> None:
        self.device = device
        self.reason = reason
        super().__init__(problem, path=path, field=field, hint=hint)


class PolicyError(FleetError):
    """A device class, its policy or its reference manifest cannot be used."""

    what = "device class"


def _rebuild(cls: type[FleetError], state: dict[str, object]) -> FleetError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error.explain())
    return error

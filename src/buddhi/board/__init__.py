"""buddhi.board: a durable Store on the blackboard kernel (memory, SQLite, PostgreSQL).

:class:`BoardStore` keeps a buddhi budget on a board: counters and exclusions survive a
restart, and admission is atomic across threads and processes on every backend the
kernel has. ``import buddhi`` never loads this module (nor ``blackboard``); import it by
name.

The board holds three regions (:data:`BUDGET_REGIONS`; opening values in
:data:`BUDGET_PREMISES`):

``budget`` (premise)
    Every scope of the store, keyed by its names joined with ``/``::

        {"global/fleet-a": {"spent": 3, "ceiling": 5,        # what the web inbox reads
                            "path": ["global", "fleet-a"], "parent": "global",
                            "total": 7, "own": 2, "weight": 0.5,
                            "window_us": 3600000000,          # or null: one lifetime budget
                            "window_start": "2030-01-01T00:00:00+00:00"},   # or null
         "global": {...}}

    ``spent`` counts the subtree's interrupts in the window that began at
    ``window_start`` (a later reader rolls it into the current window); ``total`` counts
    them in all time, ``own`` those charged to the scope itself.

``exclusions`` (premise)
    ``{source: {"permanent": [cause, ...], "transient": [cause, ...]}}``; a source whose
    causes are all retracted leaves the object.

``admissions`` (level, unique on ``"step"``)
    The audit trail: one record per admission decision (``"kind": "admission"``, the
    request, ``"decision"``: ``admitted``/``budget_exhausted``/``source_excluded``, the
    bar as read, and the counters along the path after it), per opened scope and per
    exclusion change.

Atomicity. Each call reads the premise it changes, applies buddhi's own rules
(:func:`~buddhi.assess_admission`, :meth:`~buddhi.ScopeCounter.at`,
:meth:`~buddhi.Exclusions.adding`), and writes the new value by compare-and-set at the
version it read, in one batch with its audit record; on a conflict it reads again
(bounded, with jittered backoff). All counters live in the one premise, so charging
every scope on the path is a single compare-and-set, which the kernel makes atomic
across threads and processes. The kernel judges each write of a batch on its own, so a
failed compare-and-set would not stop the audit record; the level's uniqueness does:
the record of a change made from version *v* of a premise carries ``"step":
"<premise>@<v>"``, and only one batch can ever move the premise from *v*, so a loser's
record is refused as a duplicate of the winner's. A refusal charges nothing and is
recorded on its own (``"step": "budget@<v>#<random>"``).

One limit: counters and exclusions are two premises, so an exclusion that commits while
an admission of that source is in flight may not stop it (the admission is ordered
first). An exclusion stops every admission that starts after it returned.
"""

from buddhi.board._codec import ADMISSIONS_LEVEL, BUDGET_PREMISE, EXCLUSIONS_PREMISE
from buddhi.board._store import BUDGET_PREMISES, BUDGET_REGIONS, DEFAULT_ATTEMPTS, BoardStore

__all__ = [
    "ADMISSIONS_LEVEL",
    "BUDGET_PREMISE",
    "BUDGET_PREMISES",
    "BUDGET_REGIONS",
    "DEFAULT_ATTEMPTS",
    "EXCLUSIONS_PREMISE",
    "BoardStore",
]

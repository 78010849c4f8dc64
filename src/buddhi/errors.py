"""The errors buddhi raises, all rooted at :class:`BuddhiError`.

The tree::

    BuddhiError
    ├── ItemError (ValueError)          an Item, Attempt or Stream built with a bad field
    │   └── ItemTypeError (TypeError)   something that is not an Item or Stream was handed in
    ├── ConditioningError (ValueError)  Stage 0 could not type a raw input
    ├── PolicyError (ValueError)        a pack lacks a threshold or phrasing, or one is out of range
    │   └── UnknownEffortError          a Router pick or effort ceiling names an unknown effort
    ├── SeamError (TypeError)           a seam object lacks a member or returned the wrong type
    ├── BudgetError (ValueError)        a budget or scope definition is invalid
    │   ├── ScopeTreeError              a declared tree has a cycle, an orphan, a duplicate
    │   ├── UnknownScopeError           a scope was used before it was opened in the store
    │   └── ScopeConflictError          a scope was reopened with a different definition
    ├── ExclusionError (ValueError)     a cause would cross the permanent/transient tiers
    ├── DeliveryError                   the transport failed to deliver an admitted ask
    ├── StoreError                      a store backend failed (durable fills translate into it)
    └── AdmissionRefused                the budget refused an escalation (a decision, not a bug)
        ├── BudgetExhausted             a ceiling is reached, or the bar is above the confidence
        └── SourceExcluded              the item's source is excluded in either tier

What the application got wrong raises one of these. The two refusals are the exception:
they report what the run decided. A :class:`~buddhi.Store` raises them from ``admit``, and
``aggregate_budget`` turns them into the ``DENIED`` disposition, so ``evaluate_item`` never
lets one escape. They are named for the decision rather than ending in ``Error`` because
the reliability bar (RA-06) names ``BudgetExhausted``.
"""

from buddhi._errors import (
    AdmissionRefused,
    BuddhiError,
    BudgetError,
    BudgetExhausted,
    ConditioningError,
    DeliveryError,
    ExclusionError,
    ItemError,
    ItemTypeError,
    PolicyError,
    ScopeTreeError,
    SeamError,
    StoreError,
    UnknownEffortError,
    UnknownScopeError,
)
from buddhi._exclusions import SourceExcluded
from buddhi._outcomes import ScopeConflictError

__all__ = [
    "AdmissionRefused",
    "BuddhiError",
    "BudgetError",
    "BudgetExhausted",
    "ConditioningError",
    "DeliveryError",
    "ExclusionError",
    "ItemError",
    "ItemTypeError",
    "PolicyError",
    "ScopeConflictError",
    "ScopeTreeError",
    "SeamError",
    "SourceExcluded",
    "StoreError",
    "UnknownEffortError",
    "UnknownScopeError",
]

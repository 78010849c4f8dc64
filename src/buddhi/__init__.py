"""buddhi: the escalation supervisor of seed 002.

Should a person be interrupted, and can we afford it? One composable controller,
:func:`evaluate_item`, runs seven decisions in order over a typed item and returns
one of seven :class:`Disposition` values; the same function judges a stream viewed as
an item, which is the closure (:func:`supervise_stream`,
:func:`supervise_stream_of_streams`). The controller reads from five seams
(:class:`PolicyPack`, :class:`Router`, :class:`Store`, :class:`EscalationTransport`,
:class:`OOBSource`), whose simplest correct fills live in :mod:`buddhi.reference`.

Public submodules: :mod:`buddhi.closure` and :mod:`buddhi.decisions` (the controller),
:mod:`buddhi.stage0` (conditioning), :mod:`buddhi.reference` (the reference pack),
:mod:`buddhi.testing` (``check_store``, ``FakeClock``), :mod:`buddhi.errors`.
"""

from buddhi._asks import Ask, AskOption
from buddhi._budget import (
    GLOBAL_SCOPE,
    Bar,
    BudgetTree,
    GraduatedBar,
    Scope,
    ScopePath,
    ScopeSpec,
)
from buddhi._convergence import ConvergencePolicy, ConvergenceReport
from buddhi._effort import EffortScale, RouterPick, Spend
from buddhi._items import Attempt, Item, Stream
from buddhi._outcomes import Decision, Disposition, InvalidAsk, Outcome, RouteJudgment, StreamReport
from buddhi._seams import (
    Context,
    EscalationTransport,
    OOBSource,
    PolicyPack,
    Resolution,
    Router,
    Seams,
    TriggerHook,
)
from buddhi._store import (
    Admission,
    AdmissionRequest,
    Clock,
    ExclusionCause,
    Exclusions,
    ScopeCounter,
    Store,
    SystemClock,
    Tier,
    assess_admission,
)
from buddhi.closure import evaluate_item, supervise_stream, supervise_stream_of_streams
from buddhi.errors import AdmissionRefused, BuddhiError, BudgetExhausted, SourceExcluded
from buddhi.stage0 import RawInput, condition

__all__ = [
    "GLOBAL_SCOPE",
    "Admission",
    "AdmissionRefused",
    "AdmissionRequest",
    "Ask",
    "AskOption",
    "Attempt",
    "Bar",
    "BuddhiError",
    "BudgetExhausted",
    "BudgetTree",
    "Clock",
    "Context",
    "ConvergencePolicy",
    "ConvergenceReport",
    "Decision",
    "Disposition",
    "EffortScale",
    "EscalationTransport",
    "ExclusionCause",
    "Exclusions",
    "GraduatedBar",
    "InvalidAsk",
    "Item",
    "OOBSource",
    "Outcome",
    "PolicyPack",
    "RawInput",
    "Resolution",
    "RouteJudgment",
    "Router",
    "RouterPick",
    "Scope",
    "ScopeCounter",
    "ScopePath",
    "ScopeSpec",
    "Seams",
    "SourceExcluded",
    "Spend",
    "Store",
    "Stream",
    "StreamReport",
    "SystemClock",
    "Tier",
    "TriggerHook",
    "assess_admission",
    "condition",
    "evaluate_item",
    "supervise_stream",
    "supervise_stream_of_streams",
]

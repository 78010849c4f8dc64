"""blackboard: the board kernel (seed 001).

A model declares regions (append-only levels and versioned premises), registered agents
and an optional admission rule; ``create_model`` opens a run of it on a store. Every
write goes through ``model.control``; ``model.reader`` reads levels, premises, the log,
and the board at any past sequence number. Processes that share a board's work lease
keys with ``control.claim`` (renew, release) and write behind a :class:`Fence`, so a
holder that lost its claim writes nothing (``docs/adr/0006-leased-claims.md``).
``control.judge`` puts a proposal to the admission rule ahead of its write; the
:class:`Judged` it returns is written by ``control.write_all`` on that verdict, so the
rule runs once (``docs/adr/0010-a-write-is-judged-once.md``). ``blackboard.faults`` holds
the named fault points that reliability tests fire.
"""

from blackboard._claims import Claim, Fence
from blackboard._control import BOARD_WRITER, Control, Judged, TerminationPredicate
from blackboard._model import Model, attach, create_model
from blackboard._reader import BoardReader
from blackboard._records import (
    BoardState,
    Contribution,
    Notification,
    Outcome,
    PremiseState,
    Record,
    RecordKind,
    RunStatus,
)
from blackboard._regions import Agent, Level, Premise, Region
from blackboard._writes import (
    Accept,
    AdmissionRule,
    Conflict,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    Reject,
    Rejected,
    RejectionCause,
    WriteResult,
    Written,
)
from blackboard.errors import (
    AdmissionRuleError,
    BlackboardError,
    BoardNotFoundError,
    ContentError,
    IdempotencyKeyError,
    ModelError,
    ModelMismatchError,
    RegionKindError,
    SequenceError,
    StoreConfigError,
    StoreError,
    StoreOutcomeUnknownError,
    UndeclaredRegionError,
    WriterError,
)

__all__ = [
    "BOARD_WRITER",
    "Accept",
    "AdmissionRule",
    "AdmissionRuleError",
    "Agent",
    "BlackboardError",
    "BoardNotFoundError",
    "BoardReader",
    "BoardState",
    "Claim",
    "Conflict",
    "ContentError",
    "Contribution",
    "Control",
    "Fence",
    "IdempotencyKeyError",
    "Judged",
    "Level",
    "Model",
    "ModelError",
    "ModelMismatchError",
    "Notification",
    "Outcome",
    "Premise",
    "PremiseState",
    "ProposedContribution",
    "ProposedPremiseWrite",
    "ProposedWrite",
    "Record",
    "RecordKind",
    "Region",
    "RegionKindError",
    "Reject",
    "Rejected",
    "RejectionCause",
    "RunStatus",
    "SequenceError",
    "StoreConfigError",
    "StoreError",
    "StoreOutcomeUnknownError",
    "TerminationPredicate",
    "UndeclaredRegionError",
    "WriteResult",
    "WriterError",
    "Written",
    "attach",
    "create_model",
]

"""RA-08 model_based_stateful: the board against a pure-Python reference model.

Hypothesis drives random proposals, compare-and-sets (right and stale), grants and
revokes, closes, idempotent repeats and restarts of the kernel (reopening the store);
the reference model predicts every outcome, and after every step the board must equal
the model: same log, gap-free sequence, same premises, grants and run state.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from blackboard import (
    Accept,
    Agent,
    BoardReader,
    Conflict,
    Level,
    Model,
    Premise,
    ProposedContribution,
    ProposedWrite,
    Reject,
    Rejected,
    RejectionCause,
    WriteResult,
    Written,
    create_model,
)
from blackboard.stores import MemoryStore, SQLiteStore, Store
from storekit import sized

AGENTS = ("a1", "a2")
WRITERS = (*AGENTS, "free")
LEVELS = ("l1", "l2", "uniq")
PREMISES = ("p", "guarded")


def rule_no_sevens(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    if isinstance(proposed, ProposedContribution) and proposed.content % 7 == 0:
        return Reject("multiples of seven are refused")
    return Accept()


@dataclass
class Reference:
    """What the board should hold, predicted without the kernel."""

    head: int = 0
    log: list[tuple[int, str, str | None, Any]] = field(default_factory=list)
    levels: dict[str, list[Any]] = field(default_factory=lambda: {n: [] for n in LEVELS})
    premises: dict[str, tuple[Any, int]] = field(default_factory=dict)
    grants: set[tuple[str, str]] = field(default_factory=set)
    closed: bool = False
    keys: dict[str, tuple[str, str, Any, int]] = field(default_factory=dict)

    def append(self, kind: str, region: str | None, content: Any) -> int:
        self.head += 1
        self.log.append((self.head, kind, region, content))
        return self.head


def _declare(store: Store) -> Model:
    return create_model(
        regions=[
            Level("l1"),
            Level("l2"),
            Level("uniq", unique=True),
            Premise("p"),
            Premise("guarded", guarded=True),
        ],
        premises={"p": 0, "guarded": 0},
        agents=[Agent("a1", writes_to=["l1", "guarded"]), Agent("a2", writes_to=["l2"])],
        admission_rule=rule_no_sevens,
        store=store,
        board_id="stateful",
    )


class BoardMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.memory = MemoryStore()
        self.store = self._store()
        self.model = _declare(self.store)
        self.ref = Reference()
        for name in PREMISES:
            self.ref.premises[name] = (0, 1)
            self.ref.append("premise", name, 0)
        for agent, region in (("a1", "l1"), ("a1", "guarded"), ("a2", "l2")):
            self.ref.grants.add((agent, region))
            self.ref.append("grant", region, {"agent": agent})

    def _store(self) -> Store:
        if self.backend == "memory":
            return self.memory
        return SQLiteStore(Path(self.tmp.name) / "b.db", synchronous="NORMAL")

    def teardown(self) -> None:
        self.store.close()
        self.tmp.cleanup()

    # -- rules ---------------------------------------------------------------------

    @rule(
        writer=st.sampled_from(WRITERS),
        level=st.sampled_from(LEVELS),
        content=st.integers(0, 30),
        key=st.none() | st.sampled_from(["k1", "k2", "k3"]),
    )
    def propose_level(self, writer: str, level: str, content: int, key: str | None) -> None:
        expected = self._predict_level(writer, level, content, key)
        if expected == "key-reused":
            with pytest.raises(Exception, match="already used"):
                self.model.control.write(writer, level, content, idempotency_key=key)
            return
        result = self.model.control.write(writer, level, content, idempotency_key=key)
        assert result == expected, (writer, level, content, key)

    def _predict_level(self, writer: str, level: str, content: int, key: str | None) -> Any:
        ref = self.ref
        if key is not None and key in ref.keys:
            if ref.keys[key][:3] != (writer, level, content):
                return "key-reused"
            return Written(ref.keys[key][3], repeat=True)
        cause = self._refusal(writer, level, check_permission=True)
        if cause is None and content % 7 == 0:
            cause = RejectionCause.ADMISSION
        if cause is None and level == "uniq" and content in ref.levels["uniq"]:
            cause = RejectionCause.DUPLICATE
        if cause is not None:
            return _rejected(cause)
        ref.levels[level].append(content)
        sequence = ref.append("level", level, content)
        if key is not None:
            ref.keys[key] = (writer, level, content, sequence)
        return Written(sequence)

    def _refusal(self, writer: str, region: str, check_permission: bool) -> RejectionCause | None:
        if self.ref.closed:
            return RejectionCause.RUN_CLOSED
        if check_permission and writer in AGENTS and (writer, region) not in self.ref.grants:
            return RejectionCause.NOT_PERMITTED
        return None

    @rule(
        writer=st.sampled_from(WRITERS),
        premise=st.sampled_from(PREMISES),
        value=st.integers(-5, 5),
        stale=st.booleans(),
    )
    def propose_cas(self, writer: str, premise: str, value: int, stale: bool) -> None:
        _, version = self.ref.premises[premise]
        expected_version = version - 1 if stale and version > 1 else version
        result = self.model.control.set_premise(
            writer, premise, value, expected_version=expected_version
        )
        cause = self._refusal(writer, premise, check_permission=premise == "guarded")
        if cause is not None:
            assert result == _rejected(cause)
        elif expected_version != version:
            assert result == Conflict(version)
        else:
            sequence = self.ref.append("premise", premise, value)
            self.ref.premises[premise] = (value, version + 1)
            assert result == Written(sequence, version + 1)

    @rule(agent=st.sampled_from(AGENTS), region=st.sampled_from(LEVELS + PREMISES))
    def grant(self, agent: str, region: str) -> None:
        self._permission("grant", agent, region)

    @rule(agent=st.sampled_from(AGENTS), region=st.sampled_from(LEVELS + PREMISES))
    def revoke(self, agent: str, region: str) -> None:
        self._permission("revoke", agent, region)

    def _permission(self, kind: str, agent: str, region: str) -> None:
        call = self.model.control.grant if kind == "grant" else self.model.control.revoke
        result = call(agent, region)
        if self.ref.closed:
            assert result == _rejected(RejectionCause.RUN_CLOSED)
            return
        sequence = self.ref.append(kind, region, {"agent": agent})
        if kind == "grant":
            self.ref.grants.add((agent, region))
        else:
            self.ref.grants.discard((agent, region))
        assert result == Written(sequence)

    @precondition(lambda self: not self.ref.closed)
    @rule(reason=st.sampled_from(["stop", "operator", ""]))
    def close_run(self, reason: str) -> None:
        outcome = self.model.control.abort(reason)
        self.ref.closed = True
        sequence = self.ref.append("close", None, {"status": "aborted", "reason": reason})
        assert outcome.sequence == sequence

    @rule()
    def restart_kernel(self) -> None:
        self.model.close()
        if self.store is not self.memory:
            self.store.close()
        self.store = self._store()
        self.model = _declare(self.store)

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def board_equals_model(self) -> None:
        log = self.model.reader.log()
        assert [r.sequence for r in log] == list(range(1, len(log) + 1)), "sequence has gaps"
        got = [(r.sequence, r.kind.value, r.region, r.content) for r in log]
        assert got == self.ref.log
        state = self.model.reader.state()
        assert {k: [c.content for c in v] for k, v in state.levels.items()} == self.ref.levels
        assert {k: (p.value, p.version) for k, p in state.premises.items()} == self.ref.premises
        assert set(state.permissions) == self.ref.grants
        assert state.outcome.closed == self.ref.closed


def _rejected(cause: RejectionCause) -> Any:
    class _Cause:
        def __eq__(self, other: object) -> bool:
            return isinstance(other, Rejected) and other.cause is cause

        def __repr__(self) -> str:
            return f"Rejected({cause})"

    return _Cause()


class MemoryBoardMachine(BoardMachine):
    backend = "memory"


class SQLiteBoardMachine(BoardMachine):
    backend = "sqlite"


_SETTINGS = settings(
    max_examples=sized(200, 2000),
    stateful_step_count=sized(50, 100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestMemoryBoard = MemoryBoardMachine.TestCase
TestMemoryBoard.settings = _SETTINGS
TestSQLiteBoard = SQLiteBoardMachine.TestCase
TestSQLiteBoard.settings = _SETTINGS


class BrokenCasMachine(MemoryBoardMachine):
    """Negative control: a board whose compare-and-set ignores the expected version."""

    def __init__(self) -> None:
        super().__init__()
        real = self.model.control.set_premise

        def unguarded(
            writer: str,
            premise: str,
            value: Any,
            *,
            expected_version: int,
            idempotency_key: str | None = None,
        ) -> WriteResult:
            current = self.model.reader.read_premise(premise).version
            return real(
                writer, premise, value, expected_version=current, idempotency_key=idempotency_key
            )

        # the negative control swaps the method on this one Control instance
        self.model.control.set_premise = unguarded  # type: ignore[method-assign]


_NEGATIVE = settings(max_examples=200, stateful_step_count=30, deadline=None, database=None)


def test_the_machine_catches_a_cas_without_a_version_guard() -> None:
    case = BrokenCasMachine.TestCase  # settings is a class variable: set it on the class
    case.settings = _NEGATIVE
    test = case("runTest")
    with pytest.raises(AssertionError):
        test.runTest()

"""Declaring a model and opening (or reopening) a run of it on a store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from blackboard._control import (
    BOARD_WRITER,
    DEFAULT_MAX_CONTENT_BYTES,
    Control,
    TerminationPredicate,
)
from blackboard._json import encode
from blackboard._reader import BoardReader
from blackboard._records import Outcome, RecordKind
from blackboard._regions import Agent, Level, Premise, Region
from blackboard._writes import AdmissionRule
from blackboard.errors import (
    BoardNotFoundError,
    ModelError,
    ModelMismatchError,
    UndeclaredRegionError,
)
from blackboard.stores import PendingWrite, Store, open_store

__all__ = ["Model", "attach", "create_model"]

DEFAULT_BOARD_ID = "default"


class Model:
    """One run of a declared model on a store: its board's control, reader and control loop.

    Attributes:
        board_id: The run's board in the store.
        store: Where the board lives.
        regions: The declared regions by name.
        agents: The registered agents by name.
        control: The single write path.
        reader: The read side.
    """

    def __init__(
        self,
        store: Store,
        board_id: str,
        regions: Mapping[str, Region],
        agents: Mapping[str, Agent],
        control: Control,
        reader: BoardReader,
        owns_store: bool,
    ) -> None:
        self.store = store
        self.board_id = board_id
        self.regions = regions
        self.agents = agents
        self.control = control
        self.reader = reader
        self._owns_store = owns_store

    def run(self) -> Outcome:
        """Run the classic blackboard control loop until the run closes.

        Every agent is told of the writes already on the board to the regions it
        subscribes to; each write an agent makes in answer wakes the agents watching
        that region, in sequence order. The loop ends when the termination predicate
        closes the run, the application aborts it, or nothing is left to happen, in
        which case the run closes as quiescent.
        """
        self.control.catch_up()
        if not self.control.outcome().closed:
            self.control.quiesce("no agent had anything left to do")
        return self.control.outcome()

    def close(self) -> None:
        """Release the store if this model opened it (the run itself stays as it is)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_model(
    regions: Iterable[Region],
    premises: Mapping[str, Any] | None = None,
    agents: Iterable[Agent] = (),
    admission_rule: AdmissionRule | None = None,
    termination_predicate: TerminationPredicate | None = None,
    store: str | Store | None = None,
    board_id: str | None = None,
    *,
    agents_only: bool = False,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
) -> Model:
    """Declare a model and open a run of it, creating the board or reopening a stored one.

    Args:
        regions: The levels and premises.
        premises: Every declared premise's opening value, once.
        agents: Registered writers; a level write by one outside its ``writes_to`` is
            ``NOT_PERMITTED``. Writers no agent names are not permission-checked.
        admission_rule: ``rule(proposed, reader) -> Accept() | Reject(why)``; none accepts all.
        termination_predicate: ``done(reader) -> bool``, asked after every accepted write;
            when true the run closes as completed.
        store: ``None`` (memory), ``"sqlite:///path.db"``, ``"postgresql://..."`` or a Store.
        board_id: Which board in the store; reopening an existing one resumes it.
        agents_only: Refuse writers that no agent declaration names.
        max_content_bytes: The largest contribution or premise value, as canonical JSON,
            that a write may carry (1 MiB by default); larger is a ContentError.

    Raises:
        ModelError: The declaration is inconsistent, or differs from the stored run's.
        UndeclaredRegionError: A premise value or an agent names an undeclared region.
    """
    declared = _regions(regions)
    registered = _agents(agents, declared)
    openings = _openings(declared, premises or {})
    bid = _board_id(board_id)
    opened = open_store(store)
    return _open_run(
        opened,
        opened is not store,
        bid,
        declared,
        registered,
        openings,
        admission_rule=admission_rule,
        termination_predicate=termination_predicate,
        agents_only=agents_only,
        max_content_bytes=max_content_bytes,
    )


def _open_run(
    opened: Store,
    owns_store: bool,
    bid: str,
    declared: dict[str, Region],
    registered: dict[str, Agent],
    openings: dict[str, str],
    *,
    admission_rule: AdmissionRule | None,
    termination_predicate: TerminationPredicate | None,
    agents_only: bool,
    max_content_bytes: int,
) -> Model:
    """Open (or create) the run on a store already open; close it on failure if owned."""
    try:
        declaration = _declaration(declared, registered)
        stored = opened.open_board(bid, declaration, _opening_writes(openings, registered))
        if stored != declaration:
            raise ModelMismatchError(bid, stored, declaration)
    except BaseException:
        if owns_store:
            opened.close()
        raise
    reader = BoardReader(opened, bid, declared)
    control = Control(
        opened,
        bid,
        declared,
        registered,
        reader,
        admission_rule=admission_rule,
        termination_predicate=termination_predicate,
        agents_only=agents_only,
        max_content_bytes=_positive(max_content_bytes),
    )
    return Model(opened, bid, declared, registered, control, reader, owns_store)


def attach(
    store: str | Store,
    board_id: str | None = None,
    *,
    admission_rule: AdmissionRule | None = None,
    termination_predicate: TerminationPredicate | None = None,
    agents_only: bool = False,
) -> Model:
    """Open an existing run with the regions and agents it was created with.

    For processes that serve or inspect a run they did not declare (an inbox, a
    monitor). Agents come back without ``notify``; the rule and predicate are this
    process's own, since a rule is code and the board keeps only data.

    Raises:
        BoardNotFoundError: The store holds no such board (nothing is created).
    """
    bid = _board_id(board_id)
    opened = open_store(store)
    try:
        stored = opened.declaration(bid)
        if stored is None:
            raise BoardNotFoundError(bid)
        regions, agents = _parse_declaration(stored)
        declared = _regions(regions)
        registered = _agents(agents, declared)
        openings = _openings(declared, {r.name: None for r in regions if isinstance(r, Premise)})
    except BaseException:
        if opened is not store:
            opened.close()
        raise
    return _open_run(
        opened,
        opened is not store,
        bid,
        declared,
        registered,
        openings,
        admission_rule=admission_rule,
        termination_predicate=termination_predicate,
        agents_only=agents_only,
        max_content_bytes=DEFAULT_MAX_CONTENT_BYTES,
    )


def _parse_declaration(text: str) -> tuple[list[Region], list[Agent]]:
    document = json.loads(text)
    regions: list[Region] = [
        Level(name, unique=flag) if kind == "level" else Premise(name, guarded=bool(flag))
        for name, kind, flag in document["regions"]
    ]
    agents = [Agent(name, writes_to=tuple(writes)) for name, writes in document["agents"]]
    return regions, agents


def _regions(regions: Iterable[Region]) -> dict[str, Region]:
    declared: dict[str, Region] = {}
    for region in regions:
        if not isinstance(region, Level | Premise):
            raise ModelError(
                f"{region!r} is not a region; declare Level('name') or Premise('name')"
            )
        _check_name(region.name, "region")
        if region.name in declared:
            raise ModelError(f"region {region.name!r} is declared twice; give each a distinct name")
        if isinstance(region, Level) and not isinstance(region.unique, bool | str):
            raise ModelError(f"Level {region.name!r}: unique must be True, False or a key name")
        declared[region.name] = region
    if not declared:
        raise ModelError("a model needs at least one region; pass regions=[Level('...')]")
    return declared


def _agents(agents: Iterable[Agent], regions: Mapping[str, Region]) -> dict[str, Agent]:
    registered: dict[str, Agent] = {}
    for agent in agents:
        if not isinstance(agent, Agent):
            raise ModelError(f"{agent!r} is not an Agent; declare Agent('name', writes_to=[...])")
        _check_name(agent.name, "agent")
        if agent.name in registered:
            raise ModelError(f"agent {agent.name!r} is declared twice")
        for name in (*agent.writes_to, *agent.subscribes_to):
            if name not in regions:
                raise UndeclaredRegionError(name, tuple(regions))
        if agent.notify is not None and not callable(agent.notify):
            raise ModelError(f"agent {agent.name!r}: notify must be callable")
        registered[agent.name] = agent
    return registered


def _openings(regions: Mapping[str, Region], premises: Mapping[str, Any]) -> dict[str, str]:
    if not isinstance(premises, Mapping):
        raise ModelError("premises must be a mapping of premise name to opening value")
    for name in premises:
        region = regions.get(name)
        if region is None:
            raise UndeclaredRegionError(name, tuple(regions))
        if not isinstance(region, Premise):
            raise ModelError(f"{name!r} is a level; only premises take an opening value")
    missing = [n for n, r in regions.items() if isinstance(r, Premise) and n not in premises]
    if missing:
        raise ModelError(
            f"premises {missing} have no opening value; pass premises={{name: value}} for each"
        )
    return {
        name: encode(value, f"opening value of premise {name!r}")
        for name, value in premises.items()
    }


def _opening_writes(openings: Mapping[str, str], agents: Mapping[str, Agent]) -> list[PendingWrite]:
    writes = [PendingWrite(RecordKind.PREMISE, n, BOARD_WRITER, v) for n, v in openings.items()]
    for agent in agents.values():
        grant = encode({"agent": agent.name}, "grant")
        writes += [PendingWrite(RecordKind.GRANT, r, BOARD_WRITER, grant) for r in agent.writes_to]
    return writes


def _declaration(regions: Mapping[str, Region], agents: Mapping[str, Agent]) -> str:
    document = {
        "regions": [
            [r.name, r.kind, r.unique if isinstance(r, Level) else r.guarded]
            for r in regions.values()
        ],
        "agents": [[a.name, sorted(a.writes_to)] for a in agents.values()],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def _positive(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ModelError(f"max_content_bytes={limit!r} must be a positive number of bytes")
    return limit


def _board_id(board_id: str | None) -> str:
    if board_id is None:
        return DEFAULT_BOARD_ID
    _check_name(board_id, "board_id")
    return board_id


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name or name.startswith("@") or len(name) > 200:
        raise ModelError(
            f"{what} name {name!r} is invalid; use a non-empty string of at most 200 characters "
            "not starting with '@'"
        )

"""Attaching to a run another process declared: the inbox serves boards it did not create.

The kernel keeps each board's declaration (its regions and agents); the inbox reads it
back and opens the run with the same declaration, so the store agrees it is the same
model. The inbox's own writes then go through the human loop's admission rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from blackboard import (
    Agent,
    Level,
    Model,
    Premise,
    Region,
    StoreError,
    create_model,
)
from blackboard.stores import open_store
from pybb.human import HUMAN_REGIONS, answer_rule
from pybb.inbox._errors import BoardNotFoundError

__all__ = ["attach_run"]

_DEFAULT_BOARD = "default"


def attach_run(store: str, board_id: str | None = None) -> Model:
    """Open an existing run with a human loop, to serve its inbox.

    Args:
        store: The store URL, e.g. ``"sqlite:///run.db"``.
        board_id: The run's board id (``None``: the kernel's default board).

    Raises:
        BoardNotFoundError: The store has no such board, or the run declares no human loop.
        StoreConfigError, StoreError: The store cannot be opened.
    """
    bid = board_id or _DEFAULT_BOARD
    _check_file(store, bid)
    opened = open_store(store)
    try:
        regions, agents = _declared(opened, bid)
        _check_human_loop(bid, regions)
        premises = {
            r.name: opened.read_premise(bid, r.name) for r in regions if r.kind == "premise"
        }
        openings = {name: (r.content if r is not None else None) for name, r in premises.items()}
        return create_model(
            regions=regions,
            premises=openings,
            agents=agents,
            admission_rule=answer_rule,
            store=opened,
            board_id=bid,
        )
    except BaseException:
        opened.close()
        raise


def _check_file(store: str, board_id: str) -> None:
    """Refuse a SQLite file that does not exist, rather than create an empty one."""
    parts = urlsplit(store) if isinstance(store, str) else None
    if parts is None or parts.scheme != "sqlite" or parts.path in ("", "/"):
        return
    path = Path(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if not path.exists():
        raise BoardNotFoundError(
            board_id, f"there is no SQLite file {str(path)!r}; start the run first"
        )


def _declared(store: Any, board_id: str) -> tuple[list[Region], list[Agent]]:
    try:
        store.head(board_id)
    except StoreError as exc:
        raise BoardNotFoundError(
            board_id,
            f"the store has no board {board_id!r}; start the run first, or pass the "
            "--board-id it was created with",
        ) from exc
    # The board exists, so open_board returns its stored declaration and writes nothing.
    document = json.loads(store.open_board(board_id, "", ()))
    regions: list[Region] = [
        Level(name, unique=flag) if kind == "level" else Premise(name, guarded=bool(flag))
        for name, kind, flag in document["regions"]
    ]
    agents = [Agent(name, writes_to=tuple(writes)) for name, writes in document["agents"]]
    return regions, agents


def _check_human_loop(board_id: str, regions: list[Region]) -> None:
    declared = {r.name: r for r in regions}
    missing = [r.name for r in HUMAN_REGIONS if declared.get(r.name) != r]
    if missing:
        raise BoardNotFoundError(
            board_id,
            f"run {board_id!r} declares no human loop (missing {missing}); declare "
            "pybb.human.HUMAN_REGIONS in its model to serve an inbox for it",
        )

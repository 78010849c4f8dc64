"""Attaching to a run another process declared: the inbox serves boards it did not create.

The kernel keeps each board's declaration (its regions and agents); ``blackboard.attach``
opens the run with it, so the store agrees it is the same model. The inbox's own writes
then go through the human loop's admission rule.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from blackboard import BoardNotFoundError as KernelBoardNotFoundError
from blackboard import Model, Region, attach
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
    try:
        model = attach(store, bid, admission_rule=answer_rule)
    except KernelBoardNotFoundError as exc:
        raise BoardNotFoundError(
            bid,
            f"the store has no board {bid!r}; start the run first, or pass the "
            "--board-id it was created with",
        ) from exc
    try:
        _check_human_loop(bid, list(model.regions.values()))
    except BaseException:
        model.close()
        raise
    return model


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


def _check_human_loop(board_id: str, regions: list[Region]) -> None:
    declared = {r.name: r for r in regions}
    missing = [r.name for r in HUMAN_REGIONS if declared.get(r.name) != r]
    if missing:
        raise BoardNotFoundError(
            board_id,
            f"run {board_id!r} declares no human loop (missing {missing}); declare "
            "pybb.human.HUMAN_REGIONS in its model to serve an inbox for it",
        )

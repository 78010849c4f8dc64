"""``pybb worker --app attest``: the other half of ``pybb attest --submit``.

The application ``attest`` of ``pybb.cli.worker.APPS``: the attestation decision tree
(``pybb.attestation``) on a board that ``pybb attest --submit`` (or ``pybb attest``)
created. The fleet is the one the board names: a demo fleet (``demo-<n>-seed-<seed>``)
is generated again, identically, on the worker; a fleet folder is given with
``--app-option fleet=PATH`` (every worker needs its evidence files). A board created with
``--inbox`` holds the human loop: each worker's escalations then go through the buddhi
supervisor as they happen and become asks, the budget kept on the run's own board, so
admission stays atomic across workers.
"""

from __future__ import annotations

import re

from blackboard import BlackboardError, attach
from pybb import AppContext, Controller
from pybb.attestation import FLEET, Attestation, generate_fleet, load_fleet
from pybb.errors import PybbError
from pybb.human import ASKS

__all__ = ["attest_app"]

_DEMO = re.compile(r"demo-(\d+)-seed-(-?\d+)")


def attest_app(context: AppContext) -> Controller:
    """The attestation tree's controller for the board ``pybb attest`` wrote.

    Supervised (``SupervisedAttestation``'s controller, its supervisor bound) when the
    board holds the human loop; the plain ``Attestation`` controller otherwise.
    """
    name, supervised = _board(context)
    folder = context.options.get("fleet")
    if folder is not None:
        fleet = load_fleet(folder)
    else:
        demo = _DEMO.fullmatch(name)
        if demo is None:
            raise PybbError(
                f"board {context.board_id!r} attests fleet {name!r}, not a demo fleet; give "
                "its folder with --app-option fleet=PATH"
            )
        fleet = generate_fleet(int(demo[1]), seed=int(demo[2]))
    if not supervised:
        return Attestation(fleet, store=context.store, board_id=context.board_id).controller
    # Imported here: a plain attestation worker does not load buddhi.
    from pybb.supervision.attestation import SupervisedAttestation

    session = SupervisedAttestation(fleet, store=context.store, board_id=context.board_id)
    return session.attestation.controller


def _board(context: AppContext) -> tuple[str, bool]:
    """The fleet's name the board records, and whether the board holds the human loop."""
    model = attach(context.store, context.board_id)
    try:
        identity = model.reader.read_premise(FLEET).value
        supervised = ASKS in model.regions
    except BlackboardError as exc:
        raise PybbError(
            f"board {context.board_id!r} is not an attestation board ({exc}); run "
            "pybb attest --submit --store ... --board-id ... first"
        ) from exc
    finally:
        model.close()
    name = identity.get("name") if isinstance(identity, dict) else None
    if not isinstance(name, str):
        raise PybbError(f"board {context.board_id!r} names no fleet ({identity!r:.80})")
    return name, supervised

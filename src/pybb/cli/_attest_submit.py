"""``pybb attest --submit``: write a fleet's devices for ``pybb worker`` processes, run nothing.

With ``--inbox`` the board also declares the human loop (its regions, premises and the
asks' budget, as ``pybb.supervision.attestation.SupervisedAttestation`` does), so the
workers' ``attest`` application supervises escalations as they happen and the inbox
can serve their asks. The report, and the inbox, come from the same ``pybb attest``
command without ``--submit`` once the workers are done.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from blackboard import BlackboardError, ModelMismatchError
from pybb.attestation import Attestation, Fleet, save_fleet
from pybb.cli._attest_shared import board_mismatch, fleet_of, store_problem
from pybb.errors import PybbError

__all__ = ["run_submit"]


def run_submit(args: argparse.Namespace) -> int:
    """Run ``pybb attest --submit``; return its exit status."""
    errors = Console(stderr=True, highlight=False)
    command = "pybb attest --submit" + (" --inbox" if args.inbox else "")
    problem = store_problem(args.store)
    if problem is not None:
        errors.print(f"{command}: {problem}", markup=False, soft_wrap=True)
        return 2
    try:
        fleet = fleet_of(args)
    except (PybbError, ValueError, OSError) as exc:
        errors.print(f"{command}: {exc}", markup=False, soft_wrap=True)
        return 2
    board_id = args.board_id or f"attest-{fleet.name}"
    try:
        with _board(fleet, args, board_id) as attestation:
            if args.save_fleet is not None:
                save_fleet(fleet, args.save_fleet)
                print(f"fleet written to {args.save_fleet}")
            written = attestation.submit()
    except ModelMismatchError:
        problem = board_mismatch(args.store, board_id, inbox=args.inbox)
        errors.print(f"{command}: {problem}", markup=False, soft_wrap=True)
        return 2
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        errors.print(f"{command}: {exc}", markup=False, soft_wrap=True)
        return 2
    on_board = len(fleet.devices) - written
    # Plain print: a console would wrap the commands, and they are meant to be copied.
    already = f" ({on_board} were on it already)" if on_board else ""
    print(
        f"submitted {written} devices of fleet {fleet.name} to board {board_id!r} in "
        f"{args.store}{already}; nothing was attested here."
    )
    print("Start workers (on each worker machine, as many as you like):")
    print(f"  {_worker_command(args, board_id)}")
    print("Once every worker has ended, the report" + (" and the inbox:" if args.inbox else ":"))
    print(f"  {_report_command(args, board_id)}")
    return 0


@contextmanager
def _board(fleet: Fleet, args: argparse.Namespace, board_id: str) -> Iterator[Attestation]:
    if not args.inbox:
        with Attestation(fleet, store=args.store, board_id=board_id) as attestation:
            yield attestation
        return
    # Built as the attest command builds it, so the budget is installed on the board
    # before any worker admits an ask against it.
    from pybb.supervision.attestation import SupervisedAttestation

    with SupervisedAttestation(fleet, store=args.store, board_id=board_id) as session:
        yield session.attestation


def _worker_command(args: argparse.Namespace, board_id: str) -> str:
    words = ["pybb", "worker", "--store", args.store, "--run", board_id, "--app", "attest"]
    if args.folder is not None:
        words += ["--app-option", f"fleet={args.folder.resolve()}"]
    return shlex.join(words)


def _report_command(args: argparse.Namespace, board_id: str) -> str:
    words = ["pybb", "attest"]
    words += [str(args.folder)] if args.folder is not None else ["--demo", str(args.demo)]
    if args.demo is not None and args.seed:
        words += ["--seed", str(args.seed)]
    words += ["--store", args.store, "--board-id", board_id]
    if args.inbox:
        words.append("--inbox")
    return shlex.join(words)

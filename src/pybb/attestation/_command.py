"""``pybb attest``: attest a fleet folder, or a generated demo fleet, on a durable board.

The board is kept in SQLite, by default in ``pybb-attest.db`` in the current directory,
one board per fleet (``attest-<fleet name>``): running the same command again resumes a
run that was stopped, or re-reads a finished one, and writes the same report.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from blackboard import BlackboardError, ModelMismatchError, attach
from pybb.attestation._fleet import Fleet, load_fleet, save_fleet
from pybb.attestation._fleet_errors import FleetError
from pybb.attestation._generate import generate_fleet
from pybb.attestation._report import DeviceOutcome, FleetReport
from pybb.attestation._tree import FLEET, Attestation
from pybb.errors import PybbError

__all__ = [
    "DEFAULT_REPORT",
    "DEFAULT_STORE",
    "board_mismatch",
    "register",
    "run_attest",
    "store_problem",
    "workers_busy",
]

DEFAULT_STORE = "sqlite:///pybb-attest.db"
"""Where ``pybb attest`` keeps its boards unless told otherwise (the current directory)."""
DEFAULT_REPORT = "pybb-report.json"
"""Where ``pybb attest`` writes its JSON report unless told otherwise."""

_DESCRIPTION = """\
Attest a fleet of devices on the outcome-routed decision tree: the cheap check compares
each device's quoted PCRs with its class's reference values; a device that fails it goes
to the attribution tier (replays its event log event by event, names what differs from
the reference manifest, repairs what the allowlist sanctions), one that passes to the
verification tier (replays the whole log against the quote, reads Secure Boot, applies
the denylist). What neither tier can pass is escalated with the tier's report.

Give a fleet FOLDER (classes/*.json, devices/*.json, logs/, optional truth.json) or
--demo N to generate N devices with known ground truth from the bundled real logs.
The board lives in SQLite (default: pybb-attest.db here); run the same command again
to resume an interrupted run. Exit status: 0 done, 1 a device with ground truth landed
elsewhere than expected, 2 the fleet or the store cannot be used.

To share the work among `pybb worker` processes, --submit writes the devices to the
board and attests nothing (with --inbox, the board also holds the human loop); once
every worker has ended, the same command without --submit writes the report (with
--inbox, serves the asks the workers' escalations made and applies the answers).
"""


def register(subparsers: Any) -> None:
    """Add the ``attest`` subcommand."""
    parser = subparsers.add_parser(
        "attest",
        help="attest a fleet (or a generated demo fleet) on the attestation decision tree",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", nargs="?", type=Path, help="a fleet folder")
    parser.add_argument(
        "--demo", type=int, metavar="N", help="generate N devices from the bundled real logs"
    )
    parser.add_argument("--seed", type=int, default=0, help="the demo fleet's seed (default 0)")
    parser.add_argument(
        "--store", default=DEFAULT_STORE, help=f"the board's store (default {DEFAULT_STORE})"
    )
    parser.add_argument("--board-id", help="the board in the store (default attest-<fleet>)")
    parser.add_argument(
        "--report",
        type=Path,
        default=Path(DEFAULT_REPORT),
        help=f"where to write the JSON report (default {DEFAULT_REPORT})",
    )
    parser.add_argument(
        "--save-fleet", type=Path, metavar="DIR", help="also write the fleet to DIR"
    )
    parser.add_argument(
        "--examples", type=int, default=1, help="reports printed per escalation reason (default 1)"
    )
    parser.add_argument(
        "--chunk",
        type=int,
        help="devices per controller run (default 5 %% of the fleet, 25 to 250)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--submit",
        action="store_true",
        help="only write the devices to the board for `pybb worker --app attest` processes "
        "(attests nothing) and print the commands to run next",
    )
    parser.add_argument(
        "--inbox",
        action="store_true",
        help="also serve the run's inbox on 127.0.0.1 and apply answers until Ctrl-C "
        "(escalations go through the buddhi supervisor; needs mrpybb[inbox]); with "
        "--submit, only declare the human loop for the workers",
    )
    parser.add_argument(
        "--inbox-port", type=int, default=8765, help="the inbox's port (default 8765; 0: any)"
    )
    parser.add_argument(
        "--inbox-human",
        action="append",
        default=[],
        metavar="NAME",
        help="print an inbox token for this person (repeatable; default: operator)",
    )
    parser.set_defaults(handler=run_attest)
    from pybb.attestation._policy_command import hook as policy_hook  # policy, show
    from pybb.attestation._verify_command import hook  # enroll, revoke, challenge, verify

    hook(parser)
    policy_hook(parser)


def run_attest(args: argparse.Namespace) -> int:
    """Run ``pybb attest``; return its exit status."""
    if getattr(args, "submit", False):
        from pybb.attestation._submit import run_submit

        return run_submit(args)
    if getattr(args, "inbox", False):
        from pybb.supervision._attest_command import run_attest_inbox

        return run_attest_inbox(args)
    console = Console(highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        fleet = _fleet(args)
        if args.save_fleet is not None:
            save_fleet(fleet, args.save_fleet)
            console.print(f"fleet written to {args.save_fleet}")
        board_id = args.board_id or f"attest-{fleet.name}"
        attestation = Attestation(fleet, store=args.store, board_id=board_id, chunk_size=args.chunk)
    except ModelMismatchError:
        problem = board_mismatch(args.store, board_id)
        errors.print(f"pybb attest: {problem}", markup=False, soft_wrap=True)
        return 2
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        errors.print(f"pybb attest: {exc}", markup=False)
        return 2
    busy = workers_busy(attestation)
    if busy is not None:
        attestation.close()
        errors.print(f"pybb attest: {busy}", markup=False, soft_wrap=True)
        return 2
    with attestation:
        console.print(
            f"attesting fleet [bold]{fleet.name}[/]: {len(fleet.devices)} devices, "
            f"{len(fleet.classes)} classes; board {attestation.board_id!r} in {args.store}"
        )
        started = time.perf_counter()
        report = _run(attestation, errors, args.no_progress)
        seconds = time.perf_counter() - started
    _print(console, report, args.examples)
    data = {"store": args.store, "board_id": attestation.board_id, **report.to_json()}
    try:
        args.report.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        errors.print(f"pybb attest: cannot write the report {args.report}: {exc}", markup=False)
        return 2
    rate = len(fleet.devices) / seconds if seconds > 0 else 0.0
    console.print(
        f"{len(fleet.devices)} devices in {seconds:.1f} s ({rate:,.0f}/s); "
        f"report written to {args.report}; run the same command again to resume or re-read."
    )
    accuracy = report.accuracy
    return 0 if accuracy is None or accuracy == 1.0 else 1


def _fleet(args: argparse.Namespace) -> Fleet:
    if (args.folder is None) == (args.demo is None):
        raise FleetError("give a fleet FOLDER or --demo N (one of them)", hint="see pybb attest -h")
    if args.demo is not None:
        if args.demo < 1:
            raise FleetError(f"--demo needs a positive number of devices, got {args.demo}")
        return generate_fleet(args.demo, seed=args.seed)
    return load_fleet(args.folder)


def store_problem(store: object) -> str | None:
    """Why other processes could not open ``store`` (``None``: they can)."""
    if isinstance(store, str) and store.startswith(("sqlite:", "postgresql:", "postgres:")):
        return None
    return (
        f"--store {store!r} is not a store other processes can open; give a "
        "postgresql://... URL (or sqlite:///path.db for workers on this machine)"
    )


def board_mismatch(store: str, board_id: str, *, inbox: bool = False) -> str:
    """Why the board was declared otherwise than ``pybb attest [--inbox]`` declares it.

    One line that says what to do instead: the kernel's own message carries both
    declarations in full, which tells a person little.
    """
    from pybb.human import ASKS

    try:
        model = attach(store, board_id)
    except BlackboardError:
        regions: set[str] = set()
    else:
        regions = set(model.regions)
        model.close()
    if FLEET not in regions:
        return (
            f"board {board_id!r} in {store} is not an attestation board; give another "
            "--board-id or --store"
        )
    if inbox and ASKS not in regions:
        return (
            f"board {board_id!r} was attested or submitted without --inbox, so it holds no "
            "human loop; drop --inbox, or attest again on another --board-id or --store"
        )
    if not inbox and ASKS in regions:
        return (
            f"board {board_id!r} holds the human loop (it was attested or submitted with "
            "--inbox); add --inbox, or give another --board-id or --store"
        )
    return (
        f"board {board_id!r} was created by another version of pybb attest (its regions "
        "differ); give another --board-id or --store"
    )


def workers_busy(attestation: Attestation) -> str | None:
    """Why this process must not attest the board now: workers hold live claims on it.

    A controller here would work the devices the workers hold without their fences;
    lapsed claims (a killed worker's) do not count, their devices are done here instead.
    """
    now = datetime.now(UTC)
    live = [c for c in attestation.blackboard.model.reader.claims() if c.expires > now]
    if not live:
        return None
    holders = sorted({claim.holder for claim in live})
    return (
        f"{len(holders)} worker(s) (e.g. {holders[0]}) are still attesting board "
        f"{attestation.board_id!r}, {len(live)} device(s) claimed; run this again once every "
        "pybb worker has ended (each prints one line when it does)"
    )


def _run(attestation: Attestation, errors: Console, quiet: bool) -> FleetReport:
    if quiet or not errors.is_terminal:
        return attestation.run()
    columns = (
        TextColumn("attesting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=errors, transient=False) as progress:
        task = progress.add_task("attest", total=len(attestation.fleet.devices))
        update: Callable[[int, int], None] = lambda done, total: progress.update(  # noqa: E731
            task, completed=done
        )
        return attestation.run(update)


def _print(console: Console, report: FleetReport, examples: int) -> None:
    console.print(_summary(report))
    if report.accuracy is not None:
        console.print(_accuracy(report))
    shown: Counter[str] = Counter()
    for result in report.devices:
        if result.outcome is not DeviceOutcome.ESCALATED or result.report is None:
            continue
        reason = result.reason.value if result.reason else "?"
        if shown[reason] < examples:
            shown[reason] += 1
            console.print(result.report.text(), markup=False)


def _summary(report: FleetReport) -> Table:
    table = Table(title="attestation summary")
    for column in ("outcome", "reason", "decided by", "devices"):
        table.add_column(column, justify="right" if column == "devices" else "left")
    rows: dict[tuple[str, str], Counter[str]] = {}
    for result in report.devices:
        key = (result.outcome.value, result.reason.value if result.reason else "")
        rows.setdefault(key, Counter())[result.tier.value if result.tier else "-"] += 1
    order = [o.value for o in DeviceOutcome]
    for (outcome, reason), tiers in sorted(
        rows.items(), key=lambda r: (order.index(r[0][0]), r[0][1])
    ):
        by = ", ".join(f"{tier} {count}" for tier, count in sorted(tiers.items()))
        table.add_row(outcome, reason, by, str(sum(tiers.values())))
    table.add_section()
    table.add_row("total", "", "", str(len(report.devices)))
    return table


def _accuracy(report: FleetReport) -> Table:
    table = Table(title="accuracy against ground truth")
    for column in ("ground truth", "devices", "landed as expected", "accuracy"):
        table.add_column(column, justify="left" if column == "ground truth" else "right")
    for kind, row in report.accuracy_by_kind().items():
        share = row["correct"] / row["devices"]
        table.add_row(kind, str(row["devices"]), str(row["correct"]), f"{share:.1%}")
    table.add_section()
    correct = sum(1 for r in report.devices if r.correct)
    table.add_row("total", str(report.known), str(correct), f"{report.accuracy or 0:.1%}")
    return table

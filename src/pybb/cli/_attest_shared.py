"""What the three ways of running ``pybb attest`` share: the fleet, the board, the tables.

The plain run (``pybb.cli.attest``), ``--submit`` (``_attest_submit``) and ``--inbox``
(``_attest_inbox``) all import this module and nothing of each other.
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from blackboard import BlackboardError, attach
from pybb.attestation import (
    FLEET,
    Attestation,
    DeviceOutcome,
    Fleet,
    FleetError,
    FleetReport,
    generate_fleet,
    load_fleet,
)

__all__ = [
    "DEFAULT_REPORT",
    "DEFAULT_STORE",
    "board_mismatch",
    "fleet_of",
    "print_report",
    "registry_options",
    "store_problem",
    "workers_busy",
]

DEFAULT_STORE = "sqlite:///pybb-attest.db"
"""Where ``pybb attest`` keeps its boards unless told otherwise (the current directory)."""
DEFAULT_REPORT = "pybb-report.json"
"""Where ``pybb attest`` writes its JSON report unless told otherwise."""


def fleet_of(args: argparse.Namespace) -> Fleet:
    """The fleet the command line names: a FOLDER or a generated ``--demo N``."""
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


def print_report(console: Console, report: FleetReport, examples: int) -> None:
    """The summary and accuracy tables, then ``examples`` reports per escalation reason."""
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


def registry_options(parser: argparse.ArgumentParser) -> None:
    """``--store``, ``--registry`` and ``--by``, as every real-evidence subcommand takes them."""
    from pybb.attestation import REGISTRY_BOARD

    parser.add_argument(
        "--store", default=DEFAULT_STORE, help=f"the store (default {DEFAULT_STORE})"
    )
    parser.add_argument(
        "--registry",
        default=REGISTRY_BOARD,
        metavar="BOARD",
        help=f"the registry board (AKs, nonces, classes; default {REGISTRY_BOARD})",
    )
    parser.add_argument("--by", default="operator", help="who makes the change (on the record)")

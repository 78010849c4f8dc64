"""``pybb attest``: attest a fleet folder, or a generated demo fleet, on a durable board.

The board is kept in SQLite, by default in ``pybb-attest.db`` in the current directory,
one board per fleet (``attest-<fleet name>``): running the same command again resumes a
run that was stopped, or re-reads a finished one, and writes the same report.

The command's code is this module and its private helpers beside it:
``_attest_shared`` (the fleet, the board's checks, the tables), ``_attest_submit``
(``--submit``) and ``_attest_inbox`` (``--inbox``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
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

from blackboard import ModelMismatchError
from pybb.attestation import (
    EVENT_LOG_CAP,
    MAX_EVIDENCE_FILE_SIZE,
    Attestation,
    FleetReport,
    save_fleet,
)
from pybb.cli import _attest_policy, _attest_quarantine, _attest_verify
from pybb.cli._args import board_id, check_reachable, check_store, count, positive
from pybb.cli._attest_inbox_options import add_inbox_options, check_inbox_options
from pybb.cli._attest_report import report_data, write_outputs
from pybb.cli._attest_shared import (
    DEFAULT_REPORT,
    DEFAULT_STORE,
    FAIL_ON,
    board_mismatch,
    controller_lease,
    exit_status,
    fleet_of,
    log_progress,
    print_report,
    workers_busy,
    write_report,
)
from pybb.cli._errors import CommandError

__all__ = ["register", "run_attest"]

_log = logging.getLogger("pybb.cli.attest")


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
to resume an interrupted run (Ctrl-C is safe). One pybb attest per board at a time: a
second one is refused while the first holds the board's lease (workers share a board
through --submit and pybb worker). Exit status: 0 done, 1 a device with ground truth
landed elsewhere than expected, or what --fail-on names happened, 2 the command line,
the fleet or the store cannot be used, 130 interrupted (the same command resumes).

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
        "--demo", type=positive, metavar="N", help="generate N devices from the bundled real logs"
    )
    parser.add_argument("--seed", type=int, default=0, help="the demo fleet's seed (default 0)")
    parser.add_argument(
        "--store", default=DEFAULT_STORE, help=f"the board's store (default {DEFAULT_STORE})"
    )
    parser.add_argument(
        "--board-id", type=board_id, help="the board in the store (default attest-<fleet>)"
    )
    parser.add_argument(
        "--report",
        default=DEFAULT_REPORT,
        metavar="FILE",
        help=f"where to write the JSON report, written atomically; '-': standard output, the "
        f"summary then goes to standard error (default {DEFAULT_REPORT})",
    )
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default=FAIL_ON[0],
        help="exit 1 when a device was escalated (escalated) or a person was asked (asked, "
        "with --inbox); never: exit 0 whatever the outcomes (default never)",
    )
    parser.add_argument(
        "--html", type=Path, metavar="FILE", help="also write the report as one self-contained page"
    )
    parser.add_argument(
        "--csv", type=Path, metavar="FILE", help="also write one CSV row per device"
    )
    parser.add_argument(
        "--jsonl", type=Path, metavar="FILE", help="also write one JSON line per device"
    )
    parser.add_argument(
        "--save-fleet", type=Path, metavar="DIR", help="also write the fleet to DIR"
    )
    parser.add_argument(
        "--examples",
        type=count,
        default=1,
        help="reports printed per escalation reason (default 1)",
    )
    parser.add_argument(
        "--chunk",
        type=positive,
        help="devices per controller run (default 5 %% of the fleet, 25 to 250)",
    )
    parser.add_argument(
        "--max-evidence-size",
        type=positive,
        default=MAX_EVIDENCE_FILE_SIZE,
        metavar="BYTES",
        help="a fleet folder's largest devices/*.json read; a larger one is escalated "
        "bad_evidence unread",
    )
    parser.add_argument(
        "--max-log-size",
        type=positive,
        default=EVENT_LOG_CAP,
        metavar="BYTES",
        help="a fleet folder's largest event log read; a larger one is escalated "
        "bad_evidence unread",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--submit",
        action="store_true",
        help="only write the devices to the board for `pybb worker --app attest` processes "
        "(attests nothing) and print the commands to run next",
    )
    add_inbox_options(
        parser,
        inbox_help="also serve the run's inbox on 127.0.0.1 and apply answers until Ctrl-C "
        "(escalations go through the buddhi supervisor; needs mrpybb[inbox]); with "
        "--submit, only declare the human loop for the workers",
    )
    parser.set_defaults(handler=run_attest)
    _subcommands(parser)


def _subcommands(parser: argparse.ArgumentParser) -> None:
    """Hand ``pybb attest enroll|revoke|challenge|verify|policy|show ...`` to their parsers.

    ``attest`` takes an optional FOLDER, which argparse cannot combine with subparsers;
    so the first word decides (a fleet folder named like a subcommand is ``./verify``).
    """
    sub = argparse.ArgumentParser(prog=parser.prog, add_help=False)
    commands = sub.add_subparsers(metavar="COMMAND")
    _attest_verify.add(commands)
    _attest_policy.add(commands)
    _attest_quarantine.add(commands)
    words = (
        *_attest_verify.SUBCOMMANDS,
        *_attest_policy.SUBCOMMANDS,
        *_attest_quarantine.SUBCOMMANDS,
    )
    whole = parser.parse_known_args

    def parse_known_args(  # type: ignore[no-untyped-def]
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ):
        given = list(sys.argv[1:] if args is None else args)
        if given and given[0] in words:
            return sub.parse_known_args(given, namespace)
        return whole(given, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign,assignment]
    parser.epilog = (parser.epilog or "") + (
        "Real machines (tpm2-tools files):\n"
        "  pybb attest enroll DEVICE --ak AK.pem --class CLASS [--replace]\n"
        "  pybb attest revoke DEVICE\n"
        "  pybb attest challenge DEVICE        (prints a fresh nonce, hex)\n"
        "  pybb attest verify EVIDENCE_DIR [--report FILE] [--inbox ...]\n"
        "Classes and logs:\n"
        "  pybb attest policy CLASS --golden GOLDEN.bin [--require-secure-boot] [--store URL]\n"
        "  pybb attest show LOG                (the event log as a table)\n"
        "Answers that act:\n"
        "  pybb attest quarantine [--store URL] [--board-id ID] [--json]\n"
        "See pybb attest COMMAND -h."
    )


def run_attest(args: argparse.Namespace) -> int:
    """Run ``pybb attest``; return its exit status.

    Failures are not caught here: ``pybb.cli.main`` turns them into one line and exit 2.
    """
    check_inbox_options(args)
    check_store(args.store)
    check_reachable(args.store)
    # Imported when asked for: the plain run loads neither the inbox nor buddhi.
    if getattr(args, "submit", False):
        from pybb.cli._attest_submit import run_submit

        return run_submit(args)
    if getattr(args, "inbox", False):
        from pybb.cli._attest_inbox import run_attest_inbox

        return run_attest_inbox(args)
    # With --report - the JSON owns standard output; everything for people goes to stderr.
    console = Console(highlight=False, stderr=str(args.report) == "-")
    errors = Console(stderr=True, highlight=False)
    fleet = fleet_of(args)
    if args.save_fleet is not None:
        save_fleet(fleet, args.save_fleet)
        console.print(f"fleet written to {args.save_fleet}")
    board_id = args.board_id or f"attest-{fleet.name}"
    try:
        attestation = Attestation(fleet, store=args.store, board_id=board_id, chunk_size=args.chunk)
    except ModelMismatchError:
        raise CommandError(board_mismatch(args.store, board_id)) from None
    with attestation:
        busy = workers_busy(attestation)
        if busy is not None:
            raise CommandError(busy)
        with controller_lease(attestation.blackboard.model):
            console.print(
                f"attesting fleet [bold]{fleet.name}[/]: {len(fleet.devices)} devices, "
                f"{len(fleet.classes)} classes; board {attestation.board_id!r} in {args.store}"
            )
            started = time.perf_counter()
            report = _run(attestation, errors, args.no_progress)
            seconds = time.perf_counter() - started
    print_report(console, report, args.examples)
    data = report_data(args.store, attestation.board_id, report)
    where = write_report(args.report, data)
    write_outputs(data, html_path=args.html, csv_path=args.csv, jsonl_path=args.jsonl)
    rate = len(fleet.devices) / seconds if seconds > 0 else 0.0
    console.print(
        f"{len(fleet.devices)} devices in {seconds:.1f} s ({rate:,.0f}/s); "
        f"report written to {where}; run the same command again to resume or re-read."
    )
    return exit_status(report, args.fail_on)


def _run(attestation: Attestation, errors: Console, quiet: bool) -> FleetReport:
    if quiet:
        return attestation.run()
    if not errors.is_terminal:  # no bar to draw: a log line per chunk instead
        return attestation.run(log_progress)
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

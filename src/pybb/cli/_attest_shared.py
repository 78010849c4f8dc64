"""What the three ways of running ``pybb attest`` share: the fleet, the board, the tables.

The plain run (``pybb.cli.attest``), ``--submit`` (``_attest_submit``) and ``--inbox``
(``_attest_inbox``) all import this module and nothing of each other.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from blackboard import BlackboardError, Model, attach
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
from pybb.cli._errors import EXIT_FAILED, EXIT_OK, CommandError

__all__ = [
    "CONTROLLER_KEY",
    "CONTROLLER_LEASE",
    "DEFAULT_REPORT",
    "DEFAULT_STORE",
    "FAIL_ON",
    "atomic_write",
    "board_mismatch",
    "controller_lease",
    "exit_status",
    "fleet_of",
    "log_progress",
    "print_report",
    "registry_options",
    "store_problem",
    "workers_busy",
    "write_report",
]

DEFAULT_STORE = "sqlite:///pybb-attest.db"
"""Where ``pybb attest`` keeps its boards unless told otherwise (the current directory)."""
DEFAULT_REPORT = "pybb-report.json"
"""Where ``pybb attest`` writes its JSON report unless told otherwise."""


FAIL_ON = ("never", "escalated", "asked")
"""``--fail-on``'s choices; the first is the default (exit 0 whatever the outcomes)."""
CONTROLLER_KEY = "@controller"
"""The claim key a ``pybb attest`` holds on its board while it attests it (ADR 0016)."""
CONTROLLER_LEASE = timedelta(seconds=30)
"""How long a ``pybb attest`` that died (SIGKILL, a lost machine) keeps others off."""


def fleet_of(args: argparse.Namespace) -> Fleet:
    """The fleet the command line names: a FOLDER or a generated ``--demo N``."""
    if (args.folder is None) == (args.demo is None):
        raise FleetError("give a fleet FOLDER or --demo N (one of them)", hint="see pybb attest -h")
    if args.demo is not None:
        if args.demo < 1:
            raise FleetError(f"--demo needs a positive number of devices, got {args.demo}")
        return generate_fleet(args.demo, seed=args.seed)
    caps = {
        name: getattr(args, name)
        for name in ("max_log_size", "max_evidence_size")
        if getattr(args, name, None) is not None
    }
    return load_fleet(args.folder, **caps)


def write_report(target: Path | str, data: object) -> str:
    """Write the JSON report ``data`` to ``target`` atomically; return where it went.

    ``-`` is standard output. A file is written to a temporary file in the same folder,
    flushed to disk (``fsync``) and renamed over ``target``, so a reader, a full disk
    or a crash never sees half a report, and an older good report stays whole until the
    new one replaces it. The one place the ``--report`` JSON is written.

    Raises:
        CommandError: The report cannot be written (the message says why and what to do).
    """
    text = json.dumps(data, indent=1) + "\n"
    if str(target) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    path = Path(target)
    try:
        atomic_write(path, text)
    except OSError as exc:
        from pybb.cli._errors import describe

        raise CommandError(
            f"cannot write the report {path}: {describe(exc)}; the board is intact, and an "
            "older report there was left as it was"
        ) from exc
    return str(path)


def exit_status(report: FleetReport, fail_on: str, *, asked: int = 0, truth: bool = True) -> int:
    """The exit status ``--fail-on`` asks for (``truth``: ground truth missed is 1 too).

    ``--inbox`` passes ``truth=False``: a person's answer moves a device off the outcome
    its ground truth predicted, which is the point, not a failure.
    """
    if truth and report.accuracy is not None and report.accuracy != 1.0:
        return EXIT_FAILED
    escalated = any(r.outcome is DeviceOutcome.ESCALATED for r in report.devices)
    if fail_on == "escalated" and escalated:
        return EXIT_FAILED
    if fail_on == "asked" and asked:
        return EXIT_FAILED
    return EXIT_OK


def _holder() -> str:
    return f"pybb attest on {socket.gethostname()} pid {os.getpid()}"


def _dead_here(holder: str) -> bool:
    """Whether ``holder`` names a ``pybb attest`` of this machine that is no longer running."""
    prefix = f"pybb attest on {socket.gethostname()} pid "
    if not holder.startswith(prefix):
        return False
    try:
        pid = int(holder[len(prefix) :])
    except ValueError:
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


@contextmanager
def controller_lease(model: Model, command: str = "pybb attest") -> Iterator[str]:
    """Hold the board's controller lease while the block runs (ADR 0016); yield the holder.

    A claim on :data:`CONTROLLER_KEY`, renewed by a heartbeat thread every third of
    :data:`CONTROLLER_LEASE`, released at the end. A second ``pybb attest`` on the board
    is refused while the lease is live; one left by a process of this machine that is
    gone (SIGKILL) is taken over at once, one of another machine once it lapses.

    Raises:
        CommandError: Another controller holds the board: who, until when, what to do.
    """
    control = model.control
    holder = _holder()
    taken = control.claim(holder, [CONTROLLER_KEY], lease=CONTROLLER_LEASE)
    if not taken:
        held = [c for c in model.reader.claims() if c.key == CONTROLLER_KEY]
        if held and _dead_here(held[0].holder):
            control.release(held[0].holder, [CONTROLLER_KEY])
            taken = control.claim(holder, [CONTROLLER_KEY], lease=CONTROLLER_LEASE)
        if not taken:
            raise CommandError(_held_message(model, command, held[0] if held else None))
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(CONTROLLER_LEASE.total_seconds() / 3):
            with suppress(BlackboardError):  # a lapse shows at the next claim, not here
                control.renew(holder, [CONTROLLER_KEY], lease=CONTROLLER_LEASE)

    thread = threading.Thread(target=beat, name="pybb-attest-lease", daemon=True)
    thread.start()
    try:
        yield holder
    finally:
        stop.set()
        thread.join(timeout=5)
        with suppress(BlackboardError):
            control.release(holder, [CONTROLLER_KEY])


def _held_message(model: Model, command: str, claim: Any) -> str:
    who = claim.holder if claim is not None else "another process"
    until = (
        f"; its lease lapses at {claim.expires:%H:%M:%S} UTC unless it is renewed"
        if claim is not None
        else ""
    )
    return (
        f"board {model.board_id!r} is being attested by {who}{until}. Two controllers on "
        f"one board would duplicate each other's work: wait for it to end (or stop it with "
        f"Ctrl-C), then run {command} again; if it was killed, run again after its lease "
        "lapses (at once on the same machine). To share a board, use pybb attest --submit "
        "and pybb worker"
    )


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
    live = [
        c
        for c in attestation.blackboard.model.reader.claims()
        if c.expires > now and c.key != CONTROLLER_KEY
    ]
    if not live:
        return None
    holders = sorted({claim.holder for claim in live})
    last = max(claim.expires for claim in live)
    wait = max(int((last - now).total_seconds()) + 1, 1)
    return (
        f"{len(holders)} worker(s) (e.g. {holders[0]}) are still attesting board "
        f"{attestation.board_id!r}, {len(live)} device(s) claimed, the last lease lapsing at "
        f"{last:%H:%M:%S} UTC (in {wait} s) unless renewed; run this again once every "
        "pybb worker has ended (each prints one line when it does), or, if a worker was "
        "killed, after its lease lapses (the devices it held are then attested here)"
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


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a reader never sees half of it.

    A temporary file beside ``path`` (given the mode a plain ``open(path, "w")`` would,
    not mkstemp's 0600), flushed to disk, renamed over ``path``, and the rename itself
    made durable where the platform allows; an older file stays whole until replaced.

    Raises:
        OSError: It cannot be written (the temporary file is removed).
    """
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.chmod(temporary, _plain_mode(path))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    with suppress(OSError):
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _plain_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would give: the file's own, or 0666 less the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def log_progress(done: int, total: int) -> None:
    """Log how far the run is (INFO on ``pybb.cli.attest``), where no bar can be drawn."""
    logging.getLogger("pybb.cli.attest").info("attested %d of %d devices", done, total)

"""``pybb attest policy`` and ``pybb attest show``: enrol a class from a golden log, read a log.

``pybb attest policy CLASS --golden GOLDEN.bin [--require-secure-boot] [--pcrs LIST]
[--store URL] [--out FILE]`` enrols a device class from a known-good machine's event
log (``/sys/kernel/security/tpm0/binary_bios_measurements`` as it gives it): its replay
becomes the reference values, its events the manifest, onto the registry board of the
store (where ``pybb attest verify`` reads classes), and with ``--out`` also as a fleet
folder's class file. A golden log whose event data does not match its digests is
refused: a reference must not start from a lie.

``pybb attest show LOG`` prints the log as a table: event number, PCR, type, the
digests (shortened), what was measured, and whether the data matches the digest.

Both are words after ``pybb attest`` (its optional FOLDER cannot be combined with
argparse subparsers): ``pybb.cli.attest`` hands ``attest policy|show ...`` to the parsers here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pybb.attestation import (
    MAX_PCR_INDEX,
    REGISTRY_BOARD,
    DataStatus,
    DeviceClass,
    EventLog,
    EventLogError,
    FleetError,
    PolicyError,
    Registry,
    check_event,
    read_event_log,
)
from pybb.cli._attest_shared import registry_options

__all__ = ["REGISTRY_BOARD", "SUBCOMMANDS", "add", "enrol_class"]

SUBCOMMANDS = ("policy", "show")
"""The words after ``pybb attest`` that this module's parsers take."""


_DIGEST_CHARS = 16


def add(commands: Any) -> None:
    """Add this module's subcommands of ``pybb attest`` to ``commands``."""
    policy = commands.add_parser(
        "policy",
        prog="pybb attest policy",
        help="enrol a device class from a golden event log",
        description="Enrol device class CLASS from GOLDEN.bin, the event log of a known-good "
        "machine (binary_bios_measurements as the kernel gives it): its replay becomes the "
        "reference values, its events the manifest. The class goes onto the registry board "
        "of --store (where `pybb attest verify` reads it); --out also writes it as a fleet "
        "folder's class file. Exit status 0 enrolled, 2 the log or the store cannot be used.",
    )
    policy.add_argument("name", metavar="CLASS", help="the class name devices are enrolled in")
    policy.add_argument(
        "--golden", type=Path, required=True, metavar="GOLDEN.bin", help="the golden event log"
    )
    policy.add_argument(
        "--require-secure-boot",
        action="store_true",
        help="require Secure Boot on, even if the golden machine booted with it off",
    )
    policy.add_argument(
        "--pcrs",
        metavar="LIST",
        help="the PCRs to cover, e.g. 0,1,2,3,4,5 (default: every PCR the golden log extends)",
    )
    policy.add_argument("--bank", help="the PCR bank (default sha256 if the log has it)")
    registry_options(policy)
    policy.add_argument(
        "--out", type=Path, metavar="FILE", help="also write the class file (classes/CLASS.json)"
    )
    policy.add_argument(
        "--no-store", action="store_true", help="do not enrol on a board (with --out: file only)"
    )
    policy.set_defaults(handler=run_policy)

    show = commands.add_parser(
        "show",
        prog="pybb attest show",
        help="print an event log as a table",
        description="Print the TCG event log LOG as a table: event number, PCR, type, digests "
        "(shortened), what was measured, and whether the event data matches its digest "
        "(verified, with the firmware quirk accepted; MISMATCH; or - where the digest is of "
        "something the log does not carry). Exit status 0, 1 if an event's data contradicts "
        "its digest, 2 if the log cannot be read.",
    )
    show.add_argument("log", type=Path, metavar="LOG", help="the event log file")
    show.add_argument(
        "--pcr", type=int, action="append", default=[], metavar="N", help="only PCR N (repeat)"
    )
    show.add_argument("--bank", help="show only this bank's digests (default: every bank)")
    show.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    show.set_defaults(handler=run_show)


# -- pybb attest policy -------------------------------------------------------------------------


def run_policy(args: argparse.Namespace) -> int:
    """Run ``pybb attest policy``; return its exit status."""
    out = _console()
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        log = read_event_log(args.golden)
        _refuse_forged(log, args.golden)
        pcrs = _pcrs(args.pcrs)
        required = True if args.require_secure_boot else None
        device_class = DeviceClass.from_log(
            args.name, log, bank=args.bank, pcrs=pcrs, secure_boot_required=required
        )
    except (EventLogError, PolicyError, FleetError) as exc:
        errors.print(f"pybb attest policy: {exc}", markup=False)
        return 2
    out.print(_class_table(device_class, log))
    if args.require_secure_boot and log.secure_boot is not True:
        measured = "off" if log.secure_boot is False else "not at all"
        note = (
            f"note: the golden log measured Secure Boot {measured}; --require-secure-boot "
            "requires it on anyway, on top of the golden log's reference values."
        )
        if 7 in device_class.policy.pcrs:
            note += (
                " PCR 7's reference was measured with Secure Boot "
                f"{measured}, so a device booted with it on differs there: enrol a golden log "
                "with Secure Boot on, or leave PCR 7 out (--pcrs)."
            )
        out.print(note, markup=False)
    if args.out is not None:
        try:
            _write_class(args.out, device_class)
        except OSError as exc:
            errors.print(f"pybb attest policy: cannot write {args.out}: {exc}", markup=False)
            return 2
        out.print(f"class file written to {args.out}", markup=False)
    if args.no_store:
        return 0
    try:
        version = enrol_class(args.store, args.registry, device_class, by=args.by)
    except (FleetError, PolicyError, OSError, ValueError) as exc:
        errors.print(f"pybb attest policy: {exc}", markup=False)
        return 2
    out.print(
        f"class {device_class.name!r} enrolled as version {version} on board "
        f"{args.registry!r} in {args.store}",
        markup=False,
    )
    return 0


def enrol_class(store: str, board_id: str, device_class: DeviceClass, *, by: str) -> int:
    """Record ``device_class`` on the registry board of ``store``; return its version.

    The registry (AKs, nonces, classes) is ``pybb.attestation._registry``; a class
    enrolled again gets the next version, the latest one in force.

    Raises:
        FleetError: The store or the registry cannot be used.
    """
    try:
        with Registry(store, board_id, writer=by) as registry:
            version: int = registry.add_class(device_class, by=by)
    except FleetError:
        raise
    except Exception as exc:  # the store's own errors: name the store
        raise FleetError(f"cannot enrol on board {board_id!r} in {store}: {exc}") from exc
    return version


def _refuse_forged(log: EventLog, path: Path) -> None:
    for event in log.events:
        check = check_event(event)
        if check.mismatch:
            raise PolicyError(
                f"event {event.index} (PCR {event.pcr_index}, {event.type_name}) of the golden "
                f"log holds data its digest does not vouch for ({check.rule} rule); a class "
                "must not be enrolled from a changed log",
                path=os.fspath(path),
            )


def _pcrs(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        pcrs = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise PolicyError(
            f"--pcrs {text!r} is not a comma-separated list of PCR indices (e.g. 0,1,2,3,4,5)",
            field="policy.pcrs",
        ) from None
    if not pcrs or any(not 0 <= p <= MAX_PCR_INDEX for p in pcrs):
        raise PolicyError(
            f"--pcrs {text!r} must list PCR indices from 0 to {MAX_PCR_INDEX}",
            field="policy.pcrs",
        )
    return pcrs


def _write_class(path: Path, device_class: DeviceClass) -> None:
    text = json.dumps(device_class.to_json(), indent=1) + "\n"
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _class_table(device_class: DeviceClass, log: EventLog) -> Table:
    policy = device_class.policy
    table = Table(title=f"class {device_class.name}", show_header=False)
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("bank", policy.bank)
    table.add_row("PCRs covered", ", ".join(map(str, policy.pcrs)))
    table.add_row("manifest", f"{len(device_class.manifest)} components")
    state = {True: "on", False: "off", None: "not measured"}[log.secure_boot]
    table.add_row("Secure Boot in the golden log", state)
    table.add_row("Secure Boot required", "yes" if policy.secure_boot_required else "no")
    for pcr, value in device_class.reference.items():
        table.add_row(f"reference PCR {pcr}", value.hex())
    return table


# -- pybb attest show ---------------------------------------------------------------------------


_MARK = {
    DataStatus.VERIFIED: ("ok", "green"),
    DataStatus.MISMATCH: ("MISMATCH", "bold red"),
    DataStatus.NOT_APPLICABLE: ("-", "dim"),
}


def run_show(args: argparse.Namespace) -> int:
    """Run ``pybb attest show``; return its exit status."""
    out = _console()
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        log = read_event_log(args.log)
    except EventLogError as exc:
        errors.print(f"pybb attest show: {exc}", markup=False)
        return 2
    if args.bank is not None and args.bank not in log.banks:
        errors.print(
            f"pybb attest show: the log carries no {args.bank} bank "
            f"(it carries {', '.join(log.banks)})",
            markup=False,
        )
        return 2
    banks = (args.bank,) if args.bank else log.banks
    events = [e for e in log.events if not args.pcr or e.pcr_index in args.pcr]
    checks = [check_event(e) for e in events]
    if args.json:
        for event, check in zip(events, checks, strict=True):
            row = {
                "event": event.index,
                "pcr": event.pcr_index,
                "type": event.type_name,
                "digests": {b: event.digests[b].hex() for b in banks if b in event.digests},
                "description": event.description,
                "data": check.status.value,
                "rule": check.rule,
            }
            out.print(json.dumps(row), markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(_log_table(args.log, log, events, checks, banks))
        out.print(_log_summary(log, checks), markup=False)
    return 1 if any(c.mismatch for c in checks) else 0


def _log_table(
    path: Path, log: EventLog, events: list[Any], checks: list[Any], banks: Sequence[str]
) -> Table:
    table = Table(title=f"{path.name}: {log.format.value} log, banks {', '.join(log.banks)}")
    table.add_column("#", justify="right")
    table.add_column("PCR", justify="right")
    table.add_column("type")
    table.add_column("digest" if len(banks) == 1 else "digests", no_wrap=True)
    table.add_column("description", overflow="fold")
    table.add_column("data", no_wrap=True)
    for event, check in zip(events, checks, strict=True):
        digests = "\n".join(
            f"{b} {event.digests[b].hex()[:_DIGEST_CHARS]}" for b in banks if b in event.digests
        )
        mark, style = _MARK[check.status]
        if check.status is DataStatus.VERIFIED and check.rule != "data":
            mark = f"ok ({check.rule})"
        table.add_row(
            str(event.index),
            str(event.pcr_index),
            event.type_name,
            digests or "-",
            Text(event.description),
            Text(mark, style=style),
        )
    return table


def _log_summary(log: EventLog, checks: list[Any]) -> str:
    verified = sum(1 for c in checks if c.verified)
    mismatched = sum(1 for c in checks if c.mismatch)
    state = {True: "on", False: "off", None: "not shown (not measured, or its data is forged)"}
    line = (
        f"{len(checks)} events; data checked against the digest: {verified} match, "
        f"{mismatched} do not; Secure Boot {state[log.secure_boot]}"
    )
    if mismatched:
        line += "; an event whose data does not match its digest was changed after it was measured"
    return line


def _console() -> Console:
    # A table piped to a file or a test keeps its full width, so lines stay greppable.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)

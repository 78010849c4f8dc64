"""``pybb attest enroll|revoke|challenge|verify``: attesting real machines from tpm2-tools files.

::

    pybb attest enroll DEVICE --ak AK.pem --class CLASS [--replace] [--store URL]
    pybb attest revoke DEVICE [--store URL]
    pybb attest challenge DEVICE [--store URL]       # a fresh nonce, hex, on stdout
    pybb attest verify EVIDENCE_DIR [--store URL] [--report FILE] [--inbox ...]

``pybb attest FOLDER`` and ``pybb attest --demo N`` stay as they were: the ``attest``
parser hands its arguments to these subcommands only when the first one is one of
their names (``pybb.cli.attest``). The registry (AKs, nonces, clocks, classes) is the board
``attest-registry`` in the store (``--registry`` to choose another).
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from blackboard import BlackboardError
from pybb.attestation import (
    EVENT_LOG_CAP,
    MAX_AK_FILE_SIZE,
    NONCE_TTL,
    Attestation,
    Caps,
    DeviceOutcome,
    FleetError,
    Registry,
    load_attestation_key,
    load_evidence_dir,
)
from pybb.cli._attest_inbox_options import add_inbox_options, check_inbox_options
from pybb.cli._attest_shared import print_report, registry_options, write_report
from pybb.errors import PybbError

__all__ = ["SUBCOMMANDS", "add"]

SUBCOMMANDS = ("enroll", "revoke", "challenge", "verify")
"""The words that, first after ``pybb attest``, select a subcommand of this module."""


def add(commands: Any) -> None:
    """Add this module's subcommands of ``pybb attest`` to ``commands``."""
    enroll = commands.add_parser(
        "enroll",
        prog="pybb attest enroll",
        help="enrol a device's attestation key",
        description="Enrol DEVICE's attestation key (trusted from now on, on the record). "
        "AK.pem is what tpm2_createak -f pem -u AK.pem writes (a TPM2B_PUBLIC also works, "
        "and binds the key to its signing scheme).",
    )
    enroll.add_argument("device")
    enroll.add_argument("--ak", type=Path, required=True, help="the AK's public key file")
    enroll.add_argument("--class", dest="device_class", required=True, help="its device class")
    enroll.add_argument(
        "--replace", action="store_true", help="re-enrol: replace the enrolled AK (a new version)"
    )
    registry_options(enroll)
    enroll.set_defaults(handler=run_enroll)

    revoke = commands.add_parser(
        "revoke", prog="pybb attest revoke", help="revoke a device's attestation key"
    )
    revoke.add_argument("device")
    registry_options(revoke)
    revoke.set_defaults(handler=run_revoke)

    challenge = commands.add_parser(
        "challenge",
        prog="pybb attest challenge",
        help="issue a nonce for a device to quote over",
        description="Record a fresh random nonce for DEVICE and print it as hex on stdout, "
        "for tpm2_quote -q. A quote over it is accepted once, before it expires.",
    )
    challenge.add_argument("device")
    challenge.add_argument(
        "--ttl",
        type=float,
        default=NONCE_TTL.total_seconds() / 60,
        metavar="MINUTES",
        help=f"minutes until the nonce expires (default {NONCE_TTL.total_seconds() / 60:g})",
    )
    registry_options(challenge)
    challenge.set_defaults(handler=run_challenge)

    verify = commands.add_parser(
        "verify",
        prog="pybb attest verify",
        help="verify the quotes in EVIDENCE_DIR and attest the devices",
        description="EVIDENCE_DIR/<device>/ holds eventlog.bin, quote.msg, quote.sig and "
        "optionally quote.pcrs (tpm2_quote -m/-s/-o). Each quote's signature, nonce, "
        "pcrDigest and clock are verified, then the devices go through the decision tree. "
        "With --inbox, the escalations are asked in the inbox it serves until Ctrl-C, and "
        "a device sent back to re-measure runs again when a quote over its printed "
        "challenge lands in its folder. Exit status: 0 every device passed or was repaired, "
        "1 some were escalated (at Ctrl-C, with --inbox), 2 the folder, an option or the "
        "store cannot be used.",
    )
    verify.add_argument("evidence_dir", type=Path)
    verify.add_argument(
        "--report",
        default="pybb-report.json",
        metavar="FILE",
        help="the JSON report, written atomically ('-': standard output)",
    )
    verify.add_argument("--board-id", help="the attestation board (default verify-<content>)")
    verify.add_argument(
        "--max-log-size",
        type=int,
        default=EVENT_LOG_CAP,
        metavar="BYTES",
        help=f"the event log size cap (default {EVENT_LOG_CAP})",
    )
    verify.add_argument("--examples", type=int, default=1, help="reports shown per reason")
    registry_options(verify)
    add_inbox_options(
        verify,
        inbox_help="also serve the run's inbox on 127.0.0.1 and apply answers until Ctrl-C "
        "(needs mrpybb[inbox]): a device a person sends back to re-measure is challenged "
        "(the nonce is printed) and runs again when a quote over it lands in its folder",
    )
    verify.set_defaults(handler=run_verify)


def _fail(command: str, problem: object) -> int:
    Console(stderr=True, highlight=False).print(
        f"pybb attest {command}: {problem}", markup=False, soft_wrap=True
    )
    return 2


def run_enroll(args: argparse.Namespace) -> int:
    """``pybb attest enroll``."""
    try:
        size = args.ak.stat().st_size
        if size > MAX_AK_FILE_SIZE:
            return _fail("enroll", f"{args.ak}: {size} bytes, over {MAX_AK_FILE_SIZE}; not a key")
        key = load_attestation_key(args.ak.read_bytes(), str(args.ak))
        with Registry(args.store, args.registry, writer=args.by) as registry:
            version = registry.enroll(args.device, key, args.device_class, replace=args.replace)
            known = args.device_class in registry.classes()
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        return _fail("enroll", exc)
    print(
        f"enrolled {args.device} (class {args.device_class}) with AK {key.fingerprint[:16]}…, "
        f"version {version}, by {args.by}"
    )
    if not known:
        print(f"note: class {args.device_class!r} is not in the registry yet", file=sys.stderr)
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    """``pybb attest revoke``."""
    try:
        with Registry(args.store, args.registry, writer=args.by) as registry:
            version = registry.revoke(args.device)
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        return _fail("revoke", exc)
    print(f"revoked the AK of {args.device} (version {version}); its quotes are refused")
    return 0


def run_challenge(args: argparse.Namespace) -> int:
    """``pybb attest challenge``: the nonce alone on stdout, so a script can capture it."""
    if not args.ttl > 0:
        return _fail("challenge", f"--ttl must be a positive number of minutes, got {args.ttl}")
    try:
        with Registry(args.store, args.registry, writer=args.by) as registry:
            nonce = registry.challenge(args.device, ttl=timedelta(minutes=args.ttl))
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        return _fail("challenge", exc)
    print(nonce.hex())
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``pybb attest verify``; with ``--inbox``, supervised (``_attest_verify_inbox``)."""
    check_inbox_options(args)
    if args.inbox:
        from pybb.cli._attest_verify_inbox import run_verify_inbox

        return run_verify_inbox(args)
    console = Console(highlight=False, stderr=str(args.report) == "-")
    if args.max_log_size < 1:
        return _fail("verify", f"--max-log-size must be positive, got {args.max_log_size}")
    try:
        with Registry(args.store, args.registry, writer=args.by) as registry:
            fleet = load_evidence_dir(
                args.evidence_dir, registry, caps=Caps(event_log=args.max_log_size)
            )
        board_id = args.board_id or f"verify-{fleet.fingerprint[:20]}"
        with Attestation(fleet, store=args.store, board_id=board_id) as attestation:
            report = attestation.run()
    except FleetError as exc:
        return _fail("verify", exc)
    except (PybbError, BlackboardError, ValueError, OSError) as exc:
        return _fail("verify", exc)
    print_report(console, report, args.examples)
    data = {"store": args.store, "board_id": board_id, **report.to_json()}
    where = write_report(args.report, data)
    escalated = sum(1 for r in report.devices if r.outcome is DeviceOutcome.ESCALATED)
    console.print(
        f"{len(report.devices)} devices verified, {escalated} escalated; board {board_id!r}; "
        f"report written to {where}"
    )
    return 1 if escalated else 0

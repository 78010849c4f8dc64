"""``pybb attest verify EVIDENCE_DIR --inbox``: the real-evidence fleet, supervised.

The same shape as ``pybb attest --inbox`` (``_attest_inbox.serve_inbox``): the quotes
are verified (``load_evidence_dir``), the devices attested with their escalations
asked in the inbox, and the command keeps serving and applying answers until Ctrl-C.
The registry stays open for the whole run: a device a person sends back to re-measure
is challenged through it (one fresh nonce per request, printed for the operator), and
its folder is read again at every poll; a quote over that nonce, verified against the
live registry when it lands, runs the device's next generation through the tree.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from pybb.attestation import Caps, DeviceOutcome, FleetReport, Registry, load_evidence_dir
from pybb.cli._attest_inbox import Served, check_inbox, serve_inbox
from pybb.supervision import SupervisionSettings
from pybb.supervision.attestation import SupervisedAttestation

__all__ = ["run_verify_inbox"]


def run_verify_inbox(args: argparse.Namespace) -> int:
    """Run ``pybb attest verify EVIDENCE_DIR --inbox``; its exit status (as without --inbox)."""
    if args.max_log_size < 1:
        from pybb.cli._errors import CommandError

        raise CommandError(f"--max-log-size must be positive, got {args.max_log_size}")
    check_inbox(args)
    with Registry(args.store, args.registry, writer=args.by) as registry:

        def open_session(settings: SupervisionSettings) -> SupervisedAttestation:
            # Read (and the quotes' nonces spent) only now, the inbox's port bound.
            caps = Caps(event_log=args.max_log_size)
            fleet = load_evidence_dir(args.evidence_dir, registry, caps=caps)
            return SupervisedAttestation(
                fleet,
                store=args.store,
                board_id=args.board_id or f"verify-{fleet.fingerprint[:20]}",
                settings=settings,
                challenge=registry.challenge,
            )

        served = Served(
            "pybb attest verify --inbox",
            open_session,
            _status,
            quiet=True,
            watch=lambda session, console: _Remeasures(session, console, args.evidence_dir),
        )
        return serve_inbox(args, served)


def _status(session: SupervisedAttestation, report: FleetReport) -> int:
    """1 while a device stands escalated (quarantined ones too), as without ``--inbox``."""
    return 1 if any(r.outcome is DeviceOutcome.ESCALATED for r in report.devices) else 0


class _Remeasures:
    """After each poll: print each new re-measure challenge, and each device run again.

    The operator is the one who brings the device's fresh evidence, so the command says
    which nonce to quote over and where to write the files, and then how the device's
    next generation went.
    """

    def __init__(self, session: SupervisedAttestation, console: Console, root: Path) -> None:
        self._session, self._console, self._root = session, console, root
        self._told: dict[str, str] = {}
        self._generation: dict[str, int] = {}

    def __call__(self) -> None:
        board = self._session.attestation.blackboard
        for device, nonce in self._session.challenges().items():
            if self._told.get(device) != nonce:
                self._told[device] = nonce
                self._generation.setdefault(device, board.get_entry(device).generation)
                self._console.print(
                    _challenge_line(device, nonce, self._root), markup=False, soft_wrap=True
                )
        for device, seen in self._generation.items():
            entry = board.get_entry(device)
            if entry.generation > seen:
                self._generation[device] = entry.generation
                self._console.print(
                    f"re-measured {device}: fresh evidence ran generation {entry.generation}, "
                    f"now {entry.stage.value}",
                    markup=False,
                    soft_wrap=True,
                )


def _challenge_line(device: str, nonce: str, root: Path) -> str:
    return (
        f"re-measure {device}: quote over the nonce {nonce} (tpm2_quote -q {nonce}) and write "
        f"quote.msg, quote.sig and eventlog.bin into {root / device}/"
    )

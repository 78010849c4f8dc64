"""``pybb attest --inbox``: attest a fleet and serve its inbox in one command.

:func:`serve_inbox` is the loop itself, which ``pybb attest verify EVIDENCE_DIR
--inbox`` (``_attest_verify_inbox``) runs too, on its real-evidence fleet.

The inbox is served in a thread of this process (``pybb.inbox.InboxServer``), on its
own connection to the same store (``pybb.inbox.attach_run``); the fleet runs in the main
thread with its escalations supervised as they happen, and answers given while it runs
take effect on the devices attested after them. Once the fleet is done the command keeps serving and
applying answers until Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from blackboard import Model, ModelMismatchError
from pybb.attestation import FleetReport
from pybb.cli._attest_notify import NotifyPlan, notify_plan
from pybb.cli._attest_report import report_data, write_outputs
from pybb.cli._attest_shared import (
    board_mismatch,
    controller_lease,
    exit_status,
    fleet_of,
    print_report,
    workers_busy,
    write_report,
)
from pybb.cli._errors import CommandError
from pybb.supervision import NotifySettings, SupervisionSettings
from pybb.supervision.attestation import SupervisedAttestation, attestation_settings

if TYPE_CHECKING:
    from pybb.inbox import InboxServer

__all__ = ["Served", "check_inbox", "run_attest_inbox", "serve_inbox"]

_DEFAULT_HUMAN = "operator"
_HOST = "127.0.0.1"


def run_attest_inbox(args: argparse.Namespace) -> int:
    """Run ``pybb attest --inbox``; return its exit status (failures: ``pybb.cli.main``)."""
    check_inbox(args)
    fleet = fleet_of(args)
    board_id = args.board_id or f"attest-{fleet.name}"

    def open_session(settings: SupervisionSettings) -> SupervisedAttestation:
        return SupervisedAttestation(
            fleet, store=args.store, board_id=board_id, chunk_size=args.chunk, settings=settings
        )

    def status(session: SupervisedAttestation, report: FleetReport) -> int:
        asked = sum(1 for r in session.run.records() if r.kind == "decision" and r.ask_id)
        return exit_status(report, args.fail_on, asked=asked, truth=False)

    served = Served("pybb attest --inbox", open_session, status, args.no_progress)
    return serve_inbox(args, served)


def check_inbox(args: argparse.Namespace) -> None:
    """Refuse ``--inbox`` without its extra installed, or on a store it cannot attach to.

    Raises:
        CommandError: Saying what to install or give instead.
    """
    try:
        import uvicorn  # noqa: F401 - checked here so a missing extra fails early

        from pybb.inbox import create_app  # noqa: F401
    except ImportError as exc:
        raise CommandError(f"{exc}; pip install 'mrpybb[inbox]'") from None
    if not isinstance(args.store, str) or not args.store.startswith(("sqlite:", "postgresql")):
        raise CommandError("--inbox needs --store to be a SQLite or PostgreSQL URL")


@dataclass(frozen=True, slots=True)
class Served:
    """What a command that serves its run's inbox runs (see :func:`serve_inbox`).

    Attributes:
        command: The command, as its lease on the board names it.
        open_session: The supervised run on its board, with the settings given; called
            once the inbox's port is bound and the notification options are read, so
            whatever it reads or spends (a quote's nonce) is not lost to a busy port.
        status: The exit status once stopped, from the session and its last report.
        quiet: No progress bar while the fleet is attested.
        watch: Called after every poll of the run while the inbox is served (e.g. to
            print what a person's answer asks of the operator).
    """

    command: str
    open_session: Callable[[SupervisionSettings], SupervisedAttestation]
    status: Callable[[SupervisedAttestation, FleetReport], int]
    quiet: bool = False
    watch: Callable[[SupervisedAttestation, Console], Callable[[], object]] | None = None


def serve_inbox(args: argparse.Namespace, served: Served) -> int:
    """Attest the session's fleet and serve its inbox until Ctrl-C; the exit status.

    ``args`` holds the inbox options (``_attest_inbox_options``), ``--store``,
    ``--report`` and ``--examples``.
    """
    from pybb.inbox import InboxServer

    console = Console(highlight=False, stderr=str(args.report) == "-")
    # Bound first: the links in notifications name the inbox's address (and its port,
    # which --inbox-port 0 picks here).
    try:
        server = InboxServer(_HOST, args.inbox_port, quiet=True)
    except OSError as exc:
        raise CommandError(
            f"--inbox-port {args.inbox_port}: cannot listen on {_HOST}:{args.inbox_port} "
            f"({exc.strerror or exc}); give another --inbox-port (0: any free port)"
        ) from None
    try:
        plan = notify_plan(args, server.url.rstrip("/"))
        try:
            session = served.open_session(_settings(plan))
        except ModelMismatchError as exc:
            raise CommandError(board_mismatch(args.store, exc.board_id, inbox=True)) from None
        with session:
            busy = workers_busy(session.attestation)
            if busy is not None:
                raise CommandError(busy)
            with controller_lease(session.attestation.blackboard.model, served.command):
                if plan is not None:
                    plan.record_people(session.attestation.blackboard.model.control)
                if served.watch is not None:
                    session.run.after_poll.append(served.watch(session, console))
                return _serve(args, served, session, console, server, plan)
    finally:
        server.close()


def _settings(plan: NotifyPlan | None) -> SupervisionSettings:
    settings = attestation_settings()
    if plan is None:
        return settings
    notify = NotifySettings(plan.notifiers, plan.link_secret, plan.base_url)
    return replace(settings, notify=notify, assignment=plan.assignment)


def _serve(
    args: argparse.Namespace,
    served: Served,
    session: SupervisedAttestation,
    console: Console,
    server: InboxServer,
    plan: NotifyPlan | None,
) -> int:
    from pybb.inbox import attach_run

    errors = Console(stderr=True, highlight=False)
    model = attach_run(args.store, session.board_id)
    try:
        with _inbox(model, args, console, server, plan) as url:
            if plan is not None:
                told = ", ".join(sorted(plan.notifiers))
                console.print(f"notifying {plan.assignment.default} of each ask by {told}")
            fleet = session.attestation.fleet
            console.print(
                f"attesting fleet [bold]{fleet.name}[/]: {len(fleet.devices)} devices; "
                f"board {session.board_id!r} in {args.store}; inbox at {url}"
            )
            report = _attest(session, errors, served.quiet)
            print_report(console, report, args.examples)
            _write(args, session, report)
            with _stop_on_signals() as stop:  # before the line that invites Ctrl-C
                console.print(
                    f"{len(session.run.open_asks())} ask(s) open; answer them at {url} "
                    "(answers are applied as they come); Ctrl-C to stop"
                )
                session.run.serve(stop)
    finally:
        model.close()
    applied = session.run.applied()
    report = session.report()
    where = _write(args, session, report)
    console.print(f"stopped; {len(applied)} answer(s) applied; report written to {where}")
    return served.status(session, report)


def _attest(session: SupervisedAttestation, errors: Console, quiet: bool) -> FleetReport:
    if quiet:
        return session.attest()
    if not errors.is_terminal:  # no bar to draw: a log line per chunk instead
        from pybb.cli._attest_shared import log_progress

        return session.attest(log_progress)
    columns = (TextColumn("attesting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=errors) as progress:
        task = progress.add_task("attest", total=len(session.attestation.fleet.devices))
        return session.attest(lambda done, total: progress.update(task, completed=done))


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event SIGINT and SIGTERM set (answers are applied between polls) while in the block."""
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write(args: argparse.Namespace, session: SupervisedAttestation, report: FleetReport) -> str:
    data = report_data(args.store, session.board_id, report, session.attestation.blackboard)
    where = write_report(args.report, data)
    # pybb attest verify writes the JSON report alone.
    html, csv, jsonl = (getattr(args, name, None) for name in ("html", "csv", "jsonl"))
    write_outputs(data, html_path=html, csv_path=csv, jsonl_path=jsonl)
    return where


@contextmanager
def _inbox(
    model: Model,
    args: argparse.Namespace,
    console: Console,
    server: InboxServer,
    plan: NotifyPlan | None,
) -> Iterator[str]:
    """Serve the inbox in a thread; print its URL and one token per person; stop after."""
    from pybb.inbox import InboxSettings, TokenTable, create_app

    tokens = TokenTable()
    for human in args.inbox_human or [_DEFAULT_HUMAN]:
        token = tokens.issue(human)
        console.print(f"  token for human:{human.removeprefix('human:')}: {token}", markup=False)
    secret = None if plan is None else plan.link_secret
    # One policy for whom asks are for: the file's, else the notifications' --assign-to.
    assignment = getattr(args, "assignment", None)
    if assignment is None and plan is not None:
        assignment = plan.assignment
    app = create_app(
        model, tokens, settings=InboxSettings(link_secret=secret), assignment=assignment
    )
    with server.running(app) as url:
        console.print(f"pybb inbox for run {model.board_id!r}: {url}")
        yield url

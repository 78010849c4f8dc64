"""``pybb worker``: one worker process of a run shared through PostgreSQL (or SQLite).

Sources, predicates and routes are code, not data: a worker builds its controller with an
*application*, a function ``app(context) -> Controller`` it loads by name
(:func:`load_app`): a short name from :data:`APPS` or any ``"module:function"``. The
registry lives here, with the command, so that the engine (``pybb.Worker``) names no
application.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import signal
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from blackboard import BlackboardError
from blackboard.stores import Store, open_store
from pybb import Worker, WorkerApp, WorkerSettings
from pybb._engine.worker import run_worker
from pybb.cli._args import board_id, check_reachable, check_store, positive, seconds
from pybb.cli._errors import CommandError
from pybb.errors import PybbError

__all__ = ["APPS", "load_app", "register", "run_command"]

APPS: Mapping[str, str] = {
    "w1": "pybb.workloads:w1_app",
    "attest": "pybb.cli._attest_app:attest_app",
}
"""The applications a worker knows by a short name, and where each lives."""

_STOPPING = (signal.SIGTERM, signal.SIGINT)

_DESCRIPTION = """\
Work on one run together with any number of other workers, on any number of machines.
Each worker claims a batch of the run's entries that still need work (leased claims: on
PostgreSQL, SELECT ... FOR UPDATE SKIP LOCKED), runs the repair controller on them until
they settle, releases them and claims more. A heartbeat renews its leases; the entries of
a worker that dies are taken over by the others one lease later.

The sources, predicates and routes come from an application (--app): a short name (%s)
or module:function, a function app(context) -> Controller. The run's entries are written
by whoever submits the run, not by workers. Exit status: 0 when the run is settled (every
entry good, escalated or resolved) or closed, 2 when the store or application cannot be
used.
"""


def register(subparsers: Any) -> None:
    """Add the ``worker`` subcommand."""
    parser = subparsers.add_parser(
        "worker",
        help="work on a run's entries together with other worker processes",
        description=_DESCRIPTION % ", ".join(sorted(APPS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--store",
        required=True,
        help="the run's store: a postgresql://... URL, or sqlite:///FILE for workers on one "
        "machine (the file must exist: workers join a run, they never create one)",
    )
    parser.add_argument(
        "--run", "--board-id", dest="run", required=True, type=board_id, help="the run's board"
    )
    parser.add_argument("--app", required=True, help="the application: a name or module:function")
    parser.add_argument(
        "--app-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option for the application (repeatable)",
    )
    parser.add_argument("--name", help="this worker's name (default: host:pid:random)")
    parser.add_argument(
        "--lease", type=seconds, default=30.0, help="seconds a claim lasts unrenewed (default 30)"
    )
    parser.add_argument(
        "--batch", type=positive, default=1024, help="entries held at once (default 1024)"
    )
    parser.add_argument(
        "--progress",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="log a progress line (entries settled, claims held, lease renewals) this often",
    )
    parser.add_argument(
        "--follow", action="store_true", help="when settled, wait for new entries until closed"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing when done")
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run one worker until its run is settled, closed, or the process is told to stop.

    Failures are not caught here: ``pybb.cli.main`` turns them into one line and exit 2.
    """
    options = _options(args.app_option)
    app = load_app(args.app)
    check_store(args.store, shared=True)
    settings = WorkerSettings(
        lease=timedelta(seconds=args.lease),
        batch=args.batch,
        follow=args.follow,
        progress=timedelta(seconds=args.progress),
    )
    check_reachable(args.store)
    store = open_store(args.store)
    handlers = {signum: signal.getsignal(signum) for signum in _STOPPING}
    try:
        if not _has_board(store, args.run):
            raise CommandError(
                f"there is no run {args.run!r} in {args.store}; give the --run that "
                "pybb attest --submit (or whoever submitted the run) printed"
            )
        summary = run_worker(
            app, store, args.run, options=options, name=args.name, settings=settings,
            started=_stop_on_signals,
        )  # fmt: skip
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        store.close()
    if not args.quiet:
        print(
            f"worker {summary.name}: {summary.reason}; {summary.cycles} cycles, "
            f"{summary.attempts} attempts, {summary.claimed} claims, {summary.settled} entries "
            f"settled, {summary.lost} claims lost"
        )
    if summary.reason == "stopped" and signal.SIGINT in _INTERRUPTED:
        raise KeyboardInterrupt  # Ctrl-C: exit 130, "the same command resumes"
    return 0


def load_app(spec: str) -> WorkerApp:
    """The application ``spec`` names: a short name from :data:`APPS`, or ``module:function``.

    Raises:
        PybbError: The name is unknown, its module cannot be imported, or it is not callable.
    """
    path = APPS.get(spec, spec)
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise PybbError(
            f"application {spec!r} is neither a known name ({', '.join(sorted(APPS))}) nor "
            "'module:function'; give e.g. --app w1 or --app mypackage.apps:build"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PybbError(f"application {spec!r}: cannot import {module_name!r}: {exc}") from exc
    app = getattr(module, attribute, None)
    if not callable(app):
        raise PybbError(
            f"application {spec!r}: {module_name} has no function {attribute!r}; an application "
            "is a function app(context) -> Controller"
        )
    if not _takes_one_argument(app):
        raise PybbError(
            f"application {spec!r} is not an application: {module_name}.{attribute} is not a "
            "function taking one argument; an application is a function "
            "app(context) -> Controller, e.g. --app w1 or --app mypackage.apps:build"
        )
    built: WorkerApp = app
    return built


def _takes_one_argument(function: Any) -> bool:
    try:
        inspect.signature(function).bind(None)
    except TypeError:
        return False
    except ValueError:  # a builtin without a signature: let the call decide
        return True
    return True


def _has_board(store: Store, board: str) -> bool:
    """Whether the store holds the board (a worker never creates one)."""
    try:
        return store.declaration(board) is not None
    except BlackboardError:
        return False


def _options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PybbError(f"--app-option {pair!r} is not KEY=VALUE")
        options[key] = value
    return options


_INTERRUPTED: list[int] = []  # the signals that stopped the worker of this process


def _stop_on_signals(worker: Worker) -> None:
    """SIGTERM and SIGINT end the worker after its cycle, releasing its claims."""

    def stop(signum: int, frame: object) -> None:
        _INTERRUPTED.append(signum)
        worker.stop()

    for signum in _STOPPING:
        signal.signal(signum, stop)

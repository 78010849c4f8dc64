"""``pybb worker``: one worker process of a run shared through PostgreSQL (or SQLite)."""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import timedelta
from typing import Any

from blackboard import BlackboardError
from blackboard.stores import open_store
from pybb._engine.worker import APPS, Worker, WorkerSettings, load_app, run_worker
from pybb.errors import PybbError

__all__ = ["register", "run_command"]

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
    parser.add_argument("--store", required=True, help="the run's store: postgresql://... URL")
    parser.add_argument("--run", "--board-id", dest="run", required=True, help="the run's board")
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
        "--lease", type=float, default=30.0, help="seconds a claim lasts unrenewed (default 30)"
    )
    parser.add_argument("--batch", type=int, default=64, help="entries held at once (default 64)")
    parser.add_argument(
        "--follow", action="store_true", help="when settled, wait for new entries until closed"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing when done")
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run one worker until its run is settled, closed, or the process is told to stop."""
    try:
        options = _options(args.app_option)
        app = load_app(args.app)
        settings = WorkerSettings(
            lease=timedelta(seconds=args.lease), batch=args.batch, follow=args.follow
        )
        store = open_store(args.store)
    except (PybbError, BlackboardError) as exc:
        print(f"pybb worker: {exc}", file=sys.stderr)
        return 2
    handlers = {signum: signal.getsignal(signum) for signum in _STOPPING}
    try:
        summary = run_worker(
            app, store, args.run, options=options, name=args.name, settings=settings,
            started=_stop_on_signals,
        )  # fmt: skip
    except (PybbError, BlackboardError) as exc:
        print(f"pybb worker: {exc}", file=sys.stderr)
        return 2
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
    return 0


def _options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PybbError(f"--app-option {pair!r} is not KEY=VALUE")
        options[key] = value
    return options


def _stop_on_signals(worker: Worker) -> None:
    """SIGTERM and SIGINT end the worker after its cycle, releasing its claims."""

    def stop(signum: int, frame: object) -> None:
        worker.stop()

    for signum in _STOPPING:
        signal.signal(signum, stop)

"""The options of a ``pybb attest`` command that serves its run's inbox, in one place.

``pybb attest FOLDER|--demo N --inbox`` and ``pybb attest verify EVIDENCE_DIR --inbox``
take the same inbox, assignment and notification options, parsed and checked here
(the notification options themselves are ``_attest_notify``'s).
"""

from __future__ import annotations

import argparse

from pybb.cli._args import assignment_file, port
from pybb.cli._attest_notify import add_notify_options, check_notify_options
from pybb.cli._errors import CommandError

__all__ = ["add_inbox_options", "check_inbox_options"]


def add_inbox_options(parser: argparse.ArgumentParser, *, inbox_help: str) -> None:
    """Add ``--inbox`` (described by ``inbox_help``) and the options that go with it."""
    parser.add_argument("--inbox", action="store_true", help=inbox_help)
    parser.add_argument(
        "--inbox-port", type=port, default=8765, help="the inbox's port (default 8765; 0: any)"
    )
    parser.add_argument(
        "--inbox-human",
        action="append",
        default=[],
        metavar="NAME",
        help="print an inbox token for this person (repeatable; default: operator)",
    )
    parser.add_argument(
        "--assignment",
        type=assignment_file,
        default=None,
        metavar="FILE",
        help="with --inbox: whom each ask is for (JSON, or TOML if it ends in .toml), as "
        "for `pybb inbox --assignment`; each person sees their own asks first",
    )
    add_notify_options(parser)


def check_inbox_options(args: argparse.Namespace) -> None:
    """Refuse inbox options the command would not use, before the store is opened.

    Raises:
        CommandError: Naming the option and what to give instead.
    """
    check_notify_options(args)
    submit = getattr(args, "submit", False)  # --submit declares the loop for the workers
    if args.assignment is not None and not args.inbox and not submit:
        raise CommandError("--assignment routes the asks of the inbox; add --inbox")

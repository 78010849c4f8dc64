"""The ``pybb`` command line: one subcommand per entry of :data:`COMMANDS`.

Each subcommand's code lives in one module of this package (``demo``, ``attest``,
``inbox``, ``worker``; a module's private helpers beside it as ``_<module>_*.py``), in a
function ``register`` that takes the subparsers: it adds its parser with
``subparsers.add_parser(...)`` and sets ``handler`` to a function that takes the parsed
arguments and returns the exit status::

    def register(subparsers):
        parser = subparsers.add_parser("attest", help="...")
        parser.set_defaults(handler=run)

To add a subcommand, write such a module and add ``"module:function"`` to ``COMMANDS``.
The modules are imported only when the parser is built, so ``import pybb.cli`` is cheap.

A handler need not catch anything: :func:`main` runs it inside
``pybb.cli._errors.guarded``, which turns every failure into one sentence and an exit
status (2 usage or store, 130 Ctrl-C, 3 a bug), and configures logging first
(``pybb.cli._logging``); library code never configures logging.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["COMMANDS", "HelpFormatter", "build_parser", "main", "version"]

COMMANDS: tuple[str, ...] = (
    "pybb.cli.demo:register",
    "pybb.cli.attest:register",
    "pybb.cli.inbox:register",
    "pybb.cli.worker:register",
)
"""``"module:function"`` of each function that adds a subcommand, in help order."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and every option's default shown in ``--help``.

    Like ``argparse.ArgumentDefaultsHelpFormatter``, but an option whose help already
    says its default, or that has none worth saying (None, False, an empty list), is left
    as it is.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default in (None, False, [], argparse.SUPPRESS)
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("mrpybb")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="pybb",
        description="Mr. Pybb: a repair controller on a blackboard.",
        epilog=(
            "Exit statuses: 0 done; 1 what --fail-on (or the ground truth) fails on; "
            "2 the command line, the fleet or the store cannot be used; 3 a bug in pybb; "
            "130 interrupted (Ctrl-C; the same command resumes)."
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pybb (mrpybb) {version()}")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument(
        "-v",
        "--verbose",
        dest="log_verbose",
        action="count",
        default=0,
        help="more log lines (DEBUG; tracebacks)",
    )
    loud.add_argument(
        "-q",
        "--quiet",
        dest="log_quiet",
        action="store_true",
        help="only warnings and errors in the log",
    )
    parser.add_argument(
        "--log-json", action="store_true", help="log lines as JSON objects, one per line"
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for spec in COMMANDS:
        module, _, function = spec.partition(":")
        getattr(importlib.import_module(module), function)(subparsers)
    for sub in subparsers.choices.values():
        sub.formatter_class = HelpFormatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pybb`` command; return its exit status."""
    from pybb.cli._errors import guarded
    from pybb.cli._logging import NOISY_LOGGERS, configure_logging

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # usage errors (2), --help and --version (0): a status
        return stop.code if isinstance(stop.code, int) else 2 if stop.code else 0
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    verbosity = -1 if args.log_quiet else int(args.log_verbose)
    # Called in-process (tests, scripts), the command leaves logging as it found it.
    levels = {name: logging.getLogger(name).level for name in ("", *NOISY_LOGGERS)}
    installed = configure_logging(verbosity, json_lines=args.log_json)
    prog = f"pybb {_command(args)}".rstrip()
    try:
        return guarded(prog, lambda: int(handler(args)))
    finally:
        logging.getLogger().removeHandler(installed)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _command(args: Any) -> str:
    handler = getattr(args, "handler", None)
    module = getattr(handler, "__module__", "") or ""
    return module.rsplit(".", 1)[-1].removeprefix("_").split("_")[0]

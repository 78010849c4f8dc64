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
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: tuple[str, ...] = (
    "pybb.cli.demo:register",
    "pybb.cli.attest:register",
    "pybb.cli.inbox:register",
    "pybb.cli.worker:register",
)
"""``"module:function"`` of each function that adds a subcommand, in help order."""


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="pybb", description="Mr. Pybb: a repair controller on a blackboard."
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for spec in COMMANDS:
        module, _, function = spec.partition(":")
        getattr(importlib.import_module(module), function)(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pybb`` command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    return int(handler(args))

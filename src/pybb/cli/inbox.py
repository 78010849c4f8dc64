"""``pybb inbox``: serve a run's inbox on this machine."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from pybb.cli._args import (
    assignment_file,
    board_id,
    check_reachable,
    check_store,
    hours,
    port,
)
from pybb.inbox import (
    LOOPBACK_HOSTS,
    InboxError,
    InboxServer,
    InboxSettings,
    TokenTable,
    attach_run,
)

__all__ = ["TOKEN_ENV", "TOKEN_HUMAN_ENV", "register", "run_inbox"]

TOKEN_ENV = "PYBB_INBOX_TOKEN"
"""An environment variable holding a token to accept (it is never printed)."""
TOKEN_HUMAN_ENV = "PYBB_INBOX_HUMAN"
"""Who the token of :data:`TOKEN_ENV` stands for (default: the first ``--human``)."""

_DEFAULT_HUMAN = "operator"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the ``inbox`` subcommand; its handler is ``args.handler``."""
    parser = subparsers.add_parser(
        "inbox",
        help="serve a run's human inbox on this machine",
        description=(
            "Serve the web inbox where people answer a run's asks. A token is needed for "
            "every page: one is printed for each --human (shown once; only its SHA-256 "
            f"digest is kept), or set {TOKEN_ENV}, or keep tokens in --token-file."
        ),
    )
    parser.add_argument("--store", required=True, help="the run's store, e.g. sqlite:///run.db")
    parser.add_argument("--board-id", default=None, type=board_id, help="the run's board id")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port, default=8765, help="port (0: any free port)")
    parser.add_argument(
        "--human",
        action="append",
        default=[],
        metavar="NAME",
        help="issue a token for this person (repeatable)",
    )
    parser.add_argument("--token-file", type=Path, default=None, help="keep token digests here")
    parser.add_argument(
        "--token-ttl",
        type=hours,
        default=None,
        metavar="HOURS",
        help="issued tokens expire after this many hours (finite, above 0; default: never)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another Host name to answer to (e.g. when listening beyond loopback)",
    )
    parser.add_argument(
        "--assignment",
        type=assignment_file,
        default=None,
        metavar="FILE",
        help="whom each ask is for (JSON, or TOML if it ends in .toml): "
        '{"default": "team:<name>", "rules": [{"to": "human:<name>", "reason": ..., '
        '"class": ..., "scope": ...}]}; each person sees their own asks first, then their '
        "teams' (default: nobody's, oldest first)",
    )
    parser.set_defaults(handler=run_inbox)
    return parser


def run_inbox(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Serve the inbox until interrupted; return the exit status."""
    out = out or sys.stdout
    try:
        import uvicorn  # noqa: F401 - checked here so a missing extra fails early

        from pybb.inbox import create_app
    except ImportError as exc:
        print(f"pybb inbox: {exc}; pip install 'mrpybb[inbox]'", file=sys.stderr)
        return 2
    check_store(args.store)
    check_reachable(args.store)
    try:
        model = attach_run(args.store, args.board_id)
    except InboxError as exc:
        print(f"pybb inbox: {exc}", file=sys.stderr)
        return 2
    try:
        tokens = _tokens(args, out)
        server = InboxServer(args.host, args.port)
    except (InboxError, OSError) as exc:
        model.close()
        print(f"pybb inbox: {exc}", file=sys.stderr)
        return 2
    settings = InboxSettings(allowed_hosts=(*LOOPBACK_HOSTS, args.host, *args.allow_host))
    app = create_app(model, tokens, settings=settings, assignment=getattr(args, "assignment", None))
    try:  # Ctrl-C (or SIGTERM) is how an inbox stops: run returns once it has
        server.run(
            app,
            ready=lambda: print(
                f"pybb inbox for run {model.board_id!r}: {server.url}", file=out, flush=True
            ),
        )
        print("pybb inbox: stopped", file=out)
    except KeyboardInterrupt:  # a Ctrl-C before the server's handlers, while it was built
        print("pybb inbox: stopped", file=out)
    finally:
        model.close()
    return 0


def _tokens(args: argparse.Namespace, out: TextIO) -> TokenTable:
    tokens = TokenTable(args.token_file)
    ttl = None if args.token_ttl is None else timedelta(hours=args.token_ttl)
    configured = os.environ.get(TOKEN_ENV)
    if configured:
        who = os.environ.get(TOKEN_HUMAN_ENV) or (args.human or [_DEFAULT_HUMAN])[0]
        tokens.add(configured, who)
        print(f"  accepting the token in ${TOKEN_ENV} for {who}", file=out)
    humans = list(args.human)
    if not humans and not configured and not _has_usable(tokens):
        humans = [_DEFAULT_HUMAN]
    for human in humans:
        token = tokens.issue(human, ttl=ttl)
        print(f"  token for human:{human.removeprefix('human:')}: {token}", file=out)
    if not humans and not configured:
        print(f"  using the tokens kept in {args.token_file}", file=out)
    return tokens


def _has_usable(tokens: TokenTable) -> bool:
    now = tokens.now()
    return any(info.valid_at(now) for info in tokens.entries())

"""``pybb attest --inbox --notify-...``: tell people about their asks by webhook and email.

The options switch the transports on (``--notify-webhook URL``, ``--notify-smtp
HOST:PORT``); who is told, through which channels and outside which quiet hours is board
data (``pybb.human.Person``), loaded from ``--people FILE`` at the start and written to
the board. Asks go to ``--assign-to`` (default: the first ``--inbox-human``); a person
with no channel of their own is reached at ``--notify-webhook``'s URL. Secrets come from
environment variables the options name, never from the command line (which other users
of the machine can read in the process list). Each notification carries a signed,
single-use link to the inbox this command serves, and is charged to the run's attention
budget like the ask it is about.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pybb.cli._errors import CommandError

if TYPE_CHECKING:  # the plain `pybb attest` loads no human loop: imported where used
    from pybb.human import AssignmentPolicy, EmailNotifier, Notifier, Person

__all__ = ["NotifyPlan", "add_notify_options", "check_notify_options", "notify_plan"]

WEBHOOK_SECRET_ENV = "PYBB_WEBHOOK_SECRET"
SMTP_USER_ENV = "PYBB_SMTP_USER"
SMTP_PASSWORD_ENV = "PYBB_SMTP_PASSWORD"
PEOPLE_WRITER = "pybb:cli"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ADDRESS = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}")
_MAX_PEOPLE_BYTES = 1024 * 1024
_NOTIFY_OPTIONS = ("notify_webhook", "notify_smtp", "people")


def webhook_url(text: str) -> str:
    """An http(s) URL with a host."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an http(s) URL; give the webhook's address, e.g. "
            "https://hooks.example.org/pybb"
        )
    return text


def smtp_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address)."""
    host, colon, raw = text.rpartition(":")
    host = host.strip("[]") if host.startswith("[") else host
    if not colon or not host or not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT; give the SMTP server and its port, e.g. "
            "smtp.example.org:587 (587 with --smtp-starttls, 25 without)"
        )
    return host, int(raw)


def mail_address(text: str) -> str:
    """An email address (``name@domain``)."""
    if not _ADDRESS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an email address, e.g. pybb@example.org")
    return text


def env_name(text: str) -> str:
    """The name of an environment variable (not its value)."""
    if not _ENV_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an environment variable's name; give the NAME of a variable "
            "that holds the secret (the secret itself never goes on the command line)"
        )
    return text


def assign_target(text: str) -> str:
    """``human:<name>`` or ``team:<name>`` (a bare name is a person)."""
    from pybb.human import human_name, team_name

    target = text if text.startswith(("human:", "team:")) else f"human:{text}"
    if human_name(target) is None and team_name(target) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither human:NAME nor team:NAME (letters, digits, . _ -)"
        )
    return target


def add_notify_options(parser: argparse.ArgumentParser) -> None:
    """Add the notification options to ``pybb attest``."""
    group = parser.add_argument_group(
        "notifications (with --inbox)",
        "Tell people about their asks, with a signed single-use link to each. Who is told "
        "and how is board data: --people FILE. Secrets come from environment variables.",
    )
    group.add_argument(
        "--notify-webhook",
        type=webhook_url,
        metavar="URL",
        help="POST notifications as signed JSON (X-Pybb-Signature: sha256=HMAC); people "
        "without a channel of their own are notified at URL",
    )
    group.add_argument(
        "--webhook-secret-env",
        type=env_name,
        default=WEBHOOK_SECRET_ENV,
        metavar="NAME",
        help="the environment variable holding the webhook's HMAC secret, at least 16 "
        f"bytes (default {WEBHOOK_SECRET_ENV})",
    )
    group.add_argument(
        "--link-secret-env",
        type=env_name,
        metavar="NAME",
        help="the environment variable holding the key that signs the notifications' links, "
        "at least 16 bytes: with it, links stay valid when pybb attest --inbox is started "
        "again (default: a fresh key per run, so a restart voids the links already sent)",
    )
    group.add_argument(
        "--notify-smtp",
        type=smtp_address,
        metavar="HOST:PORT",
        help="send notifications by email through this SMTP server (needs --notify-from)",
    )
    group.add_argument(
        "--notify-from", type=mail_address, metavar="ADDRESS", help="the emails' From address"
    )
    group.add_argument(
        "--smtp-starttls", action="store_true", help="upgrade the SMTP connection with STARTTLS"
    )
    group.add_argument(
        "--smtp-user-env",
        type=env_name,
        default=SMTP_USER_ENV,
        metavar="NAME",
        help=f"log in to SMTP as the user this variable names, if set (default {SMTP_USER_ENV})",
    )
    group.add_argument(
        "--smtp-password-env",
        type=env_name,
        default=SMTP_PASSWORD_ENV,
        metavar="NAME",
        help=f"the SMTP password's variable (default {SMTP_PASSWORD_ENV})",
    )
    group.add_argument(
        "--people",
        type=Path,
        metavar="FILE",
        help='people, their channels, quiet hours and teams, as JSON: {"people": [{"who": '
        '"human:alice", "channels": [{"kind": "email", "address": "alice@example.org"}], '
        '"quiet": {"start": "22:00", "end": "07:00", "tz": "Europe/Berlin"}, "teams": '
        '["ops"]}]}',
    )
    group.add_argument(
        "--assign-to",
        type=assign_target,
        metavar="WHO",
        help="whom every ask is for, and so who is notified: human:NAME or team:NAME "
        "(default: the first --inbox-human)",
    )


def _wants_notify(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) is not None for name in _NOTIFY_OPTIONS)


def check_notify_options(args: argparse.Namespace) -> None:
    """Refuse notification options the command would not use, before the store is opened.

    Raises:
        CommandError: Naming the option and what to give instead.
    """
    if not _wants_notify(args):
        if getattr(args, "link_secret_env", None) is not None:
            raise CommandError(
                "--link-secret-env signs the links notifications carry: give it with "
                "--notify-webhook or --notify-smtp, or leave it out"
            )
        return
    if getattr(args, "submit", False):
        raise CommandError(
            "--notify-webhook, --notify-smtp and --people belong to the command that serves "
            "the inbox: run pybb attest --submit without them, and give them to the "
            "pybb attest --inbox that follows the workers"
        )
    if not getattr(args, "inbox", False):
        raise CommandError(
            "--notify-webhook, --notify-smtp and --people need --inbox: a notification links "
            "to the ask in the inbox this command serves; add --inbox"
        )
    if args.notify_webhook is None and args.notify_smtp is None:
        raise CommandError(
            "--people without a transport notifies nobody: add --notify-webhook URL or "
            "--notify-smtp HOST:PORT --notify-from ADDRESS"
        )
    notify_plan(args, "http://127.0.0.1/")  # every other check, with a stand-in address


@dataclass(frozen=True, slots=True)
class NotifyPlan:
    """The notification settings a run of ``pybb attest --inbox`` was given.

    Attributes:
        notifiers: A notifier per channel kind.
        people: The people to write to the board at the start.
        assignment: Whom the asks are for.
        link_secret: The key of the links (the inbox this command serves shares it).
        base_url: The inbox's address, which the links point into.
    """

    notifiers: dict[str, Notifier]
    people: tuple[Person, ...]
    assignment: AssignmentPolicy
    link_secret: bytes
    base_url: str

    def record_people(self, control: Any) -> None:
        """Write every person to the board (each replaces that person's last record)."""
        from pybb.human import set_person

        for person in self.people:
            set_person(control, person, writer=PEOPLE_WRITER)


def notify_plan(args: argparse.Namespace, base_url: str) -> NotifyPlan | None:
    """The notification settings of ``args`` (``None``: none asked for).

    Raises:
        CommandError: A secret is missing or short, a people file cannot be read, or
            the person asks go to cannot be reached by any transport given.
    """
    from pybb.human import AssignmentPolicy, WebhookNotifier

    if not _wants_notify(args):
        return None
    notifiers: dict[str, Notifier] = {}
    if args.notify_webhook is not None:
        notifiers["webhook"] = WebhookNotifier(_webhook_secret(args.webhook_secret_env))
    if args.notify_smtp is not None:
        notifiers["email"] = _email(args)
    elif args.notify_from is not None or args.smtp_starttls:
        raise CommandError("--notify-from and --smtp-starttls need --notify-smtp HOST:PORT")
    target = args.assign_to or assign_target((args.inbox_human or ["operator"])[0])
    people = _people(args.people) if args.people is not None else {}
    people = _reach(people, target, args.notify_webhook)
    _check_reachable(people, target, notifiers, args.people)
    # --assignment FILE, when given, decides whom asks are for (and so who is told).
    assignment = getattr(args, "assignment", None)
    if assignment is not None and args.assign_to is not None:
        raise CommandError(
            "--assign-to and --assignment both say whom asks are for: give one (put the "
            "--assign-to target in the file as its default)"
        )
    assignment = assignment or AssignmentPolicy(default=target)
    return NotifyPlan(
        notifiers,
        tuple(people.values()),
        assignment,
        _link_secret(args.link_secret_env),
        base_url,
    )


def _webhook_secret(name: str) -> bytes:
    return _secret(name, "--notify-webhook: the webhook's", "--webhook-secret-env")


def _link_secret(name: str | None) -> bytes:
    # A fresh key unless one is named: links then die with the run, which is the safe default.
    if name is None:
        return secrets.token_bytes(32)
    return _secret(name, "--link-secret-env: the links'", "--link-secret-env")


def _secret(name: str, whose: str, option: str) -> bytes:
    value = os.environ.get(name, "")
    if len(value.encode()) < 16:
        state = "is not set" if name not in os.environ else "is shorter than 16 bytes"
        raise CommandError(
            f"{whose} secret variable {name} {state}; export "
            f"{name}=<a shared secret of at least 16 bytes> (e.g. from `openssl rand -hex "
            f"32`), or name another variable with {option}"
        )
    return value.encode()


def _email(args: argparse.Namespace) -> EmailNotifier:
    from pybb.human import EmailNotifier

    if args.notify_from is None:
        raise CommandError(
            "--notify-smtp needs --notify-from ADDRESS: the From address of the emails"
        )
    host, smtp_port = args.notify_smtp
    user = os.environ.get(args.smtp_user_env) or None
    password = os.environ.get(args.smtp_password_env)
    if user is not None and password is None:
        raise CommandError(
            f"--notify-smtp: {args.smtp_user_env} names an SMTP user but "
            f"{args.smtp_password_env} is not set; export the password there (or unset "
            f"{args.smtp_user_env} to send without logging in)"
        )
    if user is not None and not args.smtp_starttls:
        raise CommandError(
            "--notify-smtp: logging in without --smtp-starttls would send the password in "
            "clear text; add --smtp-starttls"
        )
    return EmailNotifier(
        host,
        smtp_port,
        sender=args.notify_from,
        starttls=args.smtp_starttls,
        username=user,
        password=password,
    )


def _people(path: Path) -> dict[str, Person]:
    from pybb.human import MalformedContentError, Person

    where = f"--people {str(path)!r}"
    try:
        if path.stat().st_size > _MAX_PEOPLE_BYTES:
            raise CommandError(f"{where} is larger than 1 MiB; is it the right file?")
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"{where}: there is no such file; give the people's JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{where} cannot be read: {exc}") from None
    except ValueError as exc:
        raise CommandError(f"{where} is not JSON ({exc}); see pybb attest -h") from None
    listed = document.get("people") if isinstance(document, dict) else document
    if not isinstance(listed, list):
        raise CommandError(f'{where} must be {{"people": [...]}} or a list of people')
    found: dict[str, Person] = {}
    for number, entry in enumerate(listed, 1):
        try:
            person = Person.from_json(entry)
        except MalformedContentError as exc:
            raise CommandError(f"{where}: person {number}: {exc}") from None
        found[person.who] = person
    return found


def _reach(people: dict[str, Person], target: str, url: str | None) -> dict[str, Person]:
    """Give people without a channel of their own the default webhook, if there is one."""
    from pybb.human import Channel, Person, human_name

    if url is None:
        return people
    found = dict(people)
    if human_name(target) is not None and target not in found:
        found[target] = Person(target)
    for who, person in found.items():
        if not person.channels:
            found[who] = replace(person, channels=(Channel("webhook", url),))
    return found


def _check_reachable(
    people: dict[str, Person], target: str, notifiers: dict[str, Notifier], path: Path | None
) -> None:
    from pybb.human import team_name

    team = team_name(target)
    told = [p for p in people.values() if team in p.teams] if team else [people.get(target)]
    source = f"--people {str(path)!r}" if path is not None else "no --people file"
    if not any(p is not None and p.channels for p in told):
        whom = f"nobody on team {team} with a channel" if team else f"no channel for {target}"
        raise CommandError(
            f"--assign-to {target}: {source} has {whom}, so nobody would be notified; add "
            "them to the people file with a channel, or give --notify-webhook URL"
        )
    for person in people.values():
        for channel in person.channels:
            if channel.kind not in notifiers:
                option = "--notify-webhook URL" if channel.kind == "webhook" else "--notify-smtp"
                raise CommandError(
                    f"{source} gives {person.who} a {channel.kind} channel, but no {option} is "
                    f"given to send through it; add {option} (or drop that channel)"
                )

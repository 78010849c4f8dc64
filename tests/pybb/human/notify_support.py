"""Helpers of the notification tests: a board with the people side, a webhook receiver,
a local SMTP server (aiosmtpd), and a self-signed certificate for STARTTLS."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from human_support import make_ask

from blackboard import Model, create_model
from pybb.human import (
    HUMAN_REGIONS,
    PEOPLE_REGIONS,
    Ask,
    DeadlinePolicy,
    answer_rule,
    compose_rules,
    post_ask,
)

START = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)
SECRET = b"link-secret-0123456789abcdef"
HOOK_SECRET = b"hook-secret-0123456789abcdef"


def open_people_board(path: Path) -> Model:
    return create_model(
        regions=[*HUMAN_REGIONS, *PEOPLE_REGIONS],
        admission_rule=compose_rules(answer_rule),
        store=f"sqlite:///{path}",
        board_id="run",
    )


def post(model: Model, ask_id: str, policy: DeadlinePolicy, **fields: Any) -> Ask:
    ask = policy.stamp(replace(make_ask(ask_id), **{"created_at": START, **fields}))
    post_ask(model.control, ask)
    return ask


@dataclass
class Receiver:
    """A webhook receiver on a loopback port: answers each POST with the next status."""

    statuses: list[int] = field(default_factory=list)
    delay: float = 0.0
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""


@contextlib.contextmanager
def webhook_receiver(statuses: list[int] | None = None, delay: float = 0.0) -> Iterator[Receiver]:
    receiver = Receiver(list(statuses or []), delay)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.received.append((dict(self.headers), body))
            if receiver.delay:
                time.sleep(receiver.delay)
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def payloads(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(body) for _, body in receiver.received]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, made with ``cryptography``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Mailbox:
    messages: list[Any] = field(default_factory=list)
    port: int = 0


@contextlib.contextmanager
def smtp_server(tls: tuple[Path, Path] | None = None) -> Iterator[Mailbox]:
    """An aiosmtpd server on 127.0.0.1 collecting messages; STARTTLS required if ``tls``."""
    from email import message_from_bytes, policy

    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import SMTP, Envelope, Session

    box = Mailbox(port=free_port())

    class Handler:
        async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
            self, server: SMTP, session: Session, envelope: Envelope
        ) -> str:
            raw = envelope.original_content or b""
            box.messages.append(message_from_bytes(raw, policy=policy.default))
            return "250 OK"

    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=box.port,
        tls_context=context,
        require_starttls=tls is not None,
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()

"""Helpers of the inbox tests: a board with asks, clients for the real app, a real server.

Every test runs the real application: in process through httpx's ASGI transport, or
served by uvicorn on a free loopback port in a background thread that is always stopped.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import uvicorn

from blackboard import Level, Model, Premise, create_model
from pybb.human import (
    HUMAN_REGIONS,
    PEOPLE_REGIONS,
    Ask,
    Option,
    answer_rule,
    compose_rules,
    post_ask,
)
from pybb.inbox import InboxSettings, RateLimit, TokenTable, create_app

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(document.cookie)",
    "[click me](javascript:alert(1))",
    '"><svg onload=alert(1)>',
    "</pre><script>alert(2)</script><pre>",
]
BUDGET = {
    "fleet": {"spent": 7, "ceiling": 20},
    "fleet/site-a": {"spent": 5, "ceiling": 8},
    "fleet/site-b": {"spent": 2, "ceiling": 12},
}
REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / "test-artifacts" / "inbox"


def hostile_ask(n: int, *, to: tuple[str, ...] = ()) -> Ask:
    """An ask with a hostile string in every text field."""
    evil = HOSTILE[n % len(HOSTILE)]
    other = HOSTILE[(n + 1) % len(HOSTILE)]
    return Ask(
        ask_id=f"ask-{n}",
        entry=f"entry-{n} {evil}",
        subject=f"rack{n}-node{evil}",
        title=f"Unknown digest {evil}",
        report=f"PCR 4 differs from the reference.\n{evil}\n{other}\n<a href='javascript:x'>x</a>",
        options=(
            Option("accept", f"Accept digest {evil}", recommended=True, detail=other),
            Option("quarantine", f"Quarantine {other}", detail=evil),
            Option("remeasure", "Re-measure"),
        ),
        confidence=0.5 + (n % 5) / 10,
        scope=f"fleet/site-{evil}",
        report_data={"pcr": 4, "html": evil, other: [evil, {"k": other}]},
        to=to,
    )


def tampered_ask(
    n: int, digest: str = "aa" * 32, *, cls: str = "rhel9-shim", age: timedelta = timedelta(0)
) -> Ask:
    """An attestation-like ask: a tampered component with ``digest`` in PCR 4, ``age`` old.

    Its ``accept`` option is ``accept-digest``, the one that changes fleet policy (and so
    gets a preview and a confirmation).
    """
    base = hostile_ask(n)
    finding = {"pcr": 4, "found": digest, "reason": "tampered_component", "event_type": "E",
               "label": "shim"}  # fmt: skip
    candidate = {"class": cls, "pcr": 4, "digest": digest, "event_type": "E", "label": "shim"}
    tier = {"reason": "tampered_component", "class": cls, "findings": [finding],
            "allowlist_candidates": [candidate]}  # fmt: skip
    options = tuple(replace(o, id="accept-digest") if o.id == "accept" else o for o in base.options)
    return replace(
        base, ask_id=f"t-{n}", entry=f"dev-{n}", subject=f"dev-{n} {HOSTILE[n % len(HOSTILE)]}",
        options=options, report_data={"tier_report": tier},
        created_at=datetime.now(UTC) - age,
    )  # fmt: skip


def tampered_fleet(path: Path, *, age: timedelta = timedelta(0)) -> Model:
    """A board of four tampered asks, ``t-0`` to ``t-3``.

    The first three share one root cause (digest ``aa…`` on ``rhel9-shim``, each ``age``
    old); ``t-3`` is another (digest ``bb…`` on ``arch-linux``, new).
    """
    model = new_board(path)
    for n in range(3):
        post_ask(model.control, tampered_ask(n, age=age))
    post_ask(model.control, tampered_ask(3, "bb" * 32, cls="arch-linux"))
    return model


REALISTIC = [
    Ask(
        ask_id="att-rack3-node07",
        entry="device:rack3-node07",
        subject="rack3-node07 (Dell R650, TPM 2.0)",
        title="Unknown bootloader digest on rack3-node07",
        report=(
            "Integrity check failed: PCR 4 does not match the reference.\n"
            "Attribution replayed 38 events and found one component that differs:\n"
            "  EV_EFI_BOOT_SERVICES_APPLICATION  \\EFI\\ubuntu\\shimx64.efi\n"
            "    expected sha256 9f2c…41ab  (shim 15.7-0ubuntu1)\n"
            "    measured sha256 3b7e…c0d2  (not in the allowlist)\n"
            "Secure Boot is enabled; the signing certificate is Canonical's.\n"
            "The same digest was seen on 2 other devices in site-a today."
        ),
        options=(
            Option(
                "accept",
                "Accept the new digest",
                recommended=True,
                detail="Add it to the allowlist; the other devices with it will pass.",
            ),
            Option("quarantine", "Quarantine the device", detail="Cut it off until inspected."),
            Option("remeasure", "Re-measure", detail="Ask the device for a fresh quote."),
        ),
        confidence=0.82,
        scope="fleet/site-a",
        report_data={"pcr": 4, "events_replayed": 38, "seen_on": ["rack3-node02", "rack3-node11"]},
    ),
    Ask(
        ask_id="att-edge-gw-14",
        entry="device:edge-gw-14",
        subject="edge-gw-14 (Lenovo SE350)",
        title="Secure Boot disabled on edge-gw-14",
        report=(
            "Verification tier: the quote matches the log, but the policy check failed.\n"
            "  SecureBoot = 0 (policy requires 1)\n"
            "  PK, KEK and db unchanged since the last good attestation.\n"
            "No other policy violation."
        ),
        options=(
            Option("quarantine", "Quarantine the device", recommended=True),
            Option("remeasure", "Re-measure after a reboot"),
            Option("exempt", "Exempt for 24 hours", detail="Only with a change ticket."),
        ),
        confidence=0.64,
        scope="fleet/site-b",
    ),
    Ask(
        ask_id="att-db-replica-2",
        entry="device:db-replica-2",
        subject="db-replica-2 (Supermicro X12)",
        title="Kernel command line changed on db-replica-2",
        report=(
            "PCR 8 differs: GRUB measured a new kernel command line.\n"
            "  before: ro quiet splash\n"
            "  after:  ro quiet splash mitigations=off\n"
            "A change like this usually comes from a tuning playbook."
        ),
        options=(
            Option("accept", "Accept the change", detail="Allow this command line from now on."),
            Option("revert", "Revert and re-measure", recommended=True),
        ),
        confidence=0.71,
        scope="fleet/site-a",
    ),
]


def new_board(path: Path, board_id: str = "run-1", *, people: bool = False) -> Model:
    """A run with the human loop, an application level and a budget premise.

    With ``people``, it declares the people levels too (people, reassignments, ...).
    """
    people_levels = list(PEOPLE_REGIONS) if people else []
    return create_model(
        regions=[*HUMAN_REGIONS, *people_levels, Level("entries"), Premise("budget")],
        premises={"budget": BUDGET},
        admission_rule=compose_rules(answer_rule),
        store=f"sqlite:///{path}",
        board_id=board_id,
    )


def settings(**changes: Any) -> InboxSettings:
    """Test settings: loopback hosts, and rates high enough not to get in the way."""
    base: dict[str, Any] = {
        "answer_rate": RateLimit(per_minute=100_000, burst=10_000),
        "login_rate": RateLimit(per_minute=100_000, burst=10_000),
        "nonce_secret": b"k" * 32,
    }
    return InboxSettings(**{**base, **changes})


class FakeClock:
    """A settable clock for token and session expiry."""

    def __init__(self) -> None:
        self.now = datetime(2025, 5, 9, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


# -- clients -----------------------------------------------------------------------------------


class AppClient:
    """A synchronous client of the app in process (httpx's ASGI transport on a portal loop)."""

    def __init__(self, app: Any, base_url: str = "http://127.0.0.1", **kwargs: Any) -> None:
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self.base_url = base_url
        self.client: httpx.AsyncClient = self.portal.call(self._make, app, base_url, kwargs)
        self.responses: list[httpx.Response] = []

    @staticmethod
    async def _make(app: Any, base_url: str, kwargs: dict[str, Any]) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        return httpx.AsyncClient(transport=transport, base_url=base_url, **kwargs)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        call = functools.partial(self.client.request, method, url, **kwargs)
        response: httpx.Response = self.portal.call(call)
        self.responses.append(response)
        return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        headers = {"origin": self.base_url, **kwargs.pop("headers", {})}
        return self.request("POST", url, headers=headers, **kwargs)

    def gather(self, *calls: tuple[str, str, dict[str, Any]]) -> list[httpx.Response]:
        """Send several requests at once (concurrently on the app's loop)."""

        async def all_at_once() -> list[httpx.Response]:
            tasks = [self.client.request(m, u, **k) for m, u, k in calls]
            return list(await asyncio.gather(*tasks))

        found = self.portal.call(all_at_once)
        self.responses.extend(found)
        return found

    def close(self) -> None:
        self.portal.call(self.client.aclose)
        self._portal_cm.__exit__(None, None, None)


@dataclass
class Form:
    action: str
    fields: dict[str, str] = field(default_factory=dict)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(found.get("action", "")))
        elif tag == "input" and self.forms and found.get("name"):
            self.forms[-1].fields[found["name"]] = found.get("value", "")


def forms(html: str) -> list[Form]:
    """The forms of a page, with their hidden fields."""
    parser = _FormParser()
    parser.feed(html)
    return parser.forms


def answer_form(html: str, ask_id: str, option: str) -> Form:
    """The form that answers ``ask_id`` with ``option``."""
    for form in forms(html):
        if form.action == f"/asks/{ask_id}/answer" and form.fields.get("option") == option:
            return form
    raise AssertionError(f"no form for {ask_id}/{option}")


def login(client: AppClient, token: str) -> str:
    """Log in; return the page of open asks."""
    response = client.post("/login", data={"token": token})
    assert response.status_code == 303, response.text
    page = client.get("/")
    assert page.status_code == 200
    return page.text


# -- a real server -----------------------------------------------------------------------------


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def serve(app: Any, *, log_config: Any = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port; yield its URL; always stop it."""
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_config=log_config,
        access_log=True,
        timeout_graceful_shutdown=1,
        lifespan="on",
        ws="none",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "the inbox server did not stop"


# -- canaries ----------------------------------------------------------------------------------


def canary_forms(secret: str) -> dict[str, str]:
    """The forms a leaked secret may take: raw, base64 (any alignment), URL-encoded, hex."""
    raw = secret.encode()
    found = {"raw": secret, "url": urllib.parse.quote(secret, safe="")}
    found["url+"] = urllib.parse.quote_plus(secret)
    found["hex"] = binascii.hexlify(raw).decode()
    found["HEX"] = found["hex"].upper()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        # Drop the characters that depend on the neighbouring bytes.
        core = encoded[(offset * 4 + 2) // 3 + (1 if offset else 0) : -4]
        found[f"base64/{offset}"] = core
        found[f"base64url/{offset}"] = core.replace("+", "-").replace("/", "_")
    return found


def find_canaries(haystacks: dict[str, str], secrets: list[str]) -> list[str]:
    """Where any form of any secret appears, as ``"<haystack>: <form>"``."""
    hits = []
    for secret in secrets:
        for form_name, needle in canary_forms(secret).items():
            for name, text in haystacks.items():
                if needle and needle in text:
                    hits.append(f"{name}: {form_name}")
    return hits


def new_tokens(path: Path | None = None, clock: FakeClock | None = None) -> TokenTable:
    return TokenTable(path, clock=clock)


def post_asks(model: Model, asks: list[Ask]) -> None:
    for ask in asks:
        post_ask(model.control, ask)


def app_for(model: Model, tokens: TokenTable, **changes: Any) -> Any:
    return create_app(model, tokens, settings=settings(**changes))


# -- the pybb inbox command, in a process of its own ---------------------------------------------


@dataclass
class Served:
    """A running ``pybb inbox`` process."""

    url: str
    process: subprocess.Popen[str]
    printed: str
    out: str = ""
    err: str = ""

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


@contextlib.contextmanager
def run_command(*args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """Run ``pybb inbox ARGS --port 0`` (the real command line); yield once it answers.

    It is always stopped, with Ctrl-C as a person would.

    Its output is drained all along (a full pipe would block its logging, and with it
    the server), and kept on ``out``/``err`` once it has stopped.
    """
    command = [sys.executable, "-m", "pybb", "inbox", *args, "--port", "0"]
    process = subprocess.Popen(
        command,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    out: list[str] = []
    err: list[str] = []
    drains = [
        threading.Thread(target=lambda: err.extend(process.stderr), daemon=True),  # type: ignore[arg-type]
    ]
    drains[0].start()
    served = None
    try:
        printed = ""
        while "http://" not in printed:
            line = process.stdout.readline()
            if not line:
                raise AssertionError(f"pybb inbox exited: {process.wait()} {''.join(err)}")
            printed += line
        drains.append(threading.Thread(target=lambda: out.extend(process.stdout), daemon=True))  # type: ignore[arg-type]
        drains[1].start()
        url = next(w for w in printed.split() if w.startswith("http://")).rstrip("/")
        _wait_until_up(url)
        served = Served(url, process, printed)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for drain in drains:
            drain.join(timeout=10)
        process.stdout.close()
        process.stderr.close()
        if served is not None:
            served.out, served.err = "".join(out), "".join(err)


def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/login", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("pybb inbox did not start")

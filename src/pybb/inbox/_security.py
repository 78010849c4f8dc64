"""The inbox's outer guard, as pure ASGI middleware (it must not buffer the event stream).

For every HTTP request: the ``Host`` must be one the inbox answers to; a state-changing
request must not come from a foreign origin (``Origin``, ``Sec-Fetch-Site``, ``Referer``);
a body larger than the cap is refused with 413, whether announced or streamed; and every
response carries the security headers (CSP without inline script, no framing, no
sniffing, no referrer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "SECURITY_HEADERS", "SecurityMiddleware"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""The Content-Security-Policy of every response: scripts only from the inbox's own files."""

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CSP),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=(), payment=()"),
)
"""The headers every response carries."""

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_RAW_HEADERS = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS]


class _BodyTooLargeError(Exception):
    """The request body passed the cap while the application read it."""


class SecurityMiddleware:
    """Host and origin checks, the body cap, and the security headers.

    Args:
        app: The application it guards.
        allowed_hosts: Host names (no port) the inbox answers to.
        max_body_bytes: The largest request body accepted.
    """

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str], max_body_bytes: int) -> None:
        self._app = app
        self._hosts = frozenset(h.lower().strip("[]") for h in allowed_hosts)
        self._cap = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _deny(scope, send, *refusal)
            return
        await self._guarded(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        if _hostname(host) not in self._hosts:
            return 403, "foreign_host", "This inbox does not answer to that host name."
        if scope["method"] not in _SAFE_METHODS and not _same_origin(scope, headers, host):
            return 403, "foreign_origin", "A request from another site cannot change this inbox."
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self._cap):
            return 413, "too_large", f"The request body is over the {self._cap}-byte limit."
        return None

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._cap:
                    raise _BodyTooLargeError
            return message

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = _with_headers(message, scope)
            await send(message)

        try:
            await self._app(scope, counted_receive, send_with_headers)
        except _BodyTooLargeError:
            if started:
                raise
            await _deny(scope, send, 413, "too_large", f"The body is over {self._cap} bytes.")


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope["headers"]:
        found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same_origin(scope: Scope, headers: dict[str, str], host: str) -> bool:
    """Whether a state-changing request comes from the inbox's own pages (or no browser).

    ``Sec-Fetch-Site`` is set by the browser and cannot be forged by a page, so when
    present it decides. Chromium sends ``Origin: null`` on the inbox's own form posts
    because of ``Referrer-Policy: no-referrer``; a null origin is accepted only with
    ``Sec-Fetch-Site: same-origin``. Any other ``Origin`` or ``Referer`` must be ours.
    """
    own = f"{scope.get('scheme', 'http')}://{host.lower()}"
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin == "null":
        return fetch_site == "same-origin"
    if origin is not None:
        return origin.lower() == own
    referer = headers.get("referer")
    return referer is None or referer.lower().startswith(own + "/")


def _with_headers(message: Message, scope: Scope) -> Message:
    raw = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"server"]
    present = {k.lower() for k, _ in raw}
    raw += [(k, v) for k, v in _RAW_HEADERS if k not in present]
    if b"cache-control" not in present and not scope["path"].startswith("/static/"):
        raw.append((b"cache-control", b"no-store"))
    return {**message, "headers": raw}


async def _deny(scope: Scope, send: Send, status: int, code: str, message: str) -> None:
    if scope["path"].startswith("/api/"):
        body = json.dumps({"error": code, "message": message}).encode()
        kind = b"application/json"
    else:
        body = message.encode()
        kind = b"text/plain; charset=utf-8"
    start: dict[str, Any] = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
    }
    await send(_with_headers(start, scope))
    await send({"type": "http.response.body", "body": body})

"""Serving the inbox with uvicorn: the one place that binds, configures and runs it.

``pybb inbox`` serves in the foreground until Ctrl-C; ``pybb attest --inbox`` serves in a
thread beside the fleet's run. Both bind the socket first, so the URL (with the port that
``port=0`` got) can be printed before anything is served, and a port in use is refused
before the application is built.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pybb.inbox._logs import redact_access_log

__all__ = ["InboxServer"]

_STARTUP_SECONDS = 10.0
_STOP_SECONDS = 10.0


class InboxServer:
    """A listening socket for the inbox, and uvicorn to serve an application on it.

    Args:
        host: The address to listen on (an IPv6 address listens on IPv6).
        port: The port; 0 takes any free one (:attr:`port` says which).
        quiet: Log warnings only and no access log (for a command that prints its own
            progress); otherwise uvicorn logs at ``info`` with its access log, whose query
            strings are cut (:func:`pybb.inbox._logs.redact_access_log`).

    Raises:
        OSError: The address cannot be bound (e.g. the port is in use).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8765, *, quiet: bool = False) -> None:
        self.host = host
        self.quiet = quiet
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]

    @property
    def url(self) -> str:
        """The inbox's address, e.g. ``http://127.0.0.1:8765/``."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"

    def run(self, app: Any, ready: Callable[[], object] | None = None) -> None:
        """Serve ``app`` in this thread until Ctrl-C or SIGTERM; return; close the socket after.

        ``ready`` is called once Ctrl-C already stops the server (to print its URL, say).
        From then on SIGINT and SIGTERM only ask the server to stop; without that, a Ctrl-C
        that came before uvicorn had installed its own handlers (or one it re-raised after
        removing them) raised KeyboardInterrupt wherever the main thread was, once inside
        a lock's release: "cannot release un-acquired lock", reported as a bug.
        """
        server = self._server(app)

        def stop(_signal: int, _frame: object) -> None:
            server.should_exit = True

        on_main = threading.current_thread() is threading.main_thread()
        handled = (signal.SIGINT, signal.SIGTERM) if on_main else ()
        previous = {sig: signal.signal(sig, stop) for sig in handled}
        try:
            if ready is not None:
                ready()
            server.run(sockets=[self._socket])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.close()

    @contextmanager
    def running(self, app: Any) -> Iterator[str]:
        """Serve ``app`` in a thread; yield the URL once it is up; stop and close after."""
        server = self._server(app)
        # A daemon: a server that does not stop must not keep the process alive.
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        thread.start()
        try:
            _wait(lambda: bool(server.started) or not thread.is_alive())
            yield self.url
        finally:
            server.should_exit = True
            thread.join(timeout=_STOP_SECONDS)
            self.close()

    def close(self) -> None:
        """Close the socket (again is a no-op)."""
        self._socket.close()

    def _server(self, app: Any) -> Any:
        import uvicorn  # the inbox extra; imported only to serve

        redact_access_log()
        config = uvicorn.Config(
            app,
            host=self.host,
            port=self.port,
            log_level="warning" if self.quiet else "info",
            # The access log prints method and path only; tokens never travel in URLs.
            access_log=not self.quiet,
            server_header=False,
            proxy_headers=False,
            timeout_graceful_shutdown=3,
            lifespan="on",
        )
        return uvicorn.Server(config)

    def __repr__(self) -> str:
        return f"InboxServer({self.url!r})"


def _bind(host: str, port: int) -> socket.socket:
    # Name the protocol: asyncio sets TCP_NODELAY only on sockets whose proto is TCP, and
    # without it every keep-alive response waits ~40 ms for a delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _wait(ready: Callable[[], bool], timeout: float = _STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.01)

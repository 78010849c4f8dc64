"""What every route needs: the board, the token table, the logins, the limits, the pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse

from blackboard import Model
from pybb.human import AssignmentPolicy, DeadlinePolicy
from pybb.inbox._budget import BudgetView
from pybb.inbox._events import HeadWatcher
from pybb.inbox._ratelimit import RateLimiter
from pybb.inbox._sessions import Session, Sessions
from pybb.inbox._settings import InboxSettings
from pybb.inbox._tokens import TokenInfo, TokenTable

__all__ = ["SESSION_COOKIE", "Inbox", "inbox_of"]

SESSION_COOKIE = "pybb_session"


@dataclass(slots=True)
class Inbox:
    """One inbox's state, kept on ``app.state.inbox``."""

    model: Model
    tokens: TokenTable
    settings: InboxSettings
    budget: BudgetView
    sessions: Sessions
    answer_limiter: RateLimiter
    login_limiter: RateLimiter
    watcher: HeadWatcher
    jinja: Environment
    assignment: AssignmentPolicy = field(default_factory=AssignmentPolicy)
    deadlines: DeadlinePolicy | None = None

    def session(self, request: Request) -> Session | None:
        """The request's login, if its cookie names one whose token still works."""
        session = self.sessions.get(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        if session.ask_id is not None:
            # A sign-in from a link opens its ask and nothing else: every other page,
            # present or future, sees no login (deny by default).
            return session if _within_link(session.ask_id, request.url.path) else None
        if self.tokens.check(session.token_id) is None:
            self.sessions.close(session.session_id)
            return None
        return session

    def still_valid(self, session: Session) -> bool:
        """Whether ``session`` is still open and its token still works."""
        if self.sessions.get(session.session_id) is None:
            return False
        return session.ask_id is not None or self.tokens.check(session.token_id) is not None

    def bearer(self, request: Request) -> TokenInfo | None:
        """The token of an ``Authorization: Bearer`` header, if it works."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.tokens.verify(token.strip())

    def secure_cookies(self, request: Request) -> bool:
        """Whether the session cookie must be ``Secure`` for this request."""
        if self.settings.secure_cookies is not None:
            return self.settings.secure_cookies
        return request.url.scheme == "https"

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        """Render a page; autoescaping is on, so every agent's text is shown as text."""
        page = self.jinja.get_template(name).render(
            title=self.settings.title, board_id=self.model.board_id, **context
        )
        return HTMLResponse(page, status_code=status)

    def message(
        self, status: int, heading: str, text: str, session: Session | None = None
    ) -> HTMLResponse:
        """A page that says one thing (an error, a refusal), with ``status`` as its code.

        With ``session`` the page shows who is logged in and carries their CSRF token
        (for the logout button); without one it is a page for nobody in particular.
        """
        return self.render(
            "message.html",
            status,
            human=None if session is None else session.human,
            csrf=None if session is None else session.csrf,
            heading=heading,
            text=text,
            code=status,
        )


def _within_link(ask_id: str, path: str) -> bool:
    """Whether ``path`` is one a sign-in from a link to ``ask_id`` may use."""
    # The ASGI path is already percent-decoded, and ask ids hold no '/'.
    return path in (f"/asks/{ask_id}", f"/asks/{ask_id}/answer", "/logout")


def inbox_of(request: Request) -> Inbox:
    """The inbox serving ``request``."""
    inbox: Inbox = request.app.state.inbox
    return inbox


def when(value: datetime) -> str:
    """A timestamp as a person reads it."""
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()

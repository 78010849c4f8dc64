"""Building the inbox application: routes, middleware, templates, static files."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from blackboard import Model
from pybb.human import AssignmentPolicy, DeadlinePolicy
from pybb.inbox import _api, _html, _link_pages
from pybb.inbox._budget import BudgetView, PremiseBudgetView
from pybb.inbox._context import Inbox, inbox_of, when
from pybb.inbox._events import HeadWatcher
from pybb.inbox._logs import redact_access_log
from pybb.inbox._openapi import openapi_document
from pybb.inbox._ratelimit import RateLimiter
from pybb.inbox._security import SecurityMiddleware
from pybb.inbox._sessions import Sessions
from pybb.inbox._settings import InboxSettings
from pybb.inbox._tokens import TokenTable

__all__ = ["create_app"]


def create_app(
    model: Model,
    tokens: TokenTable,
    *,
    budget: BudgetView | None = None,
    settings: InboxSettings | None = None,
    assignment: AssignmentPolicy | None = None,
    deadlines: DeadlinePolicy | None = None,
) -> Starlette:
    """Build the inbox of a run: an ASGI application to serve with uvicorn.

    Args:
        model: The run, with :data:`pybb.human.HUMAN_REGIONS` declared and
            :func:`pybb.human.answer_rule` in its admission rule (the inbox checks every
            answer with that rule itself, too). :func:`attach_run` opens one.
        tokens: Who may log in; the inbox never sees a token it does not verify.
        budget: Where budget use comes from; ``None``: the board's ``budget`` premise if
            the model declares one, else nothing.
        settings: Hosts, limits and lifetimes; ``None``: the loopback defaults.
        assignment: Whom each ask is for (the run's own policy, so the inbox lists a
            person's asks first as the run routes them); ``None``: nobody but whom
            people reassign asks to.
        deadlines: The run's deadline policy, for asks posted without their deadline;
            ``None``: only the deadlines the asks carry are shown (``pybb.supervision``
            posts every ask with its deadline and default).
    """
    chosen = settings or InboxSettings()
    inbox = Inbox(
        model=model,
        tokens=tokens,
        settings=chosen,
        budget=budget or PremiseBudgetView.for_reader(model.reader),
        sessions=Sessions(
            chosen.session_ttl, chosen.nonce_secret or secrets.token_bytes(32), tokens.now
        ),
        answer_limiter=RateLimiter(chosen.answer_rate),
        login_limiter=RateLimiter(chosen.login_rate),
        watcher=HeadWatcher(model),
        jinja=_environment(),
        assignment=AssignmentPolicy() if assignment is None else assignment,
        deadlines=deadlines,
    )
    app = Starlette(
        routes=_routes(),
        middleware=[
            Middleware(
                SecurityMiddleware,
                allowed_hosts=chosen.allowed_hosts,
                max_body_bytes=chosen.max_body_bytes,
            )
        ],
        exception_handlers={HTTPException: _http_error},
        lifespan=_lifespan,
    )
    app.state.inbox = inbox
    return app


def _routes() -> list[Route | Mount]:
    return [
        Route("/", _html.index, methods=["GET"]),
        Route("/login", _html.login_form, methods=["GET"]),
        Route("/login", _html.login, methods=["POST"]),
        Route("/logout", _html.logout, methods=["POST"]),
        Route("/asks/{ask_id}", _html.ask_page, methods=["GET"]),
        Route("/link/{token}", _link_pages.show_link, methods=["GET"]),
        Route("/link/{token}", _link_pages.follow_link, methods=["POST"]),
        Route("/asks/{ask_id}/answer", _html.answer_form, methods=["POST"]),
        Route("/asks/{ask_id}/reassign", _html.reassign_form, methods=["POST"]),
        Route("/groups/answer", _html.group_answer, methods=["POST"]),
        Route("/decided", _html.decided, methods=["GET"]),
        Route("/not-asked", _html.not_asked, methods=["GET"]),
        Route("/not-asked/pull", _html.pull, methods=["POST"]),
        Route("/fragments/live", _html.live, methods=["GET"]),
        Route("/events", _html.events, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/api/asks", _api.list_asks, methods=["GET"]),
        Route("/api/asks/{ask_id}", _api.get_ask, methods=["GET"]),
        Route("/api/asks/{ask_id}/answer", _api.answer_ask, methods=["POST"]),
        Route("/api/asks/{ask_id}/reassign", _api.reassign_ask, methods=["POST"]),
        Route("/api/budget", _api.budget, methods=["GET"]),
        Route("/api/timeline", _api.timeline_records, methods=["GET"]),
        Route("/api/me", _api.me, methods=["GET"]),
        Mount("/static", StaticFiles(packages=[("pybb.inbox", "static")]), name="static"),
    ]


def _environment() -> Environment:
    # Autoescape everywhere: every string an agent wrote reaches the page as text.
    env = Environment(
        loader=PackageLoader("pybb.inbox", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["percent"] = lambda value: f"{round(float(value) * 100)}%"
    env.filters["as_json"] = lambda value: json.dumps(value, ensure_ascii=False, sort_keys=True)
    return env


def _when(value: Any) -> str:
    return when(value) if isinstance(value, datetime) else str(value)


async def _openapi(request: Request) -> Response:
    try:
        release = version("mrpybb")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        release = "0"
    return JSONResponse(openapi_document(inbox_of(request).settings.title, release))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if request.url.path.startswith("/api/"):
        code = "not_found" if exc.status_code == 404 else "http_error"
        body = {"error": code, "message": str(exc.detail)}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    heading = "Not here" if exc.status_code == 404 else "Not possible"
    page = inbox_of(request).message(exc.status_code, heading, str(exc.detail))
    page.headers.update(headers)
    return page


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    redact_access_log()
    yield
    inbox_of_app: Inbox = app.state.inbox
    inbox_of_app.watcher.stop()

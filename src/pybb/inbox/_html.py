"""The pages: login, the open asks, one ask, answering by form, and the live fragment.

Every page needs a login (a session cookie from ``POST /login`` with a token). Every
form carries the session's CSRF token; every answer form also carries a nonce bound to
its session and ask. The ``Origin`` checks are the outer middleware's.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from blackboard.errors import BlackboardError
from pybb.human import AskStatus, LinkError, LinkProblem, is_valid_id, redeem_link
from pybb.inbox._context import SESSION_COOKIE, Inbox, inbox_of
from pybb.inbox._events import event_stream
from pybb.inbox._service import Outcome, submit_answer, timeline, visible_state, visible_states
from pybb.inbox._sessions import Session

__all__ = [
    "answer_form",
    "ask_page",
    "events",
    "index",
    "link",
    "live",
    "login",
    "login_form",
    "logout",
]


async def index(request: Request) -> Response:
    """The open asks, the budget and the timeline."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return RedirectResponse("/login", status_code=303)
    context = await run_in_threadpool(_live_context, inbox, session)
    return inbox.render("inbox.html", human=session.human, csrf=session.csrf, **context)


async def live(request: Request) -> Response:
    """The page's live part alone, which the script swaps in when the board changes."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return _message(inbox, 401, "Please log in", "Your login has ended; log in again.")
    context = await run_in_threadpool(_live_context, inbox, session)
    return inbox.render("_live.html", human=session.human, csrf=session.csrf, **context)


async def ask_page(request: Request) -> Response:
    """One ask, open or settled."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return RedirectResponse("/login", status_code=303)
    ask_id = request.path_params["ask_id"]
    state = None
    if is_valid_id(ask_id):
        state = await run_in_threadpool(visible_state, inbox.model, session.human, ask_id)
    if state is None:
        return _message(inbox, 404, "No such ask", "There is no such ask for you.", session)
    item = {"state": state, "nonce": inbox.sessions.nonce(session, ask_id)}
    return inbox.render(
        "ask.html", human=session.human, csrf=session.csrf, item=item, open=AskStatus.OPEN
    )


async def login_form(request: Request) -> Response:
    """The login form (the only page that needs no login)."""
    inbox = inbox_of(request)
    if inbox.session(request) is not None:
        return RedirectResponse("/", status_code=303)
    return inbox.render("login.html", human=None, error=None)


async def login(request: Request) -> Response:
    """Exchange a token for a session cookie."""
    inbox = inbox_of(request)
    client = request.client.host if request.client else "unknown"
    wait = inbox.login_limiter.take(f"ip:{client}")
    if wait:
        return _limited(inbox, wait)
    form = await request.form()
    token = form.get("token")
    info = inbox.tokens.verify(token) if isinstance(token, str) else None
    if info is None:
        error = "That token is not valid: it may be mistyped, expired or revoked."
        return inbox.render("login.html", 401, human=None, error=error)
    session = inbox.sessions.open(info)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session.session_id,
        max_age=int(inbox.settings.session_ttl.total_seconds()),
        httponly=True,
        samesite="strict",
        secure=inbox.secure_cookies(request),
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    """End the login."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return _message(inbox, 401, "Not logged in", "There is no login to end.")
    form = await request.form()
    if not inbox.sessions.csrf_ok(session, form.get("csrf")):
        return _forged(inbox, session)
    inbox.sessions.close(session.session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def answer_form(request: Request) -> Response:
    """Answer an ask with one click: the form of the option clicked."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return _message(inbox, 401, "Please log in", "Log in to answer asks.")
    wait = inbox.answer_limiter.take(session.human)
    if wait:
        return _limited(inbox, wait, session)
    form = await request.form()
    ask_id = request.path_params["ask_id"]
    if not inbox.sessions.csrf_ok(session, form.get("csrf")):
        return _forged(inbox, session)
    if not is_valid_id(ask_id) or not inbox.sessions.nonce_ok(session, ask_id, form.get("nonce")):
        return _forged(inbox, session)
    option, note = form.get("option"), form.get("note", "")
    if not isinstance(option, str) or not isinstance(note, str):
        return _message(inbox, 422, "Not an answer", "Choose one of the options.", session)
    done = await run_in_threadpool(submit_answer, inbox.model, session.human, ask_id, option, note)
    if done.outcome is Outcome.WRITTEN:
        return RedirectResponse(f"/asks/{ask_id}", status_code=303)
    titles = {
        Outcome.CONFLICT: "Already settled",
        Outcome.NOT_FOUND: "No such ask",
        Outcome.INVALID: "Not an answer",
        Outcome.FORBIDDEN: "Not allowed",
    }
    return _message(inbox, done.outcome.value, titles[done.outcome], done.message, session)


async def link(request: Request) -> Response:
    """A notification's signed link: accepted once, then it opens the ask.

    The use is recorded on the board's ``link_uses`` level (unique per link), so a
    second visit, from anywhere, is refused with 410; so is an expired link. The ask
    page itself still needs a login.
    """
    inbox = inbox_of(request)
    secret = inbox.settings.link_secret
    if secret is None:
        return _message(inbox, 404, "No such page", "This inbox does not accept links.")
    token = request.path_params["token"]
    now = inbox.tokens.now()
    model = inbox.model
    try:
        found = await run_in_threadpool(
            redeem_link, model.control, model.reader, token, secret, now=now
        )
    except LinkError as exc:
        gone = exc.problem in (LinkProblem.EXPIRED, LinkProblem.USED)
        heading = "Link no longer valid" if gone else "Not a valid link"
        return _message(inbox, 410 if gone else 403, heading, f"{exc} Open the inbox instead.")
    except BlackboardError:
        return _message(inbox, 404, "No such page", "This board does not record link uses.")
    return RedirectResponse(f"/asks/{found.ask_id}", status_code=303)


async def events(request: Request) -> Response:
    """The live-update stream of the signed-in person's page."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return _message(inbox, 401, "Please log in", "Your login has ended; log in again.")
    since = _since(request)
    settings = inbox.settings
    stream = event_stream(
        inbox.watcher,
        since,
        lambda: inbox.still_valid(session),
        settings.heartbeat.total_seconds(),
        settings.stream_lifetime.total_seconds(),
    )
    return StreamingResponse(stream, media_type="text/event-stream")


def _since(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("since", "0")
    return int(raw) if raw.isdigit() and len(raw) < 19 else 0


def _live_context(inbox: Inbox, session: Session) -> dict[str, Any]:
    head = inbox.model.reader.head()
    states = visible_states(inbox.model, session.human)
    items = [
        {"state": s, "nonce": inbox.sessions.nonce(session, s.ask.ask_id)}
        for s in states
        if s.status is AskStatus.OPEN
    ]
    return {
        "head": head,
        "items": items,
        "budget": list(inbox.budget.usage()),
        "timeline": timeline(inbox.model, session.human, inbox.settings.timeline_length),
        "open": AskStatus.OPEN,
    }


def _message(
    inbox: Inbox, status: int, heading: str, text: str, session: Session | None = None
) -> Response:
    return inbox.render(
        "message.html",
        status,
        human=None if session is None else session.human,
        csrf=None if session is None else session.csrf,
        heading=heading,
        text=text,
        code=status,
    )


def _forged(inbox: Inbox, session: Session) -> Response:
    text = (
        "This form did not come from your inbox page, or it has expired. "
        "Go back to the inbox, reload it, and try again."
    )
    return _message(inbox, 403, "Form refused", text, session)


def _limited(inbox: Inbox, wait: float, session: Session | None = None) -> Response:
    text = f"Too many requests; try again in {max(1, round(wait))} seconds."
    response = _message(inbox, 429, "Slow down", text, session)
    response.headers["Retry-After"] = str(max(1, round(wait)))
    return response

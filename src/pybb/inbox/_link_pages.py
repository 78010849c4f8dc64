"""A notification's signed link: a GET that only shows, a POST that signs in once.

Mail scanners and link prefetchers GET every link in a message, so the GET never
uses the link: it checks the signature and expiry, says whether the link was used,
and shows the ask with one button. The button's POST (CSRF-checked against a cookie
the GET set in this browser) records the link's single use on the board
(``link_uses``, unique per link, so a race admits one) and signs the person in for
that ask only: a session cookie like the login's, which opens the ask's page and its
answer form and nothing else, until the session ttl or the link's expiry.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from blackboard.errors import BlackboardError
from pybb.human import (
    AskState,
    Link,
    LinkError,
    LinkProblem,
    link_use,
    redeem_link,
    verify_link,
)
from pybb.inbox._context import SESSION_COOKIE, Inbox, inbox_of, when
from pybb.inbox._service import visible_state

__all__ = ["LINK_COOKIE", "follow_link", "show_link"]

LINK_COOKIE = "pybb_link"
"""The random per-browser value the link page's CSRF token is bound to."""

_LINK_COOKIE_SECONDS = 3600
_LOG_IN = "open the inbox and log in with your token"


async def show_link(request: Request) -> Response:
    """GET /link/<token>: the ask and a button; the link stays unused."""
    inbox = inbox_of(request)
    checked = await _checked(inbox, request)
    if isinstance(checked, Response):
        return checked
    link, state = checked
    signed_in = inbox.session(request)
    if signed_in is not None and signed_in.ask_id is None and signed_in.human == link.person:
        # Already logged in as this person: the link is not needed (and stays unused).
        return RedirectResponse(f"/asks/{link.ask_id}", status_code=303)
    browser = request.cookies.get(LINK_COOKIE)
    fresh = not browser or len(browser) > 128
    if fresh:
        browser = secrets.token_urlsafe(24)
    assert browser is not None
    response = inbox.render(
        "link.html",
        human=None,
        csrf=None,
        state=state,
        link=link,
        link_csrf=inbox.sessions.sign("link", link.link_id, browser),
        action=request.url.path,
    )
    if fresh:
        response.set_cookie(
            LINK_COOKIE,
            browser,
            max_age=_LINK_COOKIE_SECONDS,
            httponly=True,
            samesite="strict",
            secure=inbox.secure_cookies(request),
            path="/link",
        )
    return response


async def follow_link(request: Request) -> Response:
    """POST /link/<token>: use the link (once) and sign in for its ask."""
    inbox = inbox_of(request)
    client = request.client.host if request.client else "unknown"
    wait = inbox.login_limiter.take(f"ip:{client}")
    if wait:
        slow = inbox.message(429, "Slow down", f"Try again in {max(1, round(wait))} seconds.")
        slow.headers["Retry-After"] = str(max(1, round(wait)))
        return slow
    secret = inbox.settings.link_secret
    if secret is None:
        return inbox.message(404, "No such page", "This inbox does not accept links.")
    token = request.path_params["token"]
    try:
        link = verify_link(token, secret, now=inbox.tokens.now())
    except LinkError as exc:
        return _refused(inbox, exc)
    form = await request.form()
    browser = request.cookies.get(LINK_COOKIE) or ""
    if not browser or not inbox.sessions.signed_ok(form.get("csrf"), "link", link.link_id, browser):
        text = (
            "This form did not come from the link's page in this browser, or it has expired. "
            "Open the link from your notification again and press the button there."
        )
        return inbox.message(403, "Form refused", text)
    model = inbox.model
    try:
        await run_in_threadpool(
            redeem_link, model.control, model.reader, token, secret, now=inbox.tokens.now()
        )
    except LinkError as exc:
        if exc.problem is LinkProblem.USED:
            return await _used(inbox, link)
        return _refused(inbox, exc)
    except BlackboardError:
        return inbox.message(404, "No such page", "This board does not record link uses.")
    response = RedirectResponse(f"/asks/{link.ask_id}", status_code=303)
    response.delete_cookie(LINK_COOKIE, path="/link", httponly=True, samesite="strict")
    signed_in = inbox.session(request)
    if signed_in is not None and signed_in.ask_id is None and signed_in.human == link.person:
        return response  # keep the wider login this browser already has
    session = inbox.sessions.open_link(link.person, link.ask_id, link.link_id, link.expires)
    lifetime = int((session.expires_at - inbox.tokens.now()).total_seconds())
    response.set_cookie(
        SESSION_COOKIE,
        session.session_id,
        max_age=max(1, lifetime),
        httponly=True,
        samesite="strict",
        secure=inbox.secure_cookies(request),
        path="/",
    )
    return response


async def _checked(inbox: Inbox, request: Request) -> tuple[Link, AskState] | Response:
    """The link and its ask, or the page that says why it cannot be followed."""
    secret = inbox.settings.link_secret
    if secret is None:
        return inbox.message(404, "No such page", "This inbox does not accept links.")
    try:
        link = verify_link(request.path_params["token"], secret, now=inbox.tokens.now())
    except LinkError as exc:
        return _refused(inbox, exc)
    try:
        used = await run_in_threadpool(link_use, inbox.model.reader, link)
    except BlackboardError:
        return inbox.message(404, "No such page", "This board does not record link uses.")
    if used is not None:
        return await _used(inbox, link, used.get("at"))
    state = await run_in_threadpool(visible_state, inbox.model, link.person, link.ask_id)
    if state is None:
        text = f"The ask this link opens is not on this board any more; {_LOG_IN} to see yours."
        return inbox.message(404, "No such ask", text)
    return link, state


async def _used(inbox: Inbox, link: Link, at: object = None) -> Response:
    if at is None:
        found = await run_in_threadpool(link_use, inbox.model.reader, link)
        at = None if found is None else found.get("at")
    since = f" at {_readable(at)}" if isinstance(at, str) else ""
    text = (
        f"This link was already used{since}. A link works once, so a forwarded or copied "
        "link cannot be used again. If it was you, the browser you used then is still "
        f"signed in to the ask; otherwise {_LOG_IN}."
    )
    return inbox.message(410, "Link already used", text)


def _refused(inbox: Inbox, exc: LinkError) -> Response:
    """The page for a link that is malformed, wrongly signed or expired."""
    if exc.problem is LinkProblem.EXPIRED:
        text = (
            f"{exc}. A link works until its ask's deadline. If the ask is still open, "
            f"{_LOG_IN}; a reminder, if one is due, brings a fresh link."
        )
        return inbox.message(410, "Link expired", text)
    text = (
        f"{exc}: it was not signed by this inbox, or it was cut off or changed on the way "
        "(some mail programs break long links). Copy the whole link from the notification "
        f"into the address bar, or {_LOG_IN}."
    )
    return inbox.message(403, "Not a valid link", text)


def _readable(at: str) -> str:
    try:
        return when(datetime.fromisoformat(at))
    except ValueError:
        return at

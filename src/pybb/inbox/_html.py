"""The pages: login, the asks, answering by form, the live fragment, and the views.

Besides one ask and the open asks: a group's answer, the accept-digest preview, the
decided and not-asked views, and pulling a not-asked escalation into an ask.

Every page needs a login (a session cookie from ``POST /login`` with a token). Every
form carries the session's CSRF token; every answer form also carries a nonce bound to
its session and ask (a group's: to the exact set of its asks; a pull's: to the
escalation; a confirmation of an accepted digest: to its ask or group). The ``Origin``
checks are the outer middleware's.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from blackboard import Rejected, RejectionCause
from pybb.human import AskState, AskStatus, is_valid_id
from pybb.inbox._assigned import (
    RANKS,
    Routing,
    due_of,
    reassign_rows,
    routing,
    submit_reassign,
)
from pybb.inbox._context import SESSION_COOKIE, Inbox, inbox_of
from pybb.inbox._events import event_stream
from pybb.inbox._repairs import repairs
from pybb.inbox._service import Outcome, submit_answer, timeline, visible_state, visible_states
from pybb.inbox._sessions import Session
from pybb.inbox._views import (
    ACCEPT_DIGEST,
    Filters,
    decided_rows,
    group_asks,
    group_token,
    not_asked_rows,
    now_utc,
    page_number,
    page_of,
    parse_filters,
)

__all__ = [
    "answer_form",
    "ask_page",
    "decided",
    "events",
    "group_answer",
    "index",
    "live",
    "login",
    "login_form",
    "logout",
    "not_asked",
    "pull",
    "reassign_form",
]

_PULL_WAIT = 5.0  # seconds the page waits for the run to carry out a pull


async def index(request: Request) -> Response:
    """The open asks, the budget and the timeline."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return RedirectResponse("/login", status_code=303)
    query = _list_query(request)
    if isinstance(query, str):
        return inbox.message(422, "Not a filter", query, session)
    context = await run_in_threadpool(_live_context, inbox, session, *query)
    return inbox.render("inbox.html", human=session.human, csrf=session.csrf, **context)


async def live(request: Request) -> Response:
    """The page's live part alone, which the script swaps in when the board changes."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return inbox.message(401, "Please log in", "Your login has ended; log in again.")
    query = _list_query(request)
    if isinstance(query, str):
        return inbox.message(422, "Not a filter", query, session)
    context = await run_in_threadpool(_live_context, inbox, session, *query)
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
        return inbox.message(404, "No such ask", "There is no such ask for you.", session)
    routed = await run_in_threadpool(
        routing, inbox.model, session.human, inbox.assignment, [state.ask]
    )
    item = _card(inbox, session, state, routed, now_utc())
    history = await run_in_threadpool(reassign_rows, inbox.model, [state])
    return inbox.render(
        "ask.html", human=session.human, csrf=session.csrf, item=item, open=AskStatus.OPEN,
        choices=routed.choices() if routed.recorded else [], history=history,
    )  # fmt: skip


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
        return inbox.message(401, "Not logged in", "There is no login to end.")
    form = await request.form()
    if not inbox.sessions.csrf_ok(session, form.get("csrf")):
        return _forged(inbox, session)
    inbox.sessions.close(session.session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def answer_form(request: Request) -> Response:
    """Answer an ask with one click: the form of the option clicked."""
    posted = await _posted(request, "Log in to answer asks.")
    if isinstance(posted, Response):
        return posted
    inbox, session, form = posted
    ask_id = request.path_params["ask_id"]
    if not is_valid_id(ask_id) or not inbox.sessions.nonce_ok(session, ask_id, form.get("nonce")):
        return _forged(inbox, session)
    option, note = form.get("option"), form.get("note", "")
    if not isinstance(option, str) or not isinstance(note, str):
        return inbox.message(422, "Not an answer", "Choose one of the options.", session)
    if option == ACCEPT_DIGEST and not inbox.sessions.nonce_ok(
        session, f"confirm:{ask_id}", form.get("confirm")
    ):
        return await _preview(inbox, session, [ask_id], note, form.get("nonce"))
    done = await run_in_threadpool(submit_answer, inbox.model, session.human, ask_id, option, note)
    if done.outcome is Outcome.WRITTEN:
        return RedirectResponse(f"/asks/{ask_id}", status_code=303)
    titles = {
        Outcome.CONFLICT: "Already settled",
        Outcome.NOT_FOUND: "No such ask",
        Outcome.INVALID: "Not an answer",
        Outcome.FORBIDDEN: "Not allowed",
    }
    return inbox.message(done.outcome.value, titles[done.outcome], done.message, session)


async def events(request: Request) -> Response:
    """The live-update stream of the signed-in person's page."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return inbox.message(401, "Please log in", "Your login has ended; log in again.")
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


async def group_answer(request: Request) -> Response:
    """Answer every ask of a root-cause group with one option: one board write per ask."""
    posted = await _posted(request, "Log in to answer asks.")
    if isinstance(posted, Response):
        return posted
    inbox, session, form = posted
    raw, option, note = form.get("asks"), form.get("option"), form.get("note", "")
    if not isinstance(raw, str) or not isinstance(option, str) or not isinstance(note, str):
        return inbox.message(422, "Not an answer", "Choose one of the options.", session)
    ask_ids = [a for a in raw.split(",") if a]
    if not ask_ids or not all(is_valid_id(a) for a in ask_ids):
        return _forged(inbox, session)
    if not inbox.sessions.nonce_ok(session, group_token(ask_ids), form.get("nonce")):
        return _forged(inbox, session)
    if option == ACCEPT_DIGEST and not inbox.sessions.nonce_ok(
        session, "confirm:" + group_token(ask_ids), form.get("confirm")
    ):
        return await _preview(inbox, session, ask_ids, note, form.get("nonce"))
    results = await run_in_threadpool(_answer_all, inbox, session.human, ask_ids, option, note)
    return inbox.render(
        "group_done.html", human=session.human, csrf=session.csrf, results=results,
        written=sum(1 for _, done in results if done.outcome is Outcome.WRITTEN),
    )  # fmt: skip


def _answer_all(
    inbox: Inbox, human: str, ask_ids: list[str], option: str, note: str
) -> list[tuple[str, Any]]:
    # Each member is its own answer, judged and admitted once by the store (unique ask_id).
    return [(a, submit_answer(inbox.model, human, a, option, note)) for a in ask_ids]


async def _preview(
    inbox: Inbox, session: Session, ask_ids: list[str], note: str, nonce: object
) -> Response:
    """The devices an accepted digest would repair, and a form that confirms it."""
    repaired = await run_in_threadpool(repairs, inbox.model, session.human, ask_ids)
    if repaired is None:
        return inbox.message(404, "No such ask", "There is no such ask for you.", session)
    ask = await run_in_threadpool(visible_state, inbox.model, session.human, ask_ids[0])
    assert ask is not None
    single = len(ask_ids) == 1
    token = f"confirm:{ask_ids[0]}" if single else "confirm:" + group_token(ask_ids)
    action = f"/asks/{ask_ids[0]}/answer" if single else "/groups/answer"
    return inbox.render(
        "confirm.html", human=session.human, csrf=session.csrf, devices=repaired,
        action=action, asks=",".join(ask_ids), single=single, note=note,
        nonce=nonce if isinstance(nonce, str) else "", option=ACCEPT_DIGEST,
        confirm=inbox.sessions.nonce(session, token), ask=ask.ask,
    )  # fmt: skip


async def decided(request: Request) -> Response:
    """Every settled ask, newest first: answers, deadline defaults, out-of-band closures."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return RedirectResponse("/login", status_code=303)
    number = page_number(request.query_params.get("page"))
    if number is None:
        return inbox.message(422, "Not a page", "page must be a positive number.", session)
    states = await run_in_threadpool(visible_states, inbox.model, session.human)
    reassigned = await run_in_threadpool(reassign_rows, inbox.model, states)
    page = page_of(decided_rows(states, reassigned), number)
    return inbox.render("decided.html", human=session.human, csrf=session.csrf, page=page)


async def not_asked(request: Request) -> Response:
    """The escalations the budget denied, each of which a person may pull into an ask."""
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return RedirectResponse("/login", status_code=303)
    number = page_number(request.query_params.get("page"))
    if number is None:
        return inbox.message(422, "Not a page", "page must be a positive number.", session)
    rows = await run_in_threadpool(not_asked_rows, inbox.model)
    page = page_of(rows, number)
    nonces = {
        r["escalation"]: inbox.sessions.nonce(session, f"pull:{r['escalation']}")
        for r in page.items
    }
    budget = list(inbox.budget.usage())
    return inbox.render(
        "not_asked.html", human=session.human, csrf=session.csrf, page=page, nonces=nonces,
        budget=budget,
    )  # fmt: skip


async def pull(request: Request) -> Response:
    """Pull a denied escalation into an ask, within the budget; the run carries it out."""
    posted = await _posted(request, "Log in to pull escalations.")
    if isinstance(posted, Response):
        return posted
    inbox, session, form = posted
    escalation, note = form.get("escalation"), form.get("note", "")
    if not isinstance(escalation, str):
        return _forged(inbox, session)
    if not inbox.sessions.nonce_ok(session, f"pull:{escalation}", form.get("nonce")):
        return _forged(inbox, session)
    if not isinstance(note, str) or len(note) > 2_000:
        return inbox.message(422, "Not a note", "The note must be text (at most 2,000).", session)
    heading, text, status = await run_in_threadpool(_pull, inbox, session.human, escalation, note)
    return inbox.message(status, heading, text, session)


def _pull(inbox: Inbox, human: str, escalation: str, note: str) -> tuple[str, str, int]:
    rows = {r["escalation"]: r for r in not_asked_rows(inbox.model)}
    row = rows.get(escalation)
    if row is None:
        return "No such escalation", "The budget denied no such escalation.", 404
    for usage in inbox.budget.usage():
        if usage.spent >= usage.ceiling and str(row.get("scope") or "").startswith(usage.scope):
            text = (
                f"The budget is spent: scope {usage.scope!r} has used {usage.spent:g} of "
                f"{usage.ceiling:g} asks, so nothing was asked. Answer or close an ask first, "
                "or raise the budget."
            )
            return "Budget exhausted", text, 409
    request = {"id": f"pull:{escalation}", "kind": "pull", "escalation": escalation,
               "by": human, "note": note, "at": now_utc().isoformat()}  # fmt: skip
    result = inbox.model.control.write("pybb:inbox", "supervision", request)
    if isinstance(result, Rejected) and result.cause is not RejectionCause.DUPLICATE:
        return "Not possible", f"The board refused the request: {result.reason}.", 409
    deadline = time.monotonic() + _PULL_WAIT
    while time.monotonic() < deadline:
        done = not_asked_rows(inbox.model)
        outcome = next((r["pulled"] for r in done if r["escalation"] == escalation), None)
        if outcome is not None and outcome.get("kind") == "pulled":
            if outcome.get("outcome") == "asked":
                return (
                    "Asked",
                    f"It is an ask now ({outcome.get('ask_id')}); it is on your inbox.",
                    200,
                )
            return "Budget refused it", f"Not asked: {outcome.get('message')}.", 409
        time.sleep(0.1)
    text = (
        "Requested; the run asks it when it next polls the board (no run is applying answers now)."
    )
    return "Requested", text, 202


def _since(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("since", "0")
    return int(raw) if raw.isdigit() and len(raw) < 19 else 0


def _list_query(request: Request) -> tuple[Filters, int] | str:
    filters = parse_filters(request.query_params)
    if isinstance(filters, str):
        return filters
    number = page_number(request.query_params.get("page"))
    return (filters, number) if number is not None else "page must be a positive number."


def _live_context(
    inbox: Inbox, session: Session, filters: Filters | None = None, number: int = 1
) -> dict[str, Any]:
    head = inbox.model.reader.head()
    states = visible_states(inbox.model, session.human)
    chosen = filters or Filters()
    now = now_utc()
    opened = [s.ask for s in states if s.status is AskStatus.OPEN]
    routed = routing(inbox.model, session.human, inbox.assignment, opened)
    groups = group_asks(states, chosen, now, routed)
    page = page_of(groups, number)
    items = [
        {
            **_card(inbox, session, g.first, routed, now),
            "group": g,
            "group_nonce": inbox.sessions.nonce(session, group_token(g.ask_ids)),
        }
        for g in page.items
    ]
    return {
        "head": head,
        "items": items,
        "choices": routed.choices() if routed.recorded else [],
        "page": page,
        "filters": chosen,
        "open_total": sum(len(g.states) for g in groups),
        "budget": list(inbox.budget.usage()),
        "timeline": timeline(inbox.model, session.human, inbox.settings.timeline_length),
        "open": AskStatus.OPEN,
    }


def _card(
    inbox: Inbox, session: Session, state: AskState, routed: Routing, now: datetime
) -> dict[str, Any]:
    """What a card shows of one ask beyond the ask: its deadline, assignee and forms."""
    ask = state.ask
    return {
        "state": state,
        "nonce": inbox.sessions.nonce(session, ask.ask_id),
        "due": due_of(ask, inbox.deadlines, now),
        "assigned": routed.shown(ask),
        "rank": RANKS[routed.rank(ask)],
        "reassign_nonce": (
            inbox.sessions.nonce(session, f"reassign:{ask.ask_id}") if routed.recorded else ""
        ),
    }


async def reassign_form(request: Request) -> Response:
    """Reassign an ask to a person or a team, with a note: a board write."""
    posted = await _posted(request, "Log in to reassign asks.")
    if isinstance(posted, Response):
        return posted
    inbox, session, form = posted
    ask_id = request.path_params["ask_id"]
    nonce = form.get("nonce")
    if not is_valid_id(ask_id) or not inbox.sessions.nonce_ok(session, f"reassign:{ask_id}", nonce):
        return _forged(inbox, session)
    to, note = form.get("to", ""), form.get("note", "")
    if not isinstance(to, str) or not isinstance(note, str):
        return inbox.message(422, "Not a reassignment", "Name a person or a team.", session)
    done = await run_in_threadpool(
        submit_reassign, inbox.model, session.human, ask_id, to, note, inbox.assignment
    )
    if done.outcome is Outcome.WRITTEN:
        return RedirectResponse(f"/asks/{ask_id}", status_code=303)
    titles = {
        Outcome.CONFLICT: "Already settled",
        Outcome.NOT_FOUND: "No such ask",
        Outcome.INVALID: "Not reassigned",
        Outcome.FORBIDDEN: "Not allowed",
    }
    title = "Not reassigned" if done.code == "unchanged" else titles[done.outcome]
    return inbox.message(done.outcome.value, title, done.message, session)


async def _posted(request: Request, login_text: str) -> tuple[Inbox, Session, FormData] | Response:
    """The inbox, session and form of a POST that writes, or the page refusing it.

    Every form that writes checks the same three things first, in this order: a login,
    the person's answer rate, and the form's CSRF token (each form then checks its nonce).
    """
    inbox = inbox_of(request)
    session = inbox.session(request)
    if session is None:
        return inbox.message(401, "Please log in", login_text)
    wait = inbox.answer_limiter.take(session.human)
    if wait:
        return _limited(inbox, wait, session)
    form = await request.form()
    if not inbox.sessions.csrf_ok(session, form.get("csrf")):
        return _forged(inbox, session)
    return inbox, session, form


def _forged(inbox: Inbox, session: Session) -> Response:
    text = (
        "This form did not come from your inbox page, or it has expired. "
        "Go back to the inbox, reload it, and try again."
    )
    return inbox.message(403, "Form refused", text, session)


def _limited(inbox: Inbox, wait: float, session: Session | None = None) -> Response:
    text = f"Too many requests; try again in {max(1, round(wait))} seconds."
    response = inbox.message(429, "Slow down", text, session)
    response.headers["Retry-After"] = str(max(1, round(wait)))
    return response

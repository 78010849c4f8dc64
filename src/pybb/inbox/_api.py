"""The JSON API (its contract is ``/openapi.json``). Every call needs a Bearer token.

The API takes no cookies, so a page on another site cannot ride a person's login into
it; state changes are further guarded by the outer middleware's origin checks.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pybb.human import AskState, AskStatus, is_valid_id
from pybb.inbox._assigned import RANKS, due_of, reassign_rows, routing, submit_reassign
from pybb.inbox._context import Inbox, inbox_of
from pybb.inbox._repairs import preview_id, repairs
from pybb.inbox._service import (
    Outcome,
    Submitted,
    state_json,
    submit_answer,
    timeline,
    visible_state,
)
from pybb.inbox._service import visible_states as _visible_states
from pybb.inbox._tokens import TokenInfo
from pybb.inbox._views import ACCEPT_DIGEST, now_utc

__all__ = [
    "answer_ask",
    "budget",
    "get_ask",
    "list_asks",
    "me",
    "reassign_ask",
    "timeline_records",
]

_STATUSES = {"open", "answered", "closed", "all"}
_MAX_LIMIT = 200


async def list_asks(request: Request) -> Response:
    """GET /api/asks?status=open|answered|closed|all."""
    token = _token(request)
    if token is None:
        return _unauthorized()
    query = _query(request, "status")
    if isinstance(query, Response):
        return query
    status = query.get("status", "open")
    if status not in _STATUSES:
        return _error(422, "invalid", f"status must be one of {sorted(_STATUSES)}.")
    inbox = inbox_of(request)
    states = await run_in_threadpool(_visible_states, inbox.model, token.human)
    chosen = [s for s in states if status == "all" or s.status is AskStatus(status)]
    shown = await run_in_threadpool(_routed_json, inbox, token.human, chosen)
    return JSONResponse({"asks": shown})


async def get_ask(request: Request) -> Response:
    """GET /api/asks/{ask_id}."""
    token = _token(request)
    if token is None:
        return _unauthorized()
    query = _query(request)
    if isinstance(query, Response):
        return query
    ask_id = request.path_params["ask_id"]
    state = None
    if is_valid_id(ask_id):
        state = await run_in_threadpool(visible_state, inbox_of(request).model, token.human, ask_id)
    if state is None:
        return _error(404, "not_found", "There is no such ask for you.")
    shown = await run_in_threadpool(_routed_json, inbox_of(request), token.human, [state])
    return JSONResponse(shown[0])


async def answer_ask(request: Request) -> Response:
    """POST /api/asks/{ask_id}/answer with ``{"option": ..., "note": ..., "confirm": ...}``.

    Accepting a digest changes fleet policy, so it is answered first with 428 and the
    preview (the devices it would repair) and a ``confirm`` token bound to that preview;
    the same answer sent again with that token is applied (once, like every answer).
    """
    inbox = inbox_of(request)
    token = _writer(request)
    if isinstance(token, Response):
        return token
    body = await _answer_body(request)
    if isinstance(body, Response):
        return body
    ask_id = request.path_params["ask_id"]
    if not is_valid_id(ask_id):
        return _error(404, "not_found", "There is no such ask for you.")
    option, note, confirm = body
    if option == ACCEPT_DIGEST:
        unconfirmed = await run_in_threadpool(_unconfirmed, request, token, ask_id, confirm)
        if unconfirmed is not None:
            return unconfirmed
    done = await run_in_threadpool(submit_answer, inbox.model, token.human, ask_id, option, note)
    return _submitted(done, ask_id)


def _unconfirmed(
    request: Request, token: TokenInfo, ask_id: str, confirm: str | None
) -> Response | None:
    """The 428 preview of accepting a digest, unless ``confirm`` confirms this very preview.

    ``None`` lets the answer through: confirmed, or the ask is settled, missing or has
    no such option (the answer then gets its 409, 404 or 422 as any other would).
    """
    inbox = inbox_of(request)
    state = visible_state(inbox.model, token.human, ask_id)
    if (
        state is None
        or state.status is not AskStatus.OPEN
        or state.ask.option(ACCEPT_DIGEST) is None
    ):
        return None
    devices = repairs(inbox.model, token.human, [ask_id]) or []
    expected = inbox.sessions.sign("api-confirm", token.human, ask_id, preview_id(devices))
    if inbox.sessions.signed_ok(confirm, "api-confirm", token.human, ask_id, preview_id(devices)):
        return None
    stale = confirm is not None
    message = (
        "Accepting this digest changes fleet policy and would repair the devices listed; "
        'send the same answer again with "confirm" set to the token given here to apply it.'
    )
    if stale:
        message = (
            "The confirmation does not match what accepting this digest would repair now "
            "(the preview changed, or the token is not one this inbox gave for it); check "
            'the new preview and send the answer again with this "confirm" token.'
        )
    payload = {
        "error": "confirmation_stale" if stale else "confirmation_required",
        "message": message,
        "preview": {"count": len(devices), "devices": devices},
        "confirm": expected,
    }
    return JSONResponse(payload, status_code=428)


async def reassign_ask(request: Request) -> Response:
    """POST /api/asks/{ask_id}/reassign with ``{"to": ..., "note": ...}``."""
    inbox = inbox_of(request)
    token = _writer(request)
    if isinstance(token, Response):
        return token
    shape = 'Send {"to": "human:<name>" or "team:<name>", "note": "<why>"}.'
    body = await _json_body(request, ("to", "note"), shape)
    if isinstance(body, Response):
        return body
    ask_id = request.path_params["ask_id"]
    if not is_valid_id(ask_id):
        return _error(404, "not_found", "There is no such ask for you.")
    to, note = body.get("to"), body.get("note", "")
    if not isinstance(to, str) or not isinstance(note, str):
        return _error(422, "invalid", "to and note must be strings.")
    done = await run_in_threadpool(
        submit_reassign, inbox.model, token.human, ask_id, to, note, inbox.assignment
    )
    if done.outcome is Outcome.WRITTEN:
        assert done.assignment is not None
        assert done.state is not None
        shown = await run_in_threadpool(_routed_json, inbox, token.human, [done.state])
        created = {
            "ask_id": ask_id,
            "sequence": done.sequence,
            "assignment": done.assignment.to_json(),
            "state": shown[0],
        }
        return JSONResponse(created, status_code=201)
    if done.outcome is Outcome.CONFLICT:
        state = None if done.state is None else state_json(done.state)
        payload = {"error": done.code, "message": done.message, "state": state}
        return JSONResponse(payload, status_code=409)
    return _error(done.outcome.value, done.code, done.message)


def _routed_json(inbox: Inbox, human: str, states: list[AskState]) -> list[dict[str, Any]]:
    """Asks as the API shows them: each with its assignee and deadline, the person's first."""
    routed = routing(inbox.model, human, inbox.assignment, [s.ask for s in states])
    history: dict[str, list[dict[str, Any]]] = {}
    for row in reassign_rows(inbox.model, states):
        made = {"to": row["to"], "by": row["by"], "note": row["note"], "at": row["at"].isoformat()}
        history.setdefault(row["ask"].ask_id, []).append(made)
    now = now_utc()
    shown = []
    for state in sorted(states, key=lambda s: routed.rank(s.ask)):  # stable: oldest first
        # A settled ask has no deadline left: its default was applied, or never will be.
        opened = state.status is AskStatus.OPEN
        due = due_of(state.ask, inbox.deadlines, now) if opened else None
        shown.append(
            {
                **state_json(state),
                "assignee": routed.target(state.ask),
                "rank": RANKS[routed.rank(state.ask)],
                "due": None
                if due is None
                else {"at": due.at.isoformat(), "option": due.option, "label": due.label,
                      "overdue": due.overdue},
                "reassignments": history.get(state.ask.ask_id, []),
            }
        )  # fmt: skip
    return shown


async def _json_body(
    request: Request, keys: tuple[str, ...], shape: str
) -> dict[str, Any] | Response:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return _error(415, "unsupported_media_type", "Send the body as application/json.")
    try:
        body: Any = json.loads(await request.body())
    except (ValueError, RecursionError):
        return _error(400, "bad_json", "The body is not JSON.")
    if not isinstance(body, dict) or not set(body) <= set(keys):
        return _error(422, "invalid", shape)
    return body


async def budget(request: Request) -> Response:
    """GET /api/budget."""
    token = _token(request)
    if token is None:
        return _unauthorized()
    query = _query(request)
    if isinstance(query, Response):
        return query
    usage = await run_in_threadpool(inbox_of(request).budget.usage)
    scopes = [{"scope": u.scope, "spent": u.spent, "ceiling": u.ceiling} for u in usage]
    return JSONResponse({"scopes": scopes})


async def timeline_records(request: Request) -> Response:
    """GET /api/timeline?limit=N."""
    inbox = inbox_of(request)
    token = _token(request)
    if token is None:
        return _unauthorized()
    query = _query(request, "limit")
    if isinstance(query, Response):
        return query
    raw = query.get("limit", str(inbox.settings.timeline_length))
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_LIMIT:
        return _error(422, "invalid", f"limit must be an integer from 1 to {_MAX_LIMIT}.")
    head = await run_in_threadpool(inbox.model.reader.head)
    items = await run_in_threadpool(timeline, inbox.model, token.human, int(raw))
    records = [
        {
            "sequence": i.sequence,
            "at": i.at.isoformat(),
            "kind": i.kind,
            "region": i.region,
            "writer": i.writer,
            "summary": i.summary,
        }
        for i in items
    ]
    return JSONResponse({"head": head, "records": records})


async def me(request: Request) -> Response:
    """GET /api/me."""
    token = _token(request)
    if token is None:
        return _unauthorized()
    query = _query(request)
    if isinstance(query, Response):
        return query
    expires = None if token.expires_at is None else token.expires_at.isoformat()
    return JSONResponse({"human": token.human, "token_id": token.token_id, "expires_at": expires})


def _token(request: Request) -> TokenInfo | None:
    return inbox_of(request).bearer(request)


def _writer(request: Request) -> TokenInfo | Response:
    """The token of a request that writes to the board, or the response refusing it.

    Every write route checks the same three things first: a valid token, the person's
    answer rate (answers and reassignments share one limiter), and no query parameters.
    """
    token = _token(request)
    if token is None:
        return _unauthorized()
    wait = inbox_of(request).answer_limiter.take(token.human)
    if wait:
        response = _error(429, "rate_limited", "Too many answers or reassignments; slow down.")
        response.headers["Retry-After"] = str(max(1, round(wait)))
        return response
    query = _query(request)
    return query if isinstance(query, Response) else token


def _query(request: Request, *allowed: str) -> dict[str, str] | Response:
    """The query parameters, each at most once and each one the operation knows."""
    items = request.query_params.multi_items()
    names = [name for name, _ in items]
    unknown = sorted(set(names) - set(allowed))
    if unknown or len(names) != len(set(names)):
        known = ", ".join(allowed) or "none"
        return _error(422, "invalid", f"Unknown or repeated query parameters; this takes {known}.")
    return dict(items)


async def _answer_body(request: Request) -> tuple[str, str, str | None] | Response:
    shape = 'Send {"option": "<option id>", "note": "<text>"}.'
    body = await _json_body(request, ("option", "note", "confirm"), shape)
    if isinstance(body, Response):
        return body
    option, note, confirm = body.get("option"), body.get("note", ""), body.get("confirm")
    if not isinstance(option, str) or not isinstance(note, str):
        return _error(422, "invalid", "option and note must be strings.")
    if "confirm" in body and (not isinstance(confirm, str) or len(confirm) > 128):
        return _error(422, "invalid", "confirm must be the token a 428 answer gave.")
    return option, note, confirm


def _submitted(done: Submitted, ask_id: str) -> Response:
    if done.outcome is Outcome.WRITTEN:
        assert done.answer is not None
        assert done.state is not None
        created = {
            "ask_id": ask_id,
            "sequence": done.sequence,
            "answer": done.answer.to_json(),
            "state": state_json(done.state),
        }
        return JSONResponse(created, status_code=201)
    if done.outcome is Outcome.CONFLICT:
        state = None if done.state is None else state_json(done.state)
        payload = {"error": done.code, "message": done.message, "state": state}
        return JSONResponse(payload, status_code=409)
    return _error(done.outcome.value, done.code, done.message)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def _unauthorized() -> Response:
    response = _error(
        401, "unauthorized", "Send 'Authorization: Bearer <token>' with a valid token."
    )
    response.headers["WWW-Authenticate"] = 'Bearer realm="pybb inbox"'
    return response

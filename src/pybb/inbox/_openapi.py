"""The OpenAPI 3.1 document of the inbox's JSON API, written by hand (it is the contract)."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]

_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$"
_ASSIGNEE = r"^(human:|team:)?[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(name: str) -> dict[str, Any]:
    return {"anyOf": [_ref(name), {"type": "null"}]}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_TEXT = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}

_SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": _TEXT, "message": _TEXT}),
    "Option": _obj(
        {
            "id": {"type": "string", "pattern": _ID},
            "label": _TEXT,
            "recommended": {"type": "boolean"},
            "detail": _TEXT,
        }
    ),
    "Ask": _obj(
        {
            "ask_id": {"type": "string", "pattern": _ID},
            "entry": _TEXT,
            "subject": _TEXT,
            "title": _TEXT,
            "report": _TEXT,
            "report_data": {"type": "object"},
            "options": {"type": "array", "items": _ref("Option"), "minItems": 2, "maxItems": 4},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "scope": _TEXT,
            "created_at": _TIME,
            "to": {"type": "array", "items": _TEXT},
            # optional: asks posted with a deadline policy carry both (pybb.supervision's do)
            "deadline": _TIME,
            "default_option": {"type": "string", "pattern": _ID},
        },
        [
            "ask_id",
            "entry",
            "subject",
            "title",
            "report",
            "report_data",
            "options",
            "confidence",
            "scope",
            "created_at",
            "to",
        ],
    ),
    "Answer": _obj({"ask_id": _TEXT, "option": _TEXT, "by": _TEXT, "note": _TEXT, "at": _TIME}),
    "Closure": _obj({"ask_id": _TEXT, "reason": _TEXT, "at": _TIME}),
    "AskState": _obj(
        {
            "ask": _ref("Ask"),
            "sequence": {"type": "integer", "minimum": 1},
            "status": {"type": "string", "enum": ["open", "answered", "closed"]},
            "answer": _nullable("Answer"),
            "closure": _nullable("Closure"),
            # on reads (listAsks, getAsk, reassignAsk): whom it is for, and its deadline
            "assignee": {"anyOf": [_TEXT, {"type": "null"}]},
            "rank": {"type": "string", "enum": ["mine", "team", "other"]},
            "due": _nullable("Due"),
            "reassignments": {"type": "array", "items": _ref("Reassignment")},
        },
        ["ask", "sequence", "status", "answer", "closure"],
    ),
    "Due": _obj({"at": _TIME, "option": _TEXT, "label": _TEXT, "overdue": {"type": "boolean"}}),
    "Reassignment": _obj({"to": _TEXT, "by": _TEXT, "note": _TEXT, "at": _TIME}),
    "ReassignRequest": _obj(
        {
            "to": {"type": "string", "pattern": _ASSIGNEE},
            # something other than blanks: whoever gets the ask reads why
            "note": {"type": "string", "pattern": "[^ \t\r\n]", "maxLength": 2000},
        },
        required=["to", "note"],
    ),
    "ReassignCreated": _obj(
        {
            "ask_id": _TEXT,
            "sequence": {"type": "integer", "minimum": 1},
            "assignment": _obj(
                {"ask_id": _TEXT, "to": _TEXT, "by": _TEXT, "note": _TEXT, "at": _TIME}
            ),
            "state": _ref("AskState"),
        }
    ),
    "AskList": _obj({"asks": {"type": "array", "items": _ref("AskState")}}),
    "AnswerRequest": _obj(
        {
            "option": {"type": "string", "pattern": _ID},
            "note": {"type": "string", "maxLength": 2000},
            # accept-digest only: the token of the 428 answer that showed its preview
            "confirm": {"type": "string", "maxLength": 128},
        },
        required=["option"],
    ),
    "RepairPreview": _obj(
        {
            "count": {"type": "integer", "minimum": 0},
            "devices": {"type": "array", "items": _TEXT},
        }
    ),
    "ConfirmationRequired": _obj(
        {
            "error": {"type": "string", "enum": ["confirmation_required", "confirmation_stale"]},
            "message": _TEXT,
            "preview": _ref("RepairPreview"),
            "confirm": _TEXT,
        }
    ),
    "AnswerCreated": _obj(
        {
            "ask_id": _TEXT,
            "sequence": {"type": "integer", "minimum": 1},
            "answer": _ref("Answer"),
            "state": _ref("AskState"),
        }
    ),
    "AnswerConflict": _obj(
        {"error": _TEXT, "message": _TEXT, "state": _nullable("AskState")},
    ),
    "ScopeUsage": _obj(
        {"scope": _TEXT, "spent": {"type": "number"}, "ceiling": {"type": "number"}}
    ),
    "Budget": _obj({"scopes": {"type": "array", "items": _ref("ScopeUsage")}}),
    "TimelineRecord": _obj(
        {
            "sequence": {"type": "integer", "minimum": 1},
            "at": _TIME,
            "kind": {"type": "string", "enum": ["level", "premise", "grant", "revoke", "close"]},
            "region": _TEXT,
            "writer": _TEXT,
            "summary": _TEXT,
        }
    ),
    "Timeline": _obj(
        {
            "head": {"type": "integer", "minimum": 0},
            "records": {"type": "array", "items": _ref("TimelineRecord")},
        }
    ),
    "Me": _obj(
        {"human": _TEXT, "token_id": _TEXT, "expires_at": {"anyOf": [_TIME, {"type": "null"}]}}
    ),
}


def _json(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "The body is not JSON.",
        401: "No valid token (missing, unknown, expired or revoked).",
        403: "A request from another site or host.",
        404: "No such ask for this person.",
        413: "The body is over the size limit.",
        415: "The body is not application/json.",
        422: "A parameter or the body does not fit the schema.",
    }
    found = {str(code): _json(text[code], "Error") for code in codes}
    if 401 in codes:
        found["401"]["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    return found


_LIMITED = {
    "description": "Too many answers; wait the seconds Retry-After says.",
    "headers": {"Retry-After": {"schema": {"type": "string"}}},
    "content": {"application/json": {"schema": _ref("Error")}},
}

_ASK_ID = {
    "name": "ask_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": _ID},
}


def _paths() -> dict[str, Any]:
    return {
        "/api/asks": {
            "get": {
                "operationId": "listAsks",
                "summary": (
                    "The asks this person may see: their own first, then their teams', "
                    "then the rest; oldest first within each."
                ),
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "string",
                            "enum": ["open", "answered", "closed", "all"],
                            "default": "open",
                        },
                    }
                ],
                "responses": {"200": _json("The asks.", "AskList"), **_errors(401, 403, 422)},
            }
        },
        "/api/asks/{ask_id}": {
            "get": {
                "operationId": "getAsk",
                "summary": "One ask with its status.",
                "parameters": [_ASK_ID],
                "responses": {
                    "200": _json("The ask.", "AskState"),
                    **_errors(401, 403, 404, 422),
                },
            }
        },
        "/api/asks/{ask_id}/answer": {
            "post": {
                "operationId": "answerAsk",
                "summary": "Answer an ask. Exactly one answer per ask is admitted.",
                "description": (
                    "Accepting a digest (option 'accept-digest') changes fleet policy: it is "
                    "answered with 428 and the devices it would repair, and applied when sent "
                    "again with the 428's 'confirm' token."
                ),
                "parameters": [_ASK_ID],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("AnswerRequest")}},
                },
                "responses": {
                    "201": _json("The answer was written.", "AnswerCreated"),
                    "409": _json(
                        "Already answered (by whom, in state) or closed.", "AnswerConflict"
                    ),
                    "428": _json(
                        "accept-digest, not yet confirmed (or the preview changed): the "
                        "devices it would repair and the token that confirms this preview; "
                        "send the answer again with it as 'confirm'.",
                        "ConfirmationRequired",
                    ),
                    "429": _LIMITED,
                    **_errors(400, 401, 403, 404, 413, 415, 422),
                },
            }
        },
        "/api/asks/{ask_id}/reassign": {
            "post": {
                "operationId": "reassignAsk",
                "summary": "Reassign an open ask to a person or a team, saying why.",
                "parameters": [_ASK_ID],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("ReassignRequest")}},
                },
                "responses": {
                    "201": _json("The reassignment was written.", "ReassignCreated"),
                    "409": _json(
                        "The ask is settled (state says how), or already assigned there.",
                        "AnswerConflict",
                    ),
                    "429": _LIMITED,
                    **_errors(400, 401, 403, 404, 413, 415, 422),
                },
            }
        },
        "/api/budget": {
            "get": {
                "operationId": "getBudget",
                "summary": "Budget use per scope.",
                "responses": {"200": _json("Use per scope.", "Budget"), **_errors(401, 403, 422)},
            }
        },
        "/api/timeline": {
            "get": {
                "operationId": "getTimeline",
                "summary": "The board's most recent records, newest first.",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 30},
                    }
                ],
                "responses": {
                    "200": _json("The records.", "Timeline"),
                    **_errors(401, 403, 422),
                },
            }
        },
        "/api/me": {
            "get": {
                "operationId": "whoAmI",
                "summary": "The person the token stands for.",
                "responses": {"200": _json("The person.", "Me"), **_errors(401, 403, 422)},
            }
        },
    }


def openapi_document(title: str, version: str) -> dict[str, Any]:
    """The OpenAPI document served at ``/openapi.json``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": (
                "The JSON API of a pybb inbox. Every operation needs "
                "'Authorization: Bearer <token>'."
            ),
        },
        "paths": _paths(),
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearerAuth": []}],
    }

"""Signed, single-use, expiring links to an ask, carried by every notification.

A link's token is ``<payload>.<signature>``: the payload (base64url JSON) names the ask,
the person and the expiry (and a random nonce, so two links differ); the signature is
the hex HMAC-SHA256 of the payload under the server's secret. :func:`verify_link`
checks the signature (in constant time) and the expiry; :func:`redeem_link` also
records the use on the ``link_uses`` level, which is unique on the link's id, so the
store accepts a link exactly once, even when two requests race.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from blackboard import BoardReader, Control, Written
from pybb.human._errors import HumanLoopError, LinkError, LinkProblem
from pybb.human._people import LINK_USES
from pybb.human._protocol import human_name, is_valid_id

__all__ = ["LINK_WRITER", "Link", "link_use", "redeem_link", "sign_link", "verify_link"]

LINK_WRITER = "pybb:links"
"""The writer of link uses."""

_MIN_SECRET = 16


@dataclass(frozen=True, slots=True)
class Link:
    """What a valid link grants: one visit of one person to one ask, until it expires.

    Attributes:
        ask_id: The ask it opens.
        person: Who it was sent to, ``human:<name>``.
        expires: When it stops working.
        link_id: The id its use is recorded under (a digest of the token).
    """

    ask_id: str
    person: str
    expires: datetime
    link_id: str


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, bytes) or len(secret) < _MIN_SECRET:
        raise HumanLoopError(
            f"a link secret must be at least {_MIN_SECRET} bytes (e.g. secrets.token_bytes(32))"
        )


def _sign(payload: str, secret: bytes) -> str:
    return hmac.new(secret, payload.encode("ascii"), hashlib.sha256).hexdigest()


def sign_link(secret: bytes, ask_id: str, person: str, expires: datetime) -> str:
    """A token for a link that lets ``person`` open ``ask_id`` once, until ``expires``.

    Raises:
        HumanLoopError: The secret is too short, the ask id or person is malformed, or
            ``expires`` has no timezone.
    """
    _check_secret(secret)
    if not is_valid_id(ask_id) or human_name(person) is None:
        raise HumanLoopError(
            f"a link names an ask id and 'human:<name>', got {ask_id!r}, {person!r}"
        )
    if expires.tzinfo is None:
        raise HumanLoopError("a link's expiry must be timezone-aware")
    body = {"a": ask_id, "p": person, "e": int(expires.timestamp()), "n": secrets.token_hex(8)}
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    payload = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return f"{payload}.{_sign(payload, secret)}"


def verify_link(token: str, secret: bytes, *, now: datetime) -> Link:
    """Check a link's signature and expiry (not whether it was used: see :func:`redeem_link`).

    Raises:
        LinkError: The token is malformed, its signature wrong, or it has expired.
    """
    _check_secret(secret)
    payload, dot, signature = token.partition(".") if isinstance(token, str) else ("", "", "")
    if not dot or len(token) > 2_000:
        raise LinkError(LinkProblem.MALFORMED, "this link is not a pybb link")
    # compare_digest raises on non-ASCII text, which a URL can carry: not a signature either.
    if not signature.isascii() or not hmac.compare_digest(_sign(payload, secret), signature):
        raise LinkError(LinkProblem.BAD_SIGNATURE, "this link's signature is not valid")
    try:
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        ask_id, person, expires = body["a"], body["p"], datetime.fromtimestamp(body["e"], UTC)
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise LinkError(LinkProblem.MALFORMED, "this link's payload cannot be read") from exc
    if not is_valid_id(ask_id) or human_name(person) is None:
        raise LinkError(LinkProblem.MALFORMED, "this link names no ask or person")
    if now >= expires:
        raise LinkError(LinkProblem.EXPIRED, f"this link expired at {expires.isoformat()}")
    return Link(ask_id, person, expires, hashlib.sha256(token.encode()).hexdigest()[:32])


def link_use(reader: BoardReader, link: Link) -> Mapping[str, Any] | None:
    """The record of ``link``'s use (``at``: when), or ``None`` while it is unused.

    Reading this never uses the link, so a page may check it on a GET (which mail
    scanners and link prefetchers issue) and leave the redemption to a POST.
    """
    for row in reader.read_level(LINK_USES):
        if row.content.get("link") == link.link_id:
            content: Mapping[str, Any] = row.content
            return content
    return None


def redeem_link(
    control: Control,
    reader: BoardReader,
    token: str,
    secret: bytes,
    *,
    now: datetime,
    writer: str = LINK_WRITER,
) -> Link:
    """Verify a link and record its one use on the board; a second use is refused.

    Raises:
        LinkError: Malformed, wrongly signed, expired, or already used.
    """
    link = verify_link(token, secret, now=now)
    content = {
        "link": link.link_id,
        "ask_id": link.ask_id,
        "person": link.person,
        "at": now.isoformat(),
    }
    result = control.write(writer, LINK_USES, content)
    if isinstance(result, Written):
        return link
    if link_use(reader, link) is not None:
        raise LinkError(LinkProblem.USED, "this link was already used; open the inbox instead")
    raise HumanLoopError(f"the board refused the use of a link: {result.reason}")

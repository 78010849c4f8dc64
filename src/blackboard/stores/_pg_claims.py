"""The PostgreSQL store's leased claims: the SQL of ``claim``, ``renew``, ``release``, fences.

Claimers pick rows with ``SELECT ... FOR UPDATE SKIP LOCKED``: two workers claiming from
the same candidates at once each take different keys and neither waits for the other.
A fenced append share-locks the rows of its holder (``FOR SHARE``) inside the admitting
transaction, so a claimer passes those rows by until the append commits: no key is
taken over between the fence's check and the batch landing. Keys are stored as
``_pg_schema.enc`` gives them; callers pass them encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, timedelta
from typing import Any, TypeVar

import psycopg

from blackboard._claims import Claim
from blackboard.stores._pg_schema import dec

__all__ = ["Answer", "held", "holds", "send_holds", "send_release", "send_renew", "send_take"]

Conn = psycopg.Connection[Any]
T = TypeVar("T")

# New keys get a free row first; in key order, so two claimers never wait in a cycle.
# Only on a board that exists (the claim reports a missing one, not a foreign-key error).
_FREE_ROWS = """
INSERT INTO bb_claims (board_id, key, holder, expires, token)
SELECT %s, k, NULL, '-infinity', 0 FROM unnest(%s::text[]) AS k
WHERE NOT EXISTS (SELECT 1 FROM bb_claims c WHERE c.board_id = %s AND c.key = k)
  AND EXISTS (SELECT 1 FROM bb_boards WHERE board_id = %s)
ORDER BY k
ON CONFLICT DO NOTHING
"""

# Pick the claimable rows among the candidates, in the candidates' order, skipping rows
# another transaction has locked (a claimer, or a fenced append checking its holder);
# then take them. In the UPDATE every expression reads the row as it was, so the token
# rises only when the key passes to a holder that did not hold it.
_TAKE = """
WITH picked AS (
    SELECT c.key FROM bb_claims c
    JOIN unnest(%(wanted)s::text[]) WITH ORDINALITY AS wanted (key, position)
        ON c.key = wanted.key
    WHERE c.board_id = %(board)s
      AND (c.holder IS NULL OR c.holder = %(holder)s OR c.expires <= clock_timestamp())
    ORDER BY wanted.position
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE bb_claims c
SET token = CASE WHEN c.holder IS NOT DISTINCT FROM %(holder)s THEN c.token ELSE c.token + 1 END,
    holder = %(holder)s,
    expires = clock_timestamp() + %(lease)s
FROM picked
WHERE c.board_id = %(board)s AND c.key = picked.key
RETURNING c.key, c.holder, c.expires, c.token
"""

_RENEW = (
    "UPDATE bb_claims SET expires = clock_timestamp() + %s WHERE board_id = %s"
    " AND key = ANY(%s) AND holder = %s RETURNING key, holder, expires, token"
)
_RELEASE = (
    "UPDATE bb_claims SET holder = NULL WHERE board_id = %s AND key = ANY(%s)"
    " AND holder = %s RETURNING key"
)

# The send_* functions only send their statements and return a function that reads the
# answer: in pipeline mode the store sends COMMIT behind them, so a claim, a renewal or a
# release costs one round trip, not three.
Answer = Callable[[], T]


def send_take(
    conn: Conn, board: str, holder: str, wanted: Sequence[str], limit: int, lease: timedelta
) -> Answer[list[Claim]]:
    """Take up to ``limit`` of ``wanted`` for ``holder``, inside the caller's transaction."""
    conn.execute(_FREE_ROWS, (board, sorted(wanted), board, board))
    params = {"wanted": list(wanted), "board": board, "holder": holder, "limit": limit}
    cur = conn.execute(_TAKE, {**params, "lease": lease})
    return lambda: _in_order(wanted, cur.fetchall())


def send_renew(
    conn: Conn, board: str, holder: str, wanted: Sequence[str], lease: timedelta
) -> Answer[list[Claim]]:
    """Extend ``holder``'s claims on ``wanted``; the ones it lost are not returned."""
    cur = conn.execute(_RENEW, (lease, board, list(wanted), holder))
    return lambda: _in_order(wanted, cur.fetchall())


def send_release(conn: Conn, board: str, holder: str, wanted: Sequence[str]) -> Answer[int]:
    """Free ``holder``'s claims on ``wanted`` (their tokens are kept); how many it held."""
    cur = conn.execute(_RELEASE, (board, list(wanted), holder))
    return lambda: len(cur.fetchall())


def held(conn: Conn, board: str) -> list[Claim]:
    """Every claim held on the board, by (decoded) key."""
    rows = conn.execute(
        "SELECT key, holder, expires, token FROM bb_claims"
        " WHERE board_id = %s AND holder IS NOT NULL",
        (board,),
    ).fetchall()
    return sorted((_claim(row) for row in rows), key=lambda claim: claim.key)


def holds(conn: Conn, board: str, holder: str, keys: Sequence[str]) -> bool:
    """Whether ``holder`` holds every one of ``keys``; share-locks them until COMMIT."""
    return send_holds(conn, board, holder, keys)()


def send_holds(conn: Conn, board: str, holder: str, keys: Sequence[str]) -> Answer[bool]:
    """Send :func:`holds`'s query; the function returned reads its answer.

    In pipeline mode the query travels with whatever is sent before the answer is read.
    """
    cur = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM bb_claims WHERE board_id = %s"
        " AND key = ANY(%s) AND holder = %s FOR SHARE) AS held",
        (board, list(keys), holder),
    )

    def answer() -> bool:
        row = cur.fetchone()
        return row is not None and int(row[0]) == len(set(keys))

    return answer


def _claim(row: Sequence[Any]) -> Claim:
    key, holder, expires, token = row
    return Claim(dec(key), str(holder), expires.astimezone(UTC), int(token))


def _in_order(wanted: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Claim]:
    position = {key: index for index, key in enumerate(wanted)}
    return [_claim(row) for row in sorted(rows, key=lambda row: position[row[0]])]

"""Batches the server can judge itself, kept with the board's lock held for its work only.

Most writes on a busy board are keyless level writes with nothing to guard them: no
idempotency key, no unique key, no premise version, no grant. Such a batch is admitted
exactly when the run is open, and the server can judge that itself. So instead of
locking the board's row, reading the head back here and sending the rows after it (the
lock held across a round trip, which on a loaded machine is mostly a wait for a CPU),
the head's update takes the lock only if the run is open and the insert numbers the
rows from the head it left; COMMIT travels with both. The lock is held for two
statements and the commit's flush.

A batch judged ahead to append every write, whose judgement read nothing but its
idempotency keys and unique keys (all new) and whose only guard is a fence, is kept the
same way (:func:`send_fenced`, ADR 0024): the head's update also requires the fence to
hold, share-locking the holder's claim rows as ``holds`` does, and the inserts go with
it in one statement; a key or unique key written meanwhile by someone else makes an
insert fail on its table's unique index, the transaction rolls back and the batch is
judged under the lock as always.

The transaction id is read first, before the lock, so that a COMMIT whose answer is
lost can still be resolved; the head the update found is then read back by that id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from blackboard.errors import StoreError

try:
    from orjson import dumps as _orjson_dumps
except ImportError:  # pragma: no cover - orjson is a dependency; json is the fallback
    _orjson_dumps: Callable[[Any], bytes] | None = None  # type: ignore[no-redef]

Conn = psycopg.Connection[Any]

_XID = "SELECT pg_current_xact_id()::text"

# The lock is taken here, and only if the run is open: a closed (or missing) board
# updates no row, the insert below then inserts none, and the batch is judged again
# under the lock as always.
_BUMP_OPEN_HEAD = (
    "UPDATE bb_boards SET head = head + %s WHERE board_id = %s AND closed_seq IS NULL"
    " RETURNING head"
)
# Same transaction, later statement: it sees the head the update left.
_INSERT_FROM_HEAD = (
    "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at)"
    " SELECT b.board_id, b.head - %s + r.seq, r.kind, r.region, r.writer, r.payload,"
    " r.version, %s FROM bb_boards b, unnest(%b::bigint[], %b::text[], %b::text[],"
    " %b::text[], %b::text[], %b::bigint[]) AS r (seq, kind, region, writer, payload, version)"
    " WHERE b.board_id = %s AND b.closed_seq IS NULL"
)
# A fenced or keyed batch: the head moves only if the run is open and the holder still
# holds every fenced key (the claim rows share-locked until COMMIT, as in
# _pg_claims.send_holds; taken before the board's row, which no claimer ever locks); the
# rows go in the same statement, numbered from the head it left, so no update, no rows.
_BUMP_AND_INSERT = """
WITH bumped AS (
    UPDATE bb_boards SET head = head + %(count)s
    WHERE board_id = %(board)s AND closed_seq IS NULL
      AND (SELECT count(*) FROM (SELECT 1 FROM bb_claims WHERE board_id = %(board)s
           AND key = ANY(%(keys)s) AND holder = %(holder)s FOR SHARE) AS held) = %(held)s
    RETURNING head
), kept AS (
    INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at, ikey,
        fingerprint)
    SELECT %(board)s, b.head - %(count)s + (r->>0)::bigint, r->>1, r->>2, r->>3, r->>4,
        (r->>5)::bigint, %(at)s, r->>6, r->>7
    FROM bumped b, jsonb_array_elements(%(rows)s::jsonb) AS r
), claimed AS (
    INSERT INTO bb_uniques (board_id, region, ukey_sha256, seq)
    SELECT %(board)s, u->>0, u->>1, b.head - %(count)s + (u->>2)::bigint
    FROM bumped b, jsonb_array_elements(%(uniques)s::jsonb) AS u
)
SELECT head FROM bumped
"""

# After a lost COMMIT answer that the server says committed: which rows it kept. The
# 32-bit xmin of a row is the low half of the 64-bit id that pg_current_xact_id() gave.
_KEPT_BY = (
    "SELECT min(seq), count(*) FROM bb_records WHERE board_id = %s"
    " AND xmin::text::bigint = %s::bigint %% 4294967296"
)


@dataclass(frozen=True, slots=True)
class Sent:
    """What one attempt sent: its transaction id, the head's update, the rows' time."""

    xid: str
    bumped: psycopg.Cursor[Any]
    at: datetime


def send(conn: Conn, board: str, rows: list[tuple[Any, ...]]) -> Sent:
    """Send the batch's statements inside an open pipelined transaction (not COMMIT).

    ``rows`` are ``(seq, kind, region, writer, payload, version)`` numbered from 1. They
    are stamped with the time they are sent, the moment closest to the lock this knows.
    """
    xid = str(conn.execute(_XID).fetchone()[0])  # type: ignore[index]
    at = datetime.fromtimestamp(time.time(), UTC)
    count = len(rows)
    bumped = conn.execute(_BUMP_OPEN_HEAD, (count, board))
    columns = [list(column) for column in zip(*rows, strict=True)]
    conn.execute(_INSERT_FROM_HEAD, (count, at, *columns, board))
    return Sent(xid, bumped, at)


def send_fenced(
    conn: Conn, board: str, count: int, rows: str, uniques: str, holder: str, keys: list[str]
) -> Sent:
    """Send a fenced (or keyed) batch's one statement inside an open pipelined transaction.

    ``rows`` are the ``count`` rows ``(seq, kind, region, writer, payload, version, ikey,
    fingerprint)`` numbered from 1, ``uniques`` the unique keys they take, ``(region,
    digest, seq)``, each in :func:`rows_json`; ``keys`` the fenced keys, encoded (none: no
    fence; then ``holder`` is not looked at).
    The head moves and the rows land only if the run is open and ``holder`` holds every
    one of ``keys``; a key or unique key taken meanwhile fails the statement on its
    table's unique index.
    """
    xid = str(conn.execute(_XID).fetchone()[0])  # type: ignore[index]
    at = datetime.fromtimestamp(time.time(), UTC)
    params = {
        "count": count, "board": board, "keys": keys, "holder": holder,
        "held": len(set(keys)), "at": at, "rows": rows, "uniques": uniques,
    }  # fmt: skip
    bumped = conn.execute(_BUMP_AND_INSERT, params)
    return Sent(xid, bumped, at)


def rows_json(rows: Sequence[Sequence[Any]]) -> str:
    """Rows of ints, strings and None as one JSON array of arrays, for ``jsonb`` to unpack.

    psycopg dumps a binary array element by element in Python (about 1.5 us each: a
    third of a worker's append for W1), where one JSON text is built in C and the server
    unpacks it in C. Strings come back from ``->>`` exactly as sent. Raises ValueError
    (or TypeError) for what JSON cannot carry; the caller then keeps the batch otherwise.
    """
    if _orjson_dumps is not None:
        return _orjson_dumps(rows).decode()
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def base_from_answer(sent: Sent, count: int) -> int | None:
    """The head before the batch, from the update's answer; None: the run was closed.

    Raises ``psycopg.Error`` when the answer was lost with the connection.
    """
    row = sent.bumped.fetchone()
    return None if row is None else int(row[0]) - count


def base_from_board(conn: Conn, board: str, sent: Sent, count: int) -> int | None:
    """The head before a committed batch whose answer was lost, read back by its id."""
    row = conn.execute(_KEPT_BY, (board, int(sent.xid))).fetchone()
    first, kept = (None, 0) if row is None else (row[0], int(row[1]))
    if kept == 0:
        return None
    if kept != count or first is None:
        raise StoreError(
            f"an append committed {kept} rows where its batch had {count}: the board's "
            "records were changed outside this store; check the table bb_records"
        )
    return int(first) - 1

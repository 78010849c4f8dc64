"""The PostgreSQL store's schema: its migrations, and how names are kept in it.

The store creates and upgrades its own schema. ``bb_schema_version`` records every
migration applied; :func:`migrate` applies the missing ones, in order, in one
transaction, under an advisory lock, so several processes opening a fresh database at
once apply each migration exactly once and none sees a half-made schema.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import psycopg
from psycopg import sql

from blackboard.errors import StoreConfigError, StoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "channel_name", "dec", "enc", "migrate"]

_V1 = (
    """
    CREATE TABLE bb_boards (
        board_id text PRIMARY KEY,
        declaration text NOT NULL,
        head bigint NOT NULL DEFAULT 0,
        closed_seq bigint
    )
    """,
    """
    CREATE TABLE bb_records (
        board_id text NOT NULL REFERENCES bb_boards (board_id),
        seq bigint NOT NULL,
        kind text NOT NULL,
        region text,
        writer text NOT NULL,
        payload text NOT NULL,
        version bigint,
        at timestamptz NOT NULL,
        ikey text,
        fingerprint text,
        PRIMARY KEY (board_id, seq)
    )
    """,
    """
    CREATE INDEX bb_records_region ON bb_records (board_id, region, seq)
    """,
    """
    CREATE UNIQUE INDEX bb_records_ikey ON bb_records (board_id, ikey) WHERE ikey IS NOT NULL
    """,
    """
    CREATE TABLE bb_premises (
        board_id text NOT NULL,
        name text NOT NULL,
        seq bigint NOT NULL,
        version bigint NOT NULL,
        PRIMARY KEY (board_id, name)
    )
    """,
    """
    CREATE TABLE bb_uniques (
        board_id text NOT NULL,
        region text NOT NULL,
        ukey_sha256 text NOT NULL,
        seq bigint NOT NULL,
        PRIMARY KEY (board_id, region, ukey_sha256)
    )
    """,
    """
    CREATE TABLE bb_grants (
        board_id text NOT NULL,
        agent text NOT NULL,
        region text NOT NULL,
        PRIMARY KEY (board_id, agent, region)
    )
    """,
    """
    CREATE FUNCTION bb_notify_head() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('blackboard_' || left(md5(TG_TABLE_SCHEMA::text), 16),
                          NEW.head::text || ':' || NEW.board_id);
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER bb_boards_head_notify AFTER UPDATE OF head ON bb_boards
        FOR EACH ROW WHEN (NEW.head > OLD.head) EXECUTE FUNCTION bb_notify_head()
    """,
)

_V2 = (
    # Leased claims (blackboard._claims): a NULL holder is a released claim, whose token
    # is kept so that a fencing token never repeats. Claimers pick rows with
    # SELECT ... FOR UPDATE SKIP LOCKED; a fenced append share-locks the rows it checks.
    """
    CREATE TABLE bb_claims (
        board_id text NOT NULL REFERENCES bb_boards (board_id),
        key text NOT NULL,
        holder text,
        expires timestamptz NOT NULL,
        token bigint NOT NULL,
        PRIMARY KEY (board_id, key)
    )
    """,
    """
    CREATE INDEX bb_claims_holder ON bb_claims (board_id, holder) WHERE holder IS NOT NULL
    """,
)

MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "boards, records, premises, unique keys, grants, head notification", _V1),
    (2, "leased claims", _V2),
)
"""The schema's history, oldest first: ``(version, description, statements)``. Append only:
a released migration is never edited, a change is a new one with the next version."""

SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
"""The schema version this code writes (the last migration's)."""


def migrate(conn: psycopg.Connection[Any], schema: str | None, described: str) -> str:
    """Bring the schema up to the last migration, inside the caller's transaction.

    Args:
        conn: A connection with a transaction open; the caller commits.
        schema: The schema to create and use, or ``None`` for the search_path's first.
        described: The store's password-free name, for messages.

    Returns:
        The LISTEN/NOTIFY channel of the schema's boards.
    """
    create = schema is not None
    if schema is None:
        schema = _current_schema(conn, described)
    lock_key = f"blackboard.migrate:{schema}"
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock_key,))
    if create:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bb_schema_version (version integer PRIMARY KEY,"
        " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    _apply_missing(conn, described)
    return channel_name(schema)


def _current_schema(conn: psycopg.Connection[Any], described: str) -> str:
    row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] is None:
        raise StoreConfigError(
            f"PostgreSQL store {described}: no schema on the search_path exists; "
            "create it, or pass ?schema=name to have the store create one"
        )
    return str(row[0])


def _apply_missing(conn: psycopg.Connection[Any], described: str) -> None:
    row = conn.execute("SELECT coalesce(max(version), 0) FROM bb_schema_version").fetchone()
    current = int(row[0]) if row is not None else 0
    latest = MIGRATIONS[-1][0]
    if current > latest:
        raise StoreError(
            f"PostgreSQL store {described} has schema version {current}, newer than this "
            f"mrpybb understands ({latest}); upgrade mrpybb to open it"
        )
    for version, description, statements in MIGRATIONS:
        if version > current:
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO bb_schema_version (version, description) VALUES (%s, %s)",
                (version, description),
            )


# PostgreSQL text cannot hold NUL, which the kernel allows in names. Names holding one
# (or starting with the escape character) are stored as \x01 + an escaped body; every
# other name is stored as it is, so the tables stay readable.
_ESC = "\x01"


def enc(name: str) -> str:
    """The stored form of a name (the name itself unless it holds NUL)."""
    if "\x00" not in name and not name.startswith(_ESC):
        return name
    return _ESC + name.replace(_ESC, _ESC + "1").replace("\x00", _ESC + "0")


def dec(stored: str) -> str:
    """The name a stored form stands for."""
    if not stored.startswith(_ESC):
        return stored
    return stored[1:].replace(_ESC + "0", "\x00").replace(_ESC + "1", _ESC)


def channel_name(schema: str) -> str:
    """The LISTEN/NOTIFY channel of the boards in ``schema`` (the trigger computes the same)."""
    return "blackboard_" + hashlib.md5(schema.encode(), usedforsecurity=False).hexdigest()[:16]

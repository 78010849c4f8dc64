"""Where boards live. Choose a store by URL with :func:`open_store`.

``None`` or ``"memory://"`` keeps boards in memory; ``"sqlite:///path.db"`` keeps them
in one SQLite file (the embedded default for durable runs); ``"postgresql://..."``
shares one board between processes and machines (needs ``pip install 'mrpybb[postgres]'``).
A :class:`Store` instance is used as it is.
"""

from __future__ import annotations

import importlib
from urllib.parse import parse_qs, urlsplit

from blackboard.errors import StoreConfigError as _StoreConfigError
from blackboard.stores._base import (
    Appended,
    AppendOutcome,
    ClaimLost,
    Closed,
    Duplicate,
    Forbidden,
    PendingWrite,
    Repeated,
    Store,
    Transaction,
    VersionConflict,
    apply_writes,
)
from blackboard.stores._memory import MemoryStore
from blackboard.stores._sqlite import SQLiteStore

__all__ = [
    "AppendOutcome",
    "Appended",
    "ClaimLost",
    "Closed",
    "Duplicate",
    "Forbidden",
    "MemoryStore",
    "PendingWrite",
    "Repeated",
    "SQLiteStore",
    "Store",
    "Transaction",
    "VersionConflict",
    "apply_writes",
    "open_store",
]


def open_store(store: str | Store | None) -> Store:
    """Open the store a URL names (or return ``store`` if it already is one).

    Raises:
        StoreConfigError: The URL's scheme is unknown, or its backend is not installed.
    """
    if isinstance(store, Store):
        return store
    if store is None or store in ("memory://", "memory:"):
        return MemoryStore()
    if not isinstance(store, str):
        raise _StoreConfigError(
            f"store={store!r} is neither a URL nor a Store; use None, 'sqlite:///path.db' "
            "or 'postgresql://...'"
        )
    parts = urlsplit(store)
    if parts.scheme == "sqlite":
        return _open_sqlite(store, parts.path, parse_qs(parts.query))
    if parts.scheme in ("postgresql", "postgres"):
        return _open_postgres(store)
    raise _StoreConfigError(
        f"store URL {store!r} has an unknown scheme {parts.scheme!r}; use 'sqlite:///path.db', "
        "'postgresql://...' or None for memory"
    )


def _open_sqlite(url: str, path: str, query: dict[str, list[str]]) -> Store:
    # sqlite:///relative.db gives "/relative.db"; sqlite:////abs.db gives "//abs.db".
    if not path or path == "/":
        raise _StoreConfigError(
            f"store URL {url!r} names no file; use 'sqlite:///path/to/board.db'"
        )
    file = path[1:] if path.startswith("/") else path
    synchronous = query.get("synchronous", ["FULL"])[-1]
    return SQLiteStore(file, synchronous=synchronous)


def _open_postgres(url: str) -> Store:
    try:
        module = importlib.import_module("blackboard.stores._postgres")
    except ImportError as exc:
        raise _StoreConfigError(
            f"store URL {url!r} needs the PostgreSQL backend: "
            f"pip install 'mrpybb[postgres]' ({exc})"
        ) from exc
    store: Store = module.PostgresStore(url)
    return store

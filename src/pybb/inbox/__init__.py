"""The human inbox: a small web application where people answer a run's asks.

Serve it with ``pybb inbox --store sqlite:///run.db``, or build it in your own process::

    tokens = TokenTable()
    print(tokens.issue("alice"))          # shown once; the table keeps only its digest
    app = create_app(attach_run("sqlite:///run.db"), tokens)
    InboxServer("127.0.0.1", 8765).run(app)   # or any ASGI server, e.g. uvicorn.run(app)

:func:`create_app` and serving need the ``inbox`` extra (``pip install 'mrpybb[inbox]'``);
the rest of this package does not, so it is imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybb.inbox._attach import attach_run
from pybb.inbox._budget import (
    BUDGET_PREMISE,
    BudgetView,
    NoBudget,
    PremiseBudgetView,
    ScopeUsage,
)
from pybb.inbox._errors import BoardNotFoundError, InboxDependencyError, InboxError, TokenError
from pybb.inbox._serve import InboxServer
from pybb.inbox._settings import LOOPBACK_HOSTS, InboxSettings, RateLimit
from pybb.inbox._tokens import TOKEN_PREFIX, TokenInfo, TokenTable

if TYPE_CHECKING:
    from pybb.inbox._app import create_app

__all__ = [
    "BUDGET_PREMISE",
    "LOOPBACK_HOSTS",
    "TOKEN_PREFIX",
    "BoardNotFoundError",
    "BudgetView",
    "InboxDependencyError",
    "InboxError",
    "InboxServer",
    "InboxSettings",
    "NoBudget",
    "PremiseBudgetView",
    "RateLimit",
    "ScopeUsage",
    "TokenError",
    "TokenInfo",
    "TokenTable",
    "attach_run",
    "create_app",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        try:
            from pybb.inbox._app import create_app
        except ModuleNotFoundError as exc:
            raise InboxDependencyError(
                f"the inbox needs its web dependencies ({exc.name} is missing): "
                "pip install 'mrpybb[inbox]'"
            ) from exc
        return create_app
    raise AttributeError(f"module 'pybb.inbox' has no attribute {name!r}")

"""Fixtures of the supervision tests; modules take them with ``from supervision_fixtures import *``.

Not a conftest.py: a nested conftest shadows the others under pytest's default import mode.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from blackboard.stores import Store

__all__ = ["backend"]


@pytest.fixture
def backend(local_store_spec: object) -> Callable[[], Store]:
    """``backend()``: a handle on the test's store (memory or SQLite); each call is a
    fresh handle on the same storage, as a restarted process would open."""
    return local_store_spec.open  # type: ignore[attr-defined, no-any-return]

"""Fixtures for the buddhi tests; the helpers they use live in ``buddhi_support``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from buddhi_support import Log, policy, recording_seams

from buddhi import Seams
from buddhi.reference import Policy, ReferencePack, build_seams


@pytest.fixture
def make_seams() -> Callable[..., Seams]:
    """``build_seams`` with a Policy's fields accepted as keywords."""

    def make(ceiling: int = 10, **kwargs: Any) -> Seams:
        policy_fields = {k: kwargs.pop(k) for k in list(kwargs) if k in Policy.__dataclass_fields__}
        pack = ReferencePack(policy(**policy_fields)) if policy_fields else None
        return build_seams(ceiling=ceiling, policy=pack, **kwargs)

    return make


@pytest.fixture
def seams(make_seams: Callable[..., Seams]) -> Seams:
    """The reference seams with a ceiling of 10."""
    return make_seams()


@pytest.fixture
def recording() -> Callable[..., tuple[Seams, Log]]:
    """Seams whose every seam logs the members the kernel calls."""
    return recording_seams

"""Helpers for testing code built on buddhi, and the Store conformance check.

``check_store(factory)`` runs the Store contract against a user's own store, e.g.
a durable one; ``FakeClock`` drives budget windows by hand.
"""

from buddhi.testing._check_store import CONTENDERS, StoreFactory, check_store
from buddhi.testing._clock import FakeClock

__all__ = ["CONTENDERS", "FakeClock", "StoreFactory", "check_store"]

"""The reference Router, transport and out-of-band sources, and the default bundle."""

from __future__ import annotations

import threading
from datetime import timedelta

from buddhi._asks import Ask
from buddhi._budget import BudgetTree
from buddhi._effort import RouterPick
from buddhi._items import Item
from buddhi._seams import EscalationTransport, OOBSource, PolicyPack, Resolution, Router, Seams
from buddhi._store import Clock
from buddhi.errors import DeliveryError, SeamError
from buddhi.reference._memory import MemoryStore
from buddhi.reference._policy import ReferencePack

__all__ = [
    "BlindOOBSource",
    "CollectingTransport",
    "RecordedResolutions",
    "StaticRouter",
    "build_seams",
]


class StaticRouter:
    """A Router that picks the same model and effort for every item.

    Args:
        model: The model to pick.
        effort: The effort to pick, a name from the pack's scale.
    """

    __slots__ = ("_pick",)

    def __init__(self, model: str = "reference", effort: str = "medium") -> None:
        self._pick = RouterPick(model, effort)

    def __repr__(self) -> str:
        return f"StaticRouter({self._pick.model!r}, {self._pick.effort!r})"

    def recommend(self, item: Item) -> RouterPick:
        """Return the fixed pick."""
        return self._pick


class CollectingTransport(EscalationTransport):
    """Delivers asks into a list, in order; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asks: list[Ask] = []
        self._closed = False

    @property
    def asks(self) -> tuple[Ask, ...]:
        """The asks delivered so far, in order."""
        with self._lock:
            return tuple(self._asks)

    def deliver(self, ask: Ask) -> None:
        """Append the ask.

        Raises:
            DeliveryError: The transport is closed.
        """
        with self._lock:
            if self._closed:
                raise DeliveryError(f"the transport is closed; ask {ask.item_id!r} was not sent")
            self._asks.append(ask)

    def close(self) -> None:
        """Stop accepting asks."""
        with self._lock:
            self._closed = True


class BlindOOBSource:
    """A substrate that can never observe an out-of-band resolution."""

    __slots__ = ()

    def can_observe_oob(self) -> bool:
        """Return ``False``: nothing outside the loop is visible."""
        return False

    def resolved_out_of_band(self, item: Item) -> Resolution | None:
        """Return ``None``: a blind substrate sees no resolution."""
        return None


class RecordedResolutions:
    """An observing substrate whose resolutions are recorded in memory; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resolutions: dict[str, Resolution] = {}

    def record(self, resolution: Resolution) -> None:
        """Record that an item was resolved out of band."""
        if not isinstance(resolution, Resolution):
            raise SeamError(f"record takes a buddhi.Resolution, got {resolution!r}")
        with self._lock:
            self._resolutions[resolution.item_id] = resolution

    def can_observe_oob(self) -> bool:
        """Return ``True``: recorded resolutions are visible."""
        return True

    def resolved_out_of_band(self, item: Item) -> Resolution | None:
        """Return the resolution recorded for the item, if any."""
        with self._lock:
            return self._resolutions.get(item.id)


def build_seams(
    *,
    ceiling: int = 10,
    window: timedelta | None = None,
    policy: PolicyPack | None = None,
    router: Router | None = None,
    oob: OOBSource | None = None,
    clock: Clock | None = None,
) -> Seams:
    """Build the reference bundle: one global pool in a fresh memory store.

    Args:
        ceiling: The global pool's ceiling of interrupts (per window).
        window: The pool's window, or ``None`` for one lifetime budget.
        policy: The pack; by default ``ReferencePack()``.
        router: The Router; by default ``StaticRouter()``.
        oob: The out-of-band source; by default ``BlindOOBSource()``.
        clock: The store's clock; by default the wall clock.

    Returns:
        The seams, with a :class:`CollectingTransport` as ``transport``.
    """
    store = MemoryStore(clock)
    BudgetTree.single_pool(ceiling, window).install(store)
    return Seams(
        policy=ReferencePack() if policy is None else policy,
        router=StaticRouter() if router is None else router,
        store=store,
        transport=CollectingTransport(),
        oob=BlindOOBSource() if oob is None else oob,
    )

"""The reference pack: the simplest correct fill of each of the five seams.

* :class:`ReferencePack`, a PolicyPack read from the plain frozen :class:`Policy`;
* :class:`StaticRouter`, the same pick for every item;
* :class:`MemoryStore`, counters and the exclusion lattice in memory, under one lock;
* :class:`CollectingTransport`, which delivers asks into a list;
* :class:`BlindOOBSource`, a substrate that cannot observe out-of-band resolutions
  (and :class:`RecordedResolutions`, one that observes what is recorded in it).

:func:`build_seams` bundles them around one global pool.
"""

from buddhi.reference._fills import (
    BlindOOBSource,
    CollectingTransport,
    RecordedResolutions,
    StaticRouter,
    build_seams,
)
from buddhi.reference._memory import MemoryStore
from buddhi.reference._policy import (
    DEFAULT_CAUSES,
    DEFAULT_EFFORTS,
    DEFAULT_POLICY,
    PLACEHOLDERS,
    Policy,
    ReferencePack,
)

__all__ = [
    "DEFAULT_CAUSES",
    "DEFAULT_EFFORTS",
    "DEFAULT_POLICY",
    "PLACEHOLDERS",
    "BlindOOBSource",
    "CollectingTransport",
    "MemoryStore",
    "Policy",
    "RecordedResolutions",
    "ReferencePack",
    "StaticRouter",
    "build_seams",
]

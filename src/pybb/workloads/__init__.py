"""Reference workloads: what ``pybb demo``, ``pybb worker --app w1`` and the benchmarks run.

* :func:`w1` builds workload W1 (the repair ladder of issue 3: ``decrement`` three times,
  then ``zero_even`` once, the rest escalated); :func:`w1_expected` says how it must end
  and :func:`w1_outcomes` how a board of it did; :func:`w1_app` is W1 as a ``pybb worker``
  application (``--app w1``).
* :func:`pair` builds the seed's ``example_pair`` (``fix_x`` and ``fix_y`` on one entry).

They are built on the ``pybb`` façade like any application. ``pybb.testing`` re-exports
them for the tests that imported them from there.
"""

from pybb.workloads._pair import FixComponent, is_positive, pair
from pybb.workloads._w1 import (
    Decrement,
    ZeroEven,
    less_than_3,
    w1,
    w1_app,
    w1_expected,
    w1_outcomes,
)

__all__ = [
    "Decrement",
    "FixComponent",
    "ZeroEven",
    "is_positive",
    "less_than_3",
    "pair",
    "w1",
    "w1_app",
    "w1_expected",
    "w1_outcomes",
]

"""Applications the worker tests load by ``module:function`` in their worker processes.

``slow_w1``: W1 whose sources take a moment and log every execution (start and end, with
the process id and the machine's monotonic clock) to a ledger file, so a test can check
that no entry was worked by two processes at once. Its sources keep W1's names and
results: the board it leaves is W1's. ``supervised_w1``: W1 whose escalations go through
``pybb.supervision`` with a buddhi budget on the run's own board.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from pybb import AppContext, Blackboard, Controller
from pybb.workloads import Decrement, ZeroEven, less_than_3


class _Ledger:
    def __init__(self, path: str | None) -> None:
        self.fd = None if path is None else os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def log(self, **fields: Any) -> None:
        if self.fd is not None:
            line = json.dumps({**fields, "pid": os.getpid(), "t": time.monotonic()}) + "\n"
            os.write(self.fd, line.encode())


class _Slow:
    """Mix-in: sleep ``delay`` inside each execution, logging its start and end."""

    delay = 0.0
    ledger = _Ledger(None)

    def _slowly(self, name: str, key: str, work: Callable[[], Any]) -> Any:
        self.ledger.log(op="start", key=key, source=name)
        time.sleep(self.delay)
        try:
            return work()
        finally:
            self.ledger.log(op="end", key=key, source=name)


class SlowDecrement(_Slow, Decrement):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        return self._slowly(self.name, key, partial(super().execute, blackboard, key))


class SlowZeroEven(_Slow, ZeroEven):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        return self._slowly(self.name, key, partial(super().execute, blackboard, key))


def slow_w1(context: AppContext) -> Controller:
    """W1 with ``delay`` seconds per execution, logged to the ``ledger`` file (options)."""
    ledger = _Ledger(context.options.get("ledger"))
    delay = float(context.options.get("delay", "0"))
    sources: list[SlowDecrement | SlowZeroEven] = [
        SlowDecrement("decrement", 3),
        SlowZeroEven("zero_even", 1),
    ]
    for source in sources:
        source.delay, source.ledger = delay, ledger
    controller = Controller(Blackboard(context.store, context.board_id))
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate("less_than_3", on_fail=sources)
    return controller


def supervised_w1(context: AppContext) -> Controller:
    """W1 supervised by buddhi: ``ceiling`` asks in one global pool on the run's board.

    Option ``budget=never-refuses`` swaps in a budget store that admits every ask (the
    negative control).
    """
    from buddhi import Admission, AdmissionRequest, BudgetTree, GraduatedBar
    from buddhi.board import BoardStore
    from buddhi.reference import DEFAULT_POLICY, ReferencePack
    from pybb.supervision import SupervisionSettings, Supervisor, supervised_blackboard

    class NeverRefuses(BoardStore):
        """BROKEN ON PURPOSE: admits every ask, whatever the budget says."""

        def admit(self, request: AdmissionRequest) -> Admission:
            return Admission(request.item_id, request.scope, 0.0, 0.0, request.confidence, 0, 0)

    board = supervised_blackboard(context.store, context.board_id)
    flat = dataclasses.replace(DEFAULT_POLICY, bar=GraduatedBar(floor=0.0, rise=1.000001))
    settings = SupervisionSettings(
        policy=ReferencePack(flat),
        budget=BudgetTree.single_pool(int(context.options["ceiling"])),
    )
    broken = context.options.get("budget") == "never-refuses"
    store = NeverRefuses.on_model(board.model) if broken else None
    supervisor = Supervisor(board, settings, store=store)
    controller = Controller(board)
    sources: list[SlowDecrement | SlowZeroEven] = [
        SlowDecrement("decrement", 3),
        SlowZeroEven("zero_even", 1),
    ]
    for source in sources:
        source.delay = float(context.options.get("delay", "0"))
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate("less_than_3", on_fail=sources)
    supervisor.bind(controller)
    return controller

"""A pybb run with the human loop wired in, in one call, and the loop that awaits answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import buddhi
from blackboard import AdmissionRule, Region
from blackboard.stores import Store as BoardBackend
from pybb import Blackboard, Clock, Controller, ControllerObserver, KnowledgeSource, RunSummary
from pybb.human import Ask
from pybb.supervision._answers import AnswerWatcher
from pybb.supervision._board import supervised_blackboard
from pybb.supervision._errors import SupervisionError
from pybb.supervision._records import AppliedAnswer, SupervisionRecord
from pybb.supervision._settings import SupervisionSettings
from pybb.supervision._supervisor import Supervisor

__all__ = ["SupervisedRun"]

_SLICE = 1.0  # seconds: the longest wait for the board between two polls


class SupervisedRun:
    """A controller, its supervisor and its answer watcher, run together.

    ``run()`` applies answers given since the last call (also while no controller
    ran), runs the controller (escalations go through the supervisor as they happen),
    and decides any escalated entry that has no decision yet. ``run_until_answered``
    keeps doing so as the board changes until no ask of the run is open;
    ``serve(stop)`` until ``stop`` is set. Everything runs in the calling thread: a
    blackboard is used from one thread, and people answer through the inbox, which
    writes to the board from its own process or thread.

    Args:
        controller: The run's controller; the supervisor is bound to it (added to its
            observers).
        supervisor: The supervisor, on the controller's blackboard.
        watcher: Applies answers (default: one with the supervisor's settings' effect).
        owns_board: Close the blackboard on :meth:`close` (as :meth:`open` does).

    Raises:
        SupervisionError: The supervisor watches another blackboard.
    """

    def __init__(
        self,
        controller: Controller,
        supervisor: Supervisor,
        watcher: AnswerWatcher | None = None,
        *,
        owns_board: bool = False,
    ) -> None:
        if supervisor.blackboard is not controller.blackboard:
            raise SupervisionError(
                "the supervisor watches another blackboard than the controller's; build both "
                "on one blackboard (SupervisedRun.open does)"
            )
        self.controller = controller
        self.supervisor = supervisor
        self.watcher = watcher or AnswerWatcher(controller, effect=supervisor.settings.effect)
        self._owns_board = owns_board
        self._swept = False
        self.after_poll: list[Callable[[], object]] = []
        """What else runs at each poll (e.g. re-measuring devices whose evidence arrived)."""
        supervisor.bind(controller)
        controller.refresh()  # installing the budget wrote through the kernel

    @classmethod
    def open(
        cls,
        store: str | BoardBackend | None = None,
        board_id: str = "pybb",
        settings: SupervisionSettings | None = None,
        *,
        regions: Iterable[Region] = (),
        premises: Mapping[str, Any] | None = None,
        admission_rule: AdmissionRule | None = None,
        writer: str = "app",
        knowledge_sources: Iterable[KnowledgeSource] = (),
        max_cycles: int = 1000,
        observers: Iterable[ControllerObserver] = (),
        clock: Clock | None = None,
        budget_store: buddhi.Store | None = None,
    ) -> SupervisedRun:
        """Open (or resume) a supervised run in one call.

        Declares the human loop's, the budget's and the supervision's regions beside the
        application's own on a pybb blackboard, composes the admission rules, installs
        the budget, and builds the controller with the supervisor as its observer.

        Args:
            store: ``None``, a store URL (``"sqlite:///run.db"``) or a kernel store.
            board_id: The run's board.
            settings: Pack, budget, caps and effect (default ``SupervisionSettings()``).
            regions: The application's own regions (e.g. an allowlist premise).
            premises: Their opening values.
            admission_rule: The application's rule, asked after the human loop's.
            writer: The writer name of the blackboard's own writes.
            knowledge_sources: Sources to add to the controller.
            max_cycles: The controller's cycle limit.
            observers: More observers of the controller.
            clock: The controller's clock, also the budget's and the asks'.
            budget_store: A buddhi store for the budget (default: on the run's board).
        """
        board = supervised_blackboard(
            store, board_id, regions=regions, premises=premises,
            admission_rule=admission_rule, writer=writer,
        )  # fmt: skip
        try:
            supervisor = Supervisor(board, settings, store=budget_store, clock=clock)
            controller = Controller(
                board, knowledge_sources, max_cycles=max_cycles, observers=observers, clock=clock
            )
        except BaseException:
            board.close()
            raise
        return cls(controller, supervisor, owns_board=True)

    @property
    def blackboard(self) -> Blackboard:
        """The run's blackboard."""
        return self.controller.blackboard

    def run(self) -> RunSummary:
        """Apply due deadlines and pending answers, run the controller, decide escalations."""
        self._settle()
        summary = self.controller.run()
        if not self._swept:
            self._swept = True
            self.supervisor.sweep()
        self.supervisor.flush()
        self.supervisor.serve_pulls()
        self.controller.refresh()  # take in what the supervisor wrote, for the next writer
        return summary

    def poll(self) -> RunSummary:
        """One round: deadlines, notifications, new answers; the controller takes in the board."""
        self._settle()
        summary = self.controller.run()
        self.supervisor.flush()
        self.supervisor.serve_pulls()
        for hook in self.after_poll:
            hook()
        self.controller.refresh()
        return summary

    def _settle(self) -> None:
        """Apply expired asks' defaults, send what is due, then apply every answer."""
        self.supervisor.expire()
        self.supervisor.notify()
        self.watcher.apply()

    def open_asks(self) -> tuple[Ask, ...]:
        """The run's asks still waiting for a person."""
        return self.supervisor.open_asks()

    def run_until_answered(self, timeout: float | None = None) -> RunSummary:
        """Run, then keep applying answers as they arrive until no ask of the run is open.

        Args:
            timeout: Give up after this many seconds (``None``: wait as long as it takes).

        Returns:
            The controller's summary after the last round.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        summary = self.run()
        while self.open_asks():
            remaining = _SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            self.wait(min(remaining, _SLICE))
            summary = self.poll()
        if next(self.watcher.pending(), None) is not None:  # answered since the last poll
            summary = self.poll()
        return summary

    def serve(self, stop: threading.Event, *, timeout: float | None = None) -> RunSummary:
        """Run, then apply answers as they arrive until ``stop`` is set (or ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        summary = self.run()
        while not stop.is_set():
            remaining = _SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            self.wait(min(remaining, _SLICE))
            summary = self.poll()
        return summary

    def wait(self, timeout: float) -> bool:
        """Block until something new lands on the board, or ``timeout`` seconds pass."""
        reader = self.blackboard.model.reader
        if reader.outcome().closed:  # nothing more can land; do not spin
            time.sleep(timeout)
            return False
        for _ in reader.follow(reader.head(), timeout=timeout):
            return True
        return False

    def records(self) -> tuple[SupervisionRecord, ...]:
        """Every decision and closure on the board."""
        return self.supervisor.records()

    def applied(self) -> tuple[AppliedAnswer, ...]:
        """Every answer applied on the board."""
        return self.watcher.applied()

    def close(self) -> None:
        """Close the supervisor, and the blackboard if this run opened it."""
        self.supervisor.close()
        if self._owns_board:
            self.blackboard.close()

    def __enter__(self) -> SupervisedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

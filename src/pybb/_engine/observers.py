"""Telling a controller's observers what happened; an observer that fails is logged, not fatal."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from blackboard import Record
from pybb._engine.blackboard import Blackboard
from pybb._engine.projection import RESOLUTIONS, base_key
from pybb._engine.seams import ControllerObserver
from pybb._engine.types import Stage

__all__ = ["Observers"]

_log = logging.getLogger("pybb")


class Observers:
    """The observers of one controller, and what each is told."""

    def __init__(self, observers: Iterable[ControllerObserver] = ()) -> None:
        self.all = list(observers)

    def add(self, observer: ControllerObserver) -> None:
        """Tell ``observer`` from now on."""
        self.all.append(observer)

    def tell(self, hook: str, value: Any) -> None:
        """Call ``hook`` on every observer with ``value``."""
        for observer in self.all:
            try:
                getattr(observer, hook)(value)
            except Exception:
                _log.exception("observer %r failed in %s", observer, hook)

    def escalation(self, board: Blackboard, key: str, *, redelivered: bool) -> None:
        """Tell of the escalation of ``key``, if it stands as decided."""
        if not self.all:
            return
        escalation = board.get_escalation(key)
        if escalation is None or escalation.sequence == 0:
            return  # not escalated as decided (the board was re-read); nothing to tell
        if escalation.entry.stage is not Stage.ESCALATED:
            return
        if redelivered:
            escalation = replace(escalation, redelivered=True)
        self.tell("on_escalated", escalation)

    def resolutions(self, board: Blackboard, records: Iterable[Record]) -> None:
        """Tell of the resolutions among ``records`` (writes taken in from elsewhere)."""
        if not self.all:
            return
        for record in records:
            if record.region == RESOLUTIONS:
                resolution = board.get_resolution(base_key(record.content["key"]))
                if resolution is not None:
                    self.tell("on_resolved", resolution)

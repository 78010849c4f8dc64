"""Small knowledge sources for the pybb tests."""

from __future__ import annotations

import threading
import time
from typing import Any

from pybb import AttemptError, Blackboard, KnowledgeSource


class Dec(KnowledgeSource):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        return blackboard.get_entry(key).measurement - 1


class Const(KnowledgeSource):
    def __init__(self, name: str, max_attempts: int = 1, *, value: Any, **kw: Any) -> None:
        super().__init__(name, max_attempts, **kw)
        self.value = value

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        return self.value


class Seen(KnowledgeSource):
    """Records the measurement it saw; changes nothing."""

    def __init__(self, name: str, max_attempts: int = 1, **kw: Any) -> None:
        super().__init__(name, max_attempts, **kw)
        self.seen: list[Any] = []

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        self.seen.append(blackboard.get_entry(key).measurement)
        return None


class Boom(KnowledgeSource):
    def execute(self, blackboard: Blackboard, key: str) -> Any:
        raise ValueError(f"cannot repair {key}")


class SetComponent(KnowledgeSource):
    """Writes ``value`` to ``target`` (its own component unless told otherwise)."""

    def __init__(
        self, name: str, max_attempts: int = 1, *, value: Any, target: str | None = None, **kw: Any
    ) -> None:
        super().__init__(name, max_attempts, **kw)
        self.value = value
        self.target = target

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        blackboard.write_component(key, self.target or self.component or "", self.value)
        return None


class Confirm(KnowledgeSource):
    """Confirms a provisional pass unless the measurement is in ``bad``."""

    def __init__(
        self, name: str, max_attempts: int = 1, *, bad: tuple[Any, ...] = (), **kw: Any
    ) -> None:
        super().__init__(name, max_attempts, **kw)
        self.bad = bad
        self.standings: list[tuple[bool, Any]] = []

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        entry = blackboard.get_entry(key)
        self.standings.append((entry.good_standing, entry.result))
        if entry.measurement in self.bad:
            raise AttemptError(
                f"{entry.measurement} failed confirmation", report={"checked": entry.measurement}
            )
        return None


class Sleepy(KnowledgeSource):
    """Sleeps past its timeout, then tries to write; the late write must be ignored."""

    def __init__(self, name: str, *, sleep: float, **kw: Any) -> None:
        super().__init__(name, 1, **kw)
        self.sleep = sleep
        self.finished = threading.Event()
        self.late_error: BaseException | None = None

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        time.sleep(self.sleep)
        try:
            blackboard.write_component(key, "x", 0)
        except BaseException as exc:
            self.late_error = exc
            raise
        finally:
            self.finished.set()
        return None

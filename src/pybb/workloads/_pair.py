"""The seed's ``example_pair``: one entry, two components, a source for each."""

from __future__ import annotations

from typing import Any

from blackboard.stores import Store
from pybb import Blackboard, BlackboardEntry, Controller, KnowledgeSource
from pybb.workloads._w1 import less_than_3

__all__ = ["FixComponent", "is_positive", "pair"]


class FixComponent(KnowledgeSource):
    """A component-scoped source that writes ``fix(value)`` to its component.

    Args:
        name: The source's name.
        max_attempts: Its attempts per entry.
        component: Its component.
        fix: The repair, old component value to new one.
    """

    def __init__(
        self, name: str, max_attempts: int, *, component: str, fix: Any, **options: Any
    ) -> None:
        super().__init__(name, max_attempts, component=component, **options)
        self.fix = fix

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        """Write the repaired component."""
        component = self.component
        assert component is not None
        value = blackboard.get_entry(key).measurement[component]
        blackboard.write_component(key, component, self.fix(value))
        return None


def is_positive(measurement: Any) -> bool:
    """The pair's ``y`` condition."""
    return bool(measurement > 0)


def pair(
    store: str | Store | None = None, *, board_id: str = "pair"
) -> tuple[Blackboard, Controller]:
    """The seed's ``example_pair``: ``{"x": 5, "y": -2}`` with x < 3 and y > 0.

    ``fix_x`` (3 attempts) decrements x; ``fix_y`` (2 attempts) takes y's absolute value.
    """
    board = Blackboard(store, board_id)
    controller = Controller(board, max_cycles=100)
    controller.register_predicate("less_than_3", less_than_3)
    controller.register_predicate("is_positive", is_positive)
    fix_x = FixComponent("fix_x", 3, component="x", fix=lambda x: x - 1)
    fix_y = FixComponent("fix_y", 2, component="y", fix=abs)
    controller.route("p1", on_fail=[fix_x, fix_y])
    board.write_entry(
        "p1",
        BlackboardEntry(
            conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": 5, "y": -2}
        ),
    )
    return board, controller

"""Property: a failure handoff never loses another component's fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybb import Blackboard, BlackboardEntry, Controller, KnowledgeSource


class Scripted(KnowledgeSource):
    """A component-scoped source: fixes its component (to 0) on attempt ``fixes_on``, if any;
    otherwise writes a wrong value, or raises, as its script says."""

    def __init__(
        self, component: str, max_attempts: int, fixes_on: int | None, misbehaves: str
    ) -> None:
        super().__init__(f"fix_{component}", max_attempts, component=component)
        self.fixes_on = fixes_on
        self.misbehaves = misbehaves

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        entry = blackboard.get_entry(key)
        attempt = entry.ks_history.get(self.name, 0) + 1
        component = self.component
        assert component is not None
        if attempt == self.fixes_on:
            blackboard.write_component(key, component, 0)
        elif self.misbehaves == "raise":
            raise RuntimeError("no luck")
        elif self.misbehaves == "wrong":
            blackboard.write_component(key, component, entry.measurement[component] + 7)
        return None


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, int], list[Scripted], list[str]]:
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=2, max_size=5, unique=True))
    start = {c: draw(st.integers(min_value=1, max_value=9)) for c in names}
    order = draw(st.permutations(names))
    chain = []
    for component in order:
        max_attempts = draw(st.integers(min_value=1, max_value=3))
        fixes_on = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=max_attempts + 1)))
        misbehaves = draw(st.sampled_from(["wrong", "raise", "nothing"]))
        chain.append(Scripted(component, max_attempts, fixes_on, misbehaves))
    return start, chain, order


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_a_failure_handoff_never_loses_another_components_fix(
    scenario: tuple[dict[str, int], list[Scripted], list[str]],
) -> None:
    check(scenario)


def test_negative_control_a_full_restore_on_component_handoff_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The property catches a controller that restores the whole pair on a component handoff."""
    restore = Controller._restore

    def whole(self: Controller, entry: Any, component: str | None) -> dict[str, Any]:
        return restore(self, entry, None)

    monkeypatch.setattr(Controller, "_restore", whole)
    fixes_y = Scripted("y", 1, fixes_on=1, misbehaves="nothing")
    fails_x = Scripted("x", 2, fixes_on=None, misbehaves="wrong")
    with pytest.raises(AssertionError):
        check(({"x": 5, "y": 5}, [fixes_y, fails_x], ["y", "x"]))


def check(scenario: tuple[dict[str, int], list[Scripted], list[str]]) -> None:
    start, chain, _ = scenario
    board = Blackboard()
    controller = Controller(board)
    controller.register_predicate("is_zero", lambda m: m == 0)
    controller.route("p", chain)
    board.write_entry(
        "p", BlackboardEntry(conditions=dict.fromkeys(start, "is_zero"), measurement=start)
    )
    controller.run()

    fixed = {s.component for s in chain if s.fixes_on is not None and s.fixes_on <= s.max_attempts}
    measurement = board.get_entry("p").measurement
    for component in start:
        expected = 0 if component in fixed else start[component]
        assert measurement[component] == expected, (component, measurement)
    # every restore touched only its own component, and only to the original value
    previous = dict(start)
    for event in board.get_history("p"):
        # a restore is a record of its own at the chain's end, else it rides its handoff
        data: Mapping[str, Any] | None = (
            event.data.get("restore") if event.kind == "handoff" else event.data
        )
        if data is None:
            continue  # a success handoff: nothing put back
        if event.kind in ("restore", "handoff"):
            assert data["value"] == start[data["component"]]
        if event.kind in ("restore", "handoff", "attempt"):
            current = _after(previous, data)
            changed = {c for c in current if current[c] != previous[c]}
            own = data.get("component") or data.get("source", "fix_")[4:]
            assert changed <= {own}, (event.kind, changed, own)
            previous = current
    assert board.get_entry("p").good_standing == (fixed == set(start))


def _after(measurement: dict[str, int], data: Mapping[str, Any]) -> dict[str, int]:
    updated = dict(measurement)
    if "component" in data and "value" in data:
        updated[data["component"]] = data["value"]
    for component, value in data.get("writes", ()):
        updated[component] = value
    return updated

"""The seed's example pair: KS1 fixes x, KS2 fixes y, both fixes kept, the entry ends good.

The entry is the dict measurement {"x": 5, "y": -2} with conditions x < 3 and y > 0.
fix_x may only write x and fix_y only y. fix_x decrements x until it passes; success
handoff moves the entry to fix_y without restoring anything; fix_y makes y positive; the
next cycle finds the whole pair in good standing and the controller halts.

Run it: ``python examples/example_pair.py`` (add a path to keep the board in SQLite).
"""

from __future__ import annotations

import sys

from pybb import Blackboard, BlackboardEntry, Controller, KnowledgeSource


class FixX(KnowledgeSource):
    """KS1: decrements x by one per attempt."""

    def execute(self, blackboard: Blackboard, key: str) -> None:
        x = blackboard.get_entry(key).measurement["x"]
        blackboard.write_component(key, "x", x - 1)


class FixY(KnowledgeSource):
    """KS2: makes y positive."""

    def execute(self, blackboard: Blackboard, key: str) -> None:
        y = blackboard.get_entry(key).measurement["y"]
        blackboard.write_component(key, "y", abs(y))


def main(store: str | None = None) -> int:
    bb = Blackboard(store, board_id="example_pair")
    bb.write_entry(
        "p1",
        BlackboardEntry(
            conditions={"x": "less_than_3", "y": "is_positive"}, measurement={"x": 5, "y": -2}
        ),
    )
    ctl = Controller(bb, max_cycles=1000)
    ctl.register_predicate("less_than_3", lambda m: m < 3)
    ctl.register_predicate("is_positive", lambda m: m > 0)
    fix_x = FixX("fix_x", max_attempts=3, component="x")
    fix_y = FixY("fix_y", max_attempts=2, component="y")
    ctl.route("p1", on_fail=[fix_x, fix_y])
    summary = ctl.run()
    ctl.status()
    entry = bb.get_entry("p1")
    print(f"halted: {summary.halted.value} after {summary.cycles} cycles")
    print(f"p1: {entry.measurement}, good standing: {entry.good_standing}")
    print(f"attempts: {dict(entry.ks_history)}")
    print(f"escalated: {sorted(bb.get_escalate())}")
    return 0 if entry.good_standing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))

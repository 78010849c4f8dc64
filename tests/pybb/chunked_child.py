"""A W1 run whose cycles commit in parts, killed right after its K-th commit (ADR 0020).

``python chunked_child.py DB N COMMIT_EVERY [--crash-after K] [--variant real|forgetful]``:
resumes the W1 board in ``DB`` (writing its N entries first if it has none), runs it to
the end with ``Controller(commit_every=COMMIT_EVERY)`` and prints ``DONE <digest>``. With
``--crash-after K`` the process ends with ``os._exit(137)``, as a SIGKILL would, as soon
as its K-th transaction has committed, before it decides anything more. ``forgetful`` is
the negative control: a resume that ignores where the interrupted cycle had got to.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pybb import Blackboard, BlackboardEntry, Controller
from pybb._engine.journal import Journal
from pybb.workloads import Decrement, ZeroEven, less_than_3


class CrashingJournal(Journal):
    crash_after = 0
    forgetful = False
    commits = 0

    def _commit(self, items: Any) -> bool:
        landed = super()._commit(items)
        CrashingJournal.commits += 1
        if CrashingJournal.commits == self.crash_after:
            os._exit(137)
        return landed

    def take_interrupted(self) -> tuple[str | None, dict[str, str]]:
        taken = super().take_interrupted()
        return (None, {}) if self.forgetful else taken


class CrashingBoard(Blackboard):
    journal_class = CrashingJournal


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("n", type=int)
    parser.add_argument("commit_every", type=int)
    parser.add_argument("--crash-after", type=int, default=0)
    parser.add_argument("--variant", choices=["real", "forgetful"], default="real")
    args = parser.parse_args()
    CrashingJournal.crash_after = args.crash_after
    CrashingJournal.forgetful = args.variant == "forgetful"
    board = CrashingBoard(f"sqlite:///{args.db}", "w1")
    controller = Controller(board, commit_every=args.commit_every)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    if not board.journal.view.entries:
        with board.batch():
            for i in range(args.n):
                entry = BlackboardEntry(predicate="less_than_3", measurement=i % 10)
                board.write_entry(f"e{i}", entry)
    controller.run()
    print(f"DONE {board.digest()} {CrashingJournal.commits}", flush=True)
    board.close()


if __name__ == "__main__":
    main()

"""One process of the deadline race: open the board, wait for "go", apply the deadlines.

Run as ``python deadline_child.py URL READY_DIR NUMBER {real,racy}``; prints how many
defaults this process wrote. ``racy`` opens the board as the racy variant declares it
(see ``deadline_support.open_race_board``): the default is read-then-written with no
unique constraint to stop a second one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from deadline_support import DUE, POLICY, open_race_board

from pybb.human import apply_deadlines


def main() -> None:
    url, ready, number, variant = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    model = open_race_board(url, racy=variant == "racy")
    try:
        (ready / f"ready-{number}").touch()
        while not (ready / "go").exists():  # every process leaves the gate together
            time.sleep(0.001)
        applied = apply_deadlines(model.control, model.reader, POLICY, now=DUE)
        print(len(applied), flush=True)
    finally:
        model.close()


if __name__ == "__main__":
    main()

"""RA-01's repair run on PostgreSQL, for the crash test to SIGKILL at random times.

``python pg_child.py URL BOARD [--variant real|ack-early|forgetful]``: the very workload
of ``tests/pybb/pybb_child.py ra01`` (four sources, scalar and pair entries, on_pass and
on_fail chains, escalations, one scripted answer), on a PostgreSQL board, printing
``ACK <head>`` after every committed cycle and ``DONE <digest>`` at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/pybb: the workload

from pybb_child import BOARDS, Acker, say
from pybb_workloads import ra01_answer, ra01_controller, ra01_entries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("board")
    parser.add_argument("--variant", default="real", choices=sorted(BOARDS))
    args = parser.parse_args()
    say("READY")
    board = BOARDS[args.variant](args.url, args.board)
    controller = ra01_controller(board)
    controller.add_observer(Acker())
    with board.batch():
        for key, entry in ra01_entries().items():
            board.write_entry(key, entry)
    say(f"ACK {board.head}")
    controller.run()
    ra01_answer(board, controller)
    say(f"ACK {board.head}")
    controller.run()
    say(f"DONE {board.digest()}")


if __name__ == "__main__":
    main()

"""A controller process for the crash tests: the parent SIGKILLs it at random times.

``python pybb_child.py ra01 DB [--variant real|ack-early|forgetful]``: runs RA-01's repair
run on SQLite, printing ``ACK <head>`` (unbuffered) after each committed cycle, then the
scripted human's answer, then ``DONE <digest>``.

``python pybb_child.py ra07 DB LEDGER GEN SEED N [--variant real|forgetful]``: runs the
flaky source over N activations; the source may SIGKILL this very process.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from pybb_workloads import (
    Flaky,
    Ledger,
    LedgerObserver,
    ra01_answer,
    ra01_controller,
    ra01_entries,
    ra07_controller,
    ra07_entries,
)

from pybb import Blackboard, ControllerObserver
from pybb._engine.journal import Journal
from pybb._engine.projection import ATTEMPTS, Projection


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


class Acker(ControllerObserver):
    def on_cycle(self, cycle: Any) -> None:
        say(f"ACK {cycle.sequence}")


class AckEarlyJournal(Journal):
    def _commit(self, items: Any) -> bool:
        say(f"ACK {self._state.head + len(items)}")
        time.sleep(0.01)
        return super()._commit(items)


class ForgetfulJournal(Journal):
    """Negative control: a resume that forgets the attempts already on the board.

    Re-executes them (re-running pre-interrupt side effects) and writes attempts without
    their idempotency keys, so re-executed attempts are applied a second time.
    """

    def _rebuild(self) -> None:
        state = Projection()
        for record in self.model.reader.log():
            if record.region != ATTEMPTS and record.region is not None:
                state.apply(record.region, record.content, record.sequence, record.version or 0)
            state.head = record.sequence
        self._state = state

    def emit(
        self, region: str, writer: str, content: Any, key: str | None, judged: Any = None
    ) -> None:
        super().emit(region, writer, content, None if region == ATTEMPTS else key, judged)


class AckEarly(Blackboard):
    """Negative control: acknowledges a batch before committing it."""

    journal_class = AckEarlyJournal


class Forgetful(Blackboard):
    """Negative control: a resume that forgets the attempts already on the board."""

    journal_class = ForgetfulJournal


BOARDS = {"real": Blackboard, "ack-early": AckEarly, "forgetful": Forgetful}


def ra01(args: argparse.Namespace) -> None:
    say("READY")
    board = BOARDS[args.variant](f"sqlite:///{args.db}", "ra01")
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


def ra07(args: argparse.Namespace) -> None:
    ledger = Ledger(Path(args.ledger), args.gen)
    board = BOARDS[args.variant](f"sqlite:///{args.db}", "ra07")
    source = Flaky(args.seed, ledger, kills=True)
    controller = ra07_controller(board, source, clock=_NoWait())
    controller.add_observer(LedgerObserver(ledger))
    board.write_entries(ra07_entries(args.n))
    if args.variant == "forgetful":
        controller.max_cycles = 60
    controller.run()
    say(f"DONE {board.digest()}")


class _NoWait:
    """A clock whose sleeps take no time: back-off is checked in-process, not here."""

    def __init__(self) -> None:
        from pybb.testing import FakeClock

        self._clock = FakeClock()

    def now(self) -> Any:
        return self._clock.now()

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ra01")
    p.add_argument("db")
    p.add_argument("--variant", default="real", choices=sorted(BOARDS))
    p.set_defaults(run=ra01)
    p = sub.add_parser("ra07")
    p.add_argument("db")
    p.add_argument("ledger")
    p.add_argument("gen", type=int)
    p.add_argument("seed", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--variant", default="real", choices=sorted(BOARDS))
    p.set_defaults(run=ra07)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()

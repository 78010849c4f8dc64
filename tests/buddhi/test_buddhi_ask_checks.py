"""ask_defects remembers the checks of the last options tuple: it must never answer stale.

``buddhi._asks.ask_defects`` skips re-checking an options tuple it checked last time
(the reference pack offers the same tuple in every ask). These tests hold every answer
to what a fresh check says, whatever was checked before it.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import pytest

from buddhi import Ask, AskOption
from buddhi._asks import ask_defects

GOOD = (AskOption("a"), AskOption("b", recommended=True))
ONE = (AskOption("a", recommended=True),)
TWO_STARS = (AskOption("a", recommended=True), AskOption("b", recommended=True))


class Option(AskOption):
    """A subclass of AskOption: a tuple holding one is never remembered."""

    __slots__ = ()


ASKS = [
    Ask("i", "Q?", GOOD, 0.5),
    Ask("i", "Q?", GOOD, 1),  # an int confidence is fine
    Ask("i", "Q?", GOOD, math.nan),
    Ask("i", "Q?", GOOD, True),
    Ask("i", " ", GOOD, 0.5),
    Ask("other", "Q?", GOOD, 0.5),
    Ask("i", "Q?", ONE, 0.5),
    Ask("i", "Q?", TWO_STARS, 0.5),
    Ask("i", "Q?", (), 0.5),  # the empty tuple is a singleton: it must not look remembered
    Ask("i", "Q?", (Option("a"), Option("b", recommended=True)), 0.5),
    Ask("i", "Q?", [*GOOD], 0.5),  # type: ignore[arg-type]
    Ask("i", "Q?", None, 0.5),  # type: ignore[arg-type]
    Ask("i", "Q?", ("a", "b"), 0.5),  # type: ignore[arg-type]
]


def fresh(ask: Ask) -> tuple[str, ...]:
    """The defects a first check of this options tuple finds."""
    ask_defects(Ask("i", "Q?", (AskOption("x"), AskOption("y", recommended=True)), 0.5), "i")
    return ask_defects(ask, "i")


@pytest.mark.parametrize(("before", "after"), list(itertools.product(ASKS, repeat=2)))
def test_an_answer_never_depends_on_what_was_checked_before(before: Ask, after: Ask) -> None:
    expected = fresh(after)
    ask_defects(before, "i")
    assert ask_defects(after, "i") == expected
    assert ask_defects(after, "i") == expected  # and again, now that it is remembered


EMPTY = (
    "it offers 0 options; offer 2 to 4",
    "it stars 0 recommendations; star exactly one",
)


def test_the_empty_options_tuple_is_a_defect_even_first() -> None:
    assert ask_defects(Ask("i", "Q?", (), 0.5), "i") == EMPTY
    # First in a fresh process too, before anything was remembered.
    script = (
        "from buddhi import Ask; from buddhi._asks import ask_defects; "
        "print(ask_defects(Ask('i', 'Q?', (), 0.5), 'i'))"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == repr(EMPTY)


def test_a_remembered_tuple_still_reports_the_other_defects_in_order() -> None:
    ask_defects(Ask("i", "Q?", ONE, 0.5), "i")
    assert ask_defects(Ask("other", "", ONE, 2.0), "i") == (
        "it is about item 'other', not 'i'",
        "its question is empty",
        "it offers 1 options; offer 2 to 4",
        "its confidence must be a finite number in [0, 1], got 2.0",
    )

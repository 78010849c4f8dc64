"""docs/workers.md says what the command and the registry really are."""

from __future__ import annotations

import argparse
import re

from pybb.cli import build_parser
from pybb.cli.worker import APPS
from storekit import REPO

PAGE = (REPO / "docs" / "workers.md").read_text()


def test_every_documented_option_is_an_option_of_pybb_worker() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    worker = commands.choices["worker"]
    options = {s for action in worker._actions for s in action.option_strings}
    documented = set(re.findall(r"^\| `(--[a-z-]+)", PAGE, re.MULTILINE))
    assert documented and documented <= options, documented - options


def test_every_short_name_is_documented() -> None:
    documented = set(re.findall(r"^\| `([a-z0-9]+)` \| ", PAGE, re.MULTILINE))
    assert documented == set(APPS)


def test_the_page_names_the_decision_record_it_relies_on() -> None:
    assert (REPO / "docs" / "adr" / "0006-leased-claims.md").exists()
    assert "0006-leased-claims.md" in PAGE

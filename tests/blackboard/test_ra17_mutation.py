"""RA-17, mutation half (nightly): mutmut kills at least 90 % of the admission mutants.

mutmut mutates the control component and the transaction rules, then reruns the kernel's
in-process tests against every mutant; a mutant no test notices is a behaviour no test
pins down. The score counts the mutants inside the functions that admit and permit
writes (the same list the coverage half holds to 100 %); mutants elsewhere in the two
files are run and reported but not scored. Mutants no test reaches count as survivors.

Nightly only (about 5 minutes on 2 cores): ``PYBB_NIGHTLY=1 pytest
tests/blackboard/test_ra17_mutation.py -s``. It works on a copy of the checkout, since
mutmut writes its ``mutants/`` folder beside ``pyproject.toml``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from storekit import NIGHTLY, REPO

pytestmark = [
    pytest.mark.nightly,
    pytest.mark.skipif(not NIGHTLY, reason="mutation testing is nightly: set PYBB_NIGHTLY=1"),
]

MUTATED = ["src/blackboard/_control.py", "src/blackboard/stores/_base.py"]
SCORED = {
    "blackboard._control.xǁControlǁ_prepare_all",
    "blackboard._control.xǁControlǁ_prepare",
    "blackboard._control.xǁControlǁ_judge",
    "blackboard._control.xǁControlǁ_guarded",
    "blackboard._control.xǁControlǁ_not_permitted",
    "blackboard._control.xǁControlǁ_permitted",
    "blackboard._control.xǁControlǁ_permission",
    "blackboard.stores._base.x__apply_one",
    "blackboard.stores._base.x__refusal",
}
TESTS = [
    "tests/blackboard/test_seed_rules.py",
    "tests/blackboard/test_model.py",
    "tests/blackboard/test_authz.py",
    "tests/blackboard/test_write_path.py",
    "tests/blackboard/test_notifications.py",
    "tests/blackboard/test_judge.py",
    "tests/blackboard/test_rejection_messages.py",
    "tests/blackboard/test_malformed_inputs.py",
    "tests/blackboard/test_store_faults.py",
    "tests/blackboard/test_idempotency_prints.py",
    "tests/blackboard/postgres/test_pg_check_store.py",
]
KILLED = {"killed", "timeout"}
FLOOR = 0.90


def _config() -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(f'"{item}"' for item in items) + "]"

    # The embedded backends only, and not the revoke race, which measures timing.
    options = ["-p", "no:cacheprovider", "-x", "-q", "-m", "not postgres"]
    options += ["-k", "not concurrent_revoke"]
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list(MUTATED)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(TESTS)}\n"
        f"pytest_add_cli_args = {toml_list(options)}\n"
    )


def _checkout_copy(target: Path) -> Path:
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "mutants", "__pycache__", ".mypy_cache", ".ruff_cache", "*.db"
    )
    shutil.copytree(REPO / "src", target / "src", ignore=ignore)
    shutil.copytree(REPO / "tests", target / "tests", ignore=ignore)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    (target / "pyproject.toml").write_text(pyproject + _config(), encoding="utf-8")
    return target


def _function(mutant: str) -> str:
    return re.sub(r"__mutmut_\d+$", "", mutant)


def test_mutmut_kills_ninety_percent_of_admission_mutants(tmp_path: Path) -> None:
    pytest.importorskip("mutmut", reason="mutmut is in the test extra: pip install '.[test]'")
    work = _checkout_copy(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if k != "PYBB_NIGHTLY"}
    mutmut = [sys.executable, "-m", "mutmut"]
    subprocess.run(
        [*mutmut, "run", "--max-children", str(os.cpu_count() or 2)],
        cwd=work,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,  # a progress line per mutant
    )
    listed = subprocess.run(
        [*mutmut, "results", "--all", "true"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    status = dict(line.strip().rsplit(": ", 1) for line in listed.splitlines() if ": " in line)
    assert status, f"mutmut reported no mutants:\n{listed}"
    everything = Counter(status.values())
    scored = {m: s for m, s in status.items() if _function(m) in SCORED}
    assert {_function(m) for m in scored} == SCORED, "a scored function has no mutants"
    by_function = {
        f: Counter(s for m, s in scored.items() if _function(m) == f) for f in sorted(SCORED)
    }
    killed = sum(1 for s in scored.values() if s in KILLED)
    ratio = killed / len(scored)
    print(f"\nall mutants of {', '.join(MUTATED)}: {dict(everything)}")
    for function, counts in by_function.items():
        print(f"  {function}: {dict(counts)}")
    print(f"admission and permission: {killed}/{len(scored)} killed ({ratio:.1%})")
    survivors = sorted(m for m, s in scored.items() if s not in KILLED)
    assert ratio >= FLOOR, f"survivors (mutmut show NAME in {work}): {survivors}"

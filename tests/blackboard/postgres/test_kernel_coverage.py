"""RA-17, coverage half: branch coverage of the kernel core, measured over the kernel's tests.

Opt-in (it runs the whole kernel suite again, under coverage): ``PYBB_COVERAGE=1`` with
``coverage`` installed (not a declared dependency yet). Pass: at least 90 % (lines and
branches) in each core module (the control component, the transaction rules, every
store) and 100 % in the functions that admit and permit writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORE = [
    "src/blackboard/_control.py",
    "src/blackboard/stores/_base.py",
    "src/blackboard/stores/_memory.py",
    "src/blackboard/stores/_sqlite.py",
    "src/blackboard/stores/_postgres.py",
    "src/blackboard/stores/_pg_schema.py",
    "src/blackboard/stores/_pg_listen.py",
]
ADMISSION_AND_PERMISSION = {
    "src/blackboard/_control.py": [
        "Control._prepare",
        "Control._judge",
        "Control._guarded",
        "Control._not_permitted",
        "Control._permission",
    ],
    "src/blackboard/stores/_base.py": ["_apply_one", "_refusal"],
}

pytestmark = pytest.mark.skipif(
    os.environ.get("PYBB_COVERAGE") != "1",
    reason="branch coverage reruns the kernel suite; set PYBB_COVERAGE=1 (needs coverage)",
)


def test_kernel_core_branch_coverage(tmp_path: Path) -> None:
    pytest.importorskip("coverage")
    data, report = tmp_path / ".coverage", tmp_path / "coverage.json"
    env = dict(os.environ, COVERAGE_FILE=str(data))
    run = [sys.executable, "-m", "coverage", "run", "--branch", "--source=blackboard"]
    suite = ["-m", "pytest", "tests/blackboard", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*run, *suite, "-k", "not kernel_core_branch_coverage"], cwd=REPO, env=env, check=False
    )
    assert done.returncode in (0, 1), "the kernel suite did not run"
    subprocess.run(
        [sys.executable, "-m", "coverage", "json", "-o", str(report)], env=env, check=True
    )
    files = json.loads(report.read_text())["files"]
    low = {f: files[f]["summary"]["percent_covered"] for f in CORE}
    print({f: round(p, 1) for f, p in low.items()})
    assert {f: p for f, p in low.items() if p < 90} == {}
    for path, names in ADMISSION_AND_PERMISSION.items():
        functions = files[path]["functions"]
        partial = {n: functions[n]["summary"]["percent_covered"] for n in names}
        assert {n: p for n, p in partial.items() if p < 100} == {}

"""RA-17, coverage half: branch coverage of the kernel core over the kernel's own tests.

Reruns the in-process kernel tests (the contract suite on every backend, the seed's rules,
the write path, permissions, malformed inputs, store faults, PostgreSQL's store, faults
and claims: about 80 s) under ``coverage --branch``; the multi-process tests add nothing a
parent process can measure. Pass: at least 90 % (lines and branches) in each core module
(the control component, the transaction rules, every store) and 100 % in the functions
that admit and permit writes. Needs the PostgreSQL server (skips without it, except under
CI=true); ``PYBB_COVERAGE=0`` skips it on a machine in a hurry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storekit import pg_server

REPO = Path(__file__).resolve().parents[3]
CORE = [
    "src/blackboard/_control.py",
    "src/blackboard/frozen.py",
    "src/blackboard/stores/_base.py",
    "src/blackboard/stores/_memory.py",
    "src/blackboard/stores/_sqlite.py",
    "src/blackboard/stores/_postgres.py",
    "src/blackboard/stores/_pg_schema.py",
    "src/blackboard/stores/_pg_listen.py",
    "src/blackboard/stores/_pg_plain.py",
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

SUITE = [
    "tests/blackboard/test_seed_rules.py",
    "tests/blackboard/test_model.py",
    "tests/blackboard/test_authz.py",
    "tests/blackboard/test_write_path.py",
    "tests/blackboard/test_notifications.py",
    "tests/blackboard/test_judge.py",
    "tests/blackboard/test_store_faults.py",
    "tests/blackboard/test_malformed_inputs.py",
    "tests/blackboard/test_frozen_builders.py",
    "tests/blackboard/test_idempotency_prints.py",
    "tests/blackboard/postgres/test_pg_store.py",
    "tests/blackboard/postgres/test_pg_faults.py",
    "tests/blackboard/postgres/test_pg_check_store.py",
    "tests/blackboard/postgres/test_pg_claims.py",
    "tests/blackboard/postgres/test_pg_planned_append.py",
]

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.environ.get("PYBB_COVERAGE") == "0", reason="PYBB_COVERAGE=0 skips the coverage rerun"
    ),
]


def test_kernel_core_branch_coverage(tmp_path: Path) -> None:
    pytest.importorskip("coverage", reason="coverage is in the test extra: pip install '.[test]'")
    pg_server()  # the PostgreSQL store is core: without a server its figures would be 0
    data, report = tmp_path / ".coverage", tmp_path / "coverage.json"
    env = dict(os.environ, COVERAGE_FILE=str(data))
    run = [sys.executable, "-m", "coverage", "run", "--branch", "--source=blackboard"]
    # The revoke race measures timing, which tracing skews; it is no coverage source.
    race = "tests/blackboard/test_authz.py::test_no_write_lands_after_a_concurrent_revoke"
    suite = ["-m", "pytest", *SUITE, "-q", "-p", "no:cacheprovider", "--deselect", race]
    done = subprocess.run([*run, *suite], cwd=REPO, env=env, check=False)
    assert done.returncode == 0, "the kernel tests failed under coverage (output above)"
    subprocess.run(
        [sys.executable, "-m", "coverage", "json", "-o", str(report)], env=env, check=True
    )
    # Keyed by where blackboard was imported from: src/ in a checkout installed with -e,
    # site-packages in CI's clean install. Key them by the path under src/ either way.
    measured = json.loads(report.read_text())["files"]
    files = {
        f"src/blackboard/{path.replace(os.sep, '/').rsplit('/blackboard/', 1)[1]}": data
        for path, data in measured.items()
        if "/blackboard/" in path.replace(os.sep, "/")
    }
    missing = [f for f in CORE if f not in files]
    assert not missing, f"coverage measured none of {missing} (measured: {sorted(measured)})"
    low = {f: files[f]["summary"]["percent_covered"] for f in CORE}
    print({f: round(p, 1) for f, p in low.items()})
    assert {f: p for f, p in low.items() if p < 90} == {}
    for path, names in ADMISSION_AND_PERMISSION.items():
        functions = files[path]["functions"]
        partial = {n: functions[n]["summary"]["percent_covered"] for n in names}
        assert {n: p for n, p in partial.items() if p < 100} == {}

"""The package's face: its exported names, its layering, its command line and example."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pybb
from pybb.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"


def test_all_is_sorted_and_every_name_is_exported() -> None:
    assert pybb.__all__ == sorted(pybb.__all__)
    for name in pybb.__all__:
        assert getattr(pybb, name) is not None
    assert {"Blackboard", "BlackboardEntry", "KnowledgeSource", "Controller"} <= set(pybb.__all__)
    assert "attestation" not in pybb.__all__


def test_the_seeds_names_are_all_there() -> None:
    board = pybb.Blackboard()
    for name in (
        "entries",
        "history",
        "escalate",
        "write_entry",
        "get_entry",
        "get_all_entries",
        "get_history",
        "get_escalate",
        "add_ks_history",
        "restore_original",
        "write_component",
        "restore_component",
    ):
        assert hasattr(board, name), name
    controller = pybb.Controller(board)
    for name in (
        "blackboard",
        "knowledge_sources",
        "predicate_registry",
        "routes",
        "dispatched",
        "max_cycles",
        "cycle_count",
        "register_predicate",
        "add_ks",
        "route",
        "_dispatch",
        "_advance",
        "_advance_ready",
        "_evaluate_entry",
        "_evaluate_all",
        "run",
        "status",
    ):
        assert hasattr(controller, name), name
    entry = pybb.BlackboardEntry(predicate="p", measurement=1)
    for name in (
        "predicate",
        "conditions",
        "measurement",
        "result",
        "good_standing",
        "original_measurement",
        "ks_history",
    ):
        assert hasattr(entry, name), name

    class Source(pybb.KnowledgeSource):
        def execute(self, blackboard: pybb.Blackboard, key: str) -> None:
            return None

    source = Source("k", 2, component="x")
    for name in ("name", "partition", "max_attempts", "component", "can_contribute", "execute"):
        assert hasattr(source, name), name


def loaded_modules(statement: str) -> set[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout))


def test_pybb_and_buddhi_do_not_import_each_other() -> None:
    modules = loaded_modules("import pybb, pybb.testing")
    assert not any(m == "buddhi" or m.startswith("buddhi.") for m in modules)
    assert "blackboard" in modules
    assert "rich" not in modules  # status() imports it when asked
    if (REPO / "src" / "buddhi" / "__init__.py").exists():
        assert not any(m.startswith("pybb") for m in loaded_modules("import buddhi"))


def test_the_command_line_lists_its_commands_and_runs_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "demo" in build_parser().format_help()
    assert main(["demo", "--db", str(tmp_path / "w1.db"), "-n", "300", "--rows", "3"]) == 0
    out = capsys.readouterr().out
    assert "p1 = {'x': 2, 'y': 2}, good: True" in out
    assert "'escalated': 60" in out and "cycle 3" in out
    assert main(["demo", "--db", str(tmp_path / "w1.db"), "-n", "300"]) == 0  # resumes: same end
    assert main([]) == 2


# The engine's modules as they were named before they moved into pybb/_engine/ (issue 12):
# a module of that name elsewhere would read as a second engine.
ENGINE_NAMES = {
    f"_{name}.py"
    for name in (
        "attempt", "blackboard", "controller", "entries", "seams", "source", "state",
        "status", "types", "values", "worker",
    )
}  # fmt: skip


def test_the_folders_tell_the_engine_from_the_applications() -> None:
    package = REPO / "src" / "pybb"
    assert {p.name for p in package.iterdir() if p.name != "__pycache__"} == {
        "__init__.py", "__main__.py", "errors.py", "testing.py", "py.typed",
        "_engine", "attestation", "cli", "human", "inbox", "supervision", "workloads",
    }  # fmt: skip
    elsewhere = {
        str(p.relative_to(package))
        for p in package.rglob("_*.py")
        if "_engine" not in p.parts and p.name in ENGINE_NAMES
    }
    assert not elsewhere, f"named like the engine's modules: {sorted(elsewhere)}"


def test_python_dash_m_pybb_is_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pybb", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("demo", "attest", "inbox", "worker"):
        assert command in done.stdout
    assert done.stdout.startswith("usage: pybb ")


def test_the_example_pair_runs_as_a_script(tmp_path: Path) -> None:
    script = REPO / "examples" / "example_pair.py"
    out = subprocess.run(
        [sys.executable, str(script), f"sqlite:///{tmp_path / 'pair.db'}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "p1: {'x': 2, 'y': 2}, good standing: True" in out
    assert "attempts: {'fix_x': 3, 'fix_y': 1}" in out and "escalated: []" in out


@pytest.mark.parametrize("variant", ["pybb memory", "pybb sqlite batch", "pybb sqlite entry"])
def test_the_benchmark_runs_each_pybb_variant(tmp_path: Path, variant: str) -> None:
    script = REPO / "bench" / "w1_repair_ladder.py"
    db = str(tmp_path / "w1.db")
    out = subprocess.run(
        [sys.executable, str(script), "--one", variant, "200", db],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["ok"] and figures["records"] > 200 * 5 and figures["kib_per_entry"] > 0


def test_the_benchmark_finds_and_runs_the_shared_baselines(tmp_path: Path) -> None:
    shared = REPO.parent / "shared" / "bench"
    if not (shared / "plain_python_w1.py").exists():
        pytest.skip(f"no shared W1 baselines beside the checkout ({shared})")
    script = REPO / "bench" / "w1_repair_ladder.py"
    out = subprocess.run(
        [sys.executable, str(script), "--sizes", "100", "--rounds", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.count("x |") == 3 and "`plain_python`" in out


def test_the_instruction_benchmark_counts_this_tree_against_a_base() -> None:
    if shutil.which("valgrind") is None:
        reason = "valgrind is not installed (apt-get install valgrind)"
        if IN_CI:
            pytest.fail(f"CI=true and the instruction benchmark cannot run: {reason}")
        pytest.skip(reason)
    script = REPO / "bench" / "w1_instructions.py"
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "--sizes",
            "10",
            "30",
            "--base",
            str(REPO / "src"),
            "--by-library",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    row = next(line for line in out.splitlines() if line.startswith("| memory |"))
    ours, base, ratio = (cell.strip() for cell in row.strip("|").split("|")[1:])
    # The same tree twice, under one hash seed: the counts differ only by what the
    # temporary folders' names move (a hash seed per process once moved them by 10 %).
    assert min(float(ours.rstrip("k")), float(base.rstrip("k"))) > 10, out
    assert 0.98 < float(ratio) < 1.02, out
    # Most of a memory-store entry is the interpreter's; the split adds up to the total.
    split = {
        cells[1]: float(cells[2].rstrip("k"))
        for line in out.splitlines()
        if line.startswith("| memory | ")
        and len(cells := [c.strip() for c in line.split("|")[1:-1]]) == 3
    }
    assert split["the interpreter (libpython)"] > 0.5 * float(ours.rstrip("k")), out
    assert abs(sum(split.values()) - float(ours.rstrip("k"))) < 0.02 * float(ours.rstrip("k")), out


def test_the_instruction_split_reads_callgrinds_compressed_names_and_calls() -> None:
    # A script, not a module of a package: loaded from its file.
    spec = importlib.util.spec_from_file_location(
        "w1_instructions", REPO / "bench" / "w1_instructions.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = "\n".join(
        [
            "events: Ir",
            "ob=(1) /usr/lib/libpython3.11.so.1.0",
            "fl=(1) ceval.c",
            "fn=(1) eval",
            "",  # blank lines part blocks; they are no cost line
            "10 500",
            "+2 300",
            "cob=(2) /usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6",
            "cfn=(2) sqlite3_step",
            "calls=4 0",
            "12 9000",  # the call's inclusive cost: counted where the callee runs
            "* 7",
            "ob=(2)",
            "fn=(2)",
            "0 9000",
            "ob=(1)",
            "fn=(1)",
            "-3 3",
            "totals: 9810",
        ]
    )
    assert script.by_library(out) == {"the interpreter (libpython)": 810, "libsqlite3": 9000}


def test_the_profile_benchmark_splits_w1_by_module_and_layer() -> None:
    script = REPO / "bench" / "w1_profile.py"
    out = subprocess.run(
        [sys.executable, str(script), "--entries", "100", "--store", "sqlite", "--top", "40"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    modules = [line.split("|")[1].strip() for line in out.splitlines() if line.count("|") == 6]
    assert "pybb._engine.journal" in modules and "blackboard.stores._sqlite" in modules, out
    layers = {
        cells[0]: float(cells[1].rstrip("%"))
        for line in out.splitlines()
        if line.count("|") == 3
        and (cells := [c.strip() for c in line.split("|")[1:-1]])[1].endswith("%")
    }
    assert {"engine", "kernel", "store", "C functions"} <= set(layers), out
    assert abs(sum(layers.values()) - 100) < 1, out

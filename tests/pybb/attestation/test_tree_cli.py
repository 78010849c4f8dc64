"""``pybb attest`` end to end: the demo, a folder, the JSON report, resuming, bad usage."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pybb.attestation import Attestation, generate_fleet
from pybb.cli import build_parser, main
from pybb.cli.attest import _run

REPO = Path(__file__).resolve().parents[3]


def attest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybb", "attest", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_the_demo_runs_from_a_fresh_directory_and_writes_its_report(tmp_path: Path) -> None:
    done = attest("--demo", "50", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for words in ("attestation summary", "accuracy against ground truth", "passed", "repaired"):
        assert words in out
    assert "escalated" in out and "100.0%" in out and "report written to pybb-report.json" in out
    assert (tmp_path / "pybb-attest.db").is_file()
    report = json.loads((tmp_path / "pybb-report.json").read_text())
    assert report["devices_total"] == 50 and len(report["devices"]) == 50
    assert report["store"] == "sqlite:///pybb-attest.db"
    assert report["board_id"] == "attest-demo-50-seed-0"
    summary = report["summary"]
    assert summary["passed"] + summary["repaired"] + summary["escalated"] == 50
    assert sum(summary["escalated_by_reason"].values()) == summary["escalated"]
    assert report["accuracy"]["rate"] == 1.0 and report["accuracy"]["correct"] == 50
    for device in report["devices"]:
        assert device["correct"] is True and device["truth"]["outcome"] == device["outcome"]
        if device["outcome"] == "escalated":
            assert device["report"]["reason"] == device["reason"]
            assert device["report"]["findings"] and device["report"]["options"]
            assert device["device"] in device["text"] and device["tier"] in device["text"]
        if device["outcome"] == "repaired":
            finding = device["report"]["findings"][0]
            assert {"pcr", "event", "event_type", "expected", "found"} <= set(finding)
    again = attest("--demo", "50", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "pybb-report.json").read_text()) == report


def test_a_saved_fleet_folder_attests_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'a.db'}"
    first = tmp_path / "first.json"
    args = ["attest", "--demo", "40", "--seed", "3", "--store", store, "--no-progress"]
    assert main([*args, "--report", str(first), "--save-fleet", str(tmp_path / "fleet")]) == 0
    second = tmp_path / "second.json"
    assert main(["attest", str(tmp_path / "fleet"), "--store", store, "--report", str(second)]) == 0
    out = capsys.readouterr().out
    assert "fleet written to" in out and out.count("100.0%") >= 2
    left, right = (json.loads(p.read_text()) for p in (first, second))
    assert left["board_id"] != right["board_id"]
    assert [(d["device"], d["outcome"], d["reason"]) for d in left["devices"]] == [
        (d["device"], d["outcome"], d["reason"]) for d in right["devices"]
    ]


def test_bad_usage_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'u.db'}"
    report = str(tmp_path / "r.json")
    assert main(["attest", "--store", store, "--report", report]) == 2
    assert "give a fleet FOLDER or --demo N" in capsys.readouterr().err
    assert main(["attest", str(tmp_path), "--demo", "3", "--store", store]) == 2
    assert main(["attest", "--demo", "0", "--store", store]) == 2
    assert main(["attest", str(tmp_path / "nowhere"), "--store", store]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert (
        main(["attest", "--demo", "5", "--store", store, "--board-id", "b", "--report", report])
        == 0
    )
    assert (
        main(["attest", "--demo", "6", "--store", store, "--board-id", "b", "--report", report])
        == 2
    )
    assert "already attests fleet 'demo-5-seed-0'" in capsys.readouterr().err
    assert "attest" in build_parser().format_help()


def test_the_progress_bar_shows_on_a_terminal() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    with Attestation(generate_fleet(30, seed=2), chunk_size=10) as attestation:
        report = _run(attestation, console, quiet=False)
    assert report.accuracy == 1.0
    assert "attesting" in screen.getvalue() and "30/30" in screen.getvalue()

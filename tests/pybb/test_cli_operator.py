"""Issue 14: every failure of the ``pybb`` command is a sentence, its exit status honest.

Each test runs the real command in a subprocess on real files (a real small tmpfs for a
full or read-only disk) and checks the exit status, the message, that no traceback was
printed, and that the store is unchanged by a refused command. The row numbers are the
issue's table.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import (
    Child,
    devices_of,
    environment,
    pybb_command,
    refused,
    remount,
    run,
    store_digest,
    tmpfs,
)

from pybb.attestation import generate_fleet, save_fleet

UNREACHABLE = "postgresql://pybb@127.0.0.1:1/x"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict[str, object]]]:
    """Per-device outcomes of uninterrupted runs, by fleet size (computed once)."""
    folder = tmp_path_factory.mktemp("reference")
    found: dict[int, list[dict[str, object]]] = {}
    for n in (300,):
        run("attest", "--demo", str(n), "--report", f"r{n}.json", cwd=folder, check=0)
        found[n] = devices_of(folder / f"r{n}.json")
    return found


# -- row 1: a full disk, a read-only disk ------------------------------------------------------


def test_row1_a_full_disk_is_one_sentence_and_the_same_command_resumes(
    tmp_path: Path, reference: dict[int, list[dict[str, object]]]
) -> None:
    with tmpfs(tmp_path / "small", "2m") as disk:
        store = f"sqlite:///{disk / 'b.db'}"
        done = run("attest", "--demo", "300", "--store", store, cwd=tmp_path)
        text = refused(done, "the disk is full", "run the same command again")
        assert text.count("\n") <= 30  # a sentence (and log lines), not a dump
        remount(disk, "size=64m")  # space freed: the same command resumes
        run("attest", "--demo", "300", "--store", store, cwd=tmp_path, check=0)
    assert devices_of(tmp_path / "pybb-report.json") == reference[300]


def test_row1_resuming_on_a_read_only_file_system_refuses_cleanly(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "16m") as disk:
        store = f"sqlite:///{disk / 'b.db'}"
        run("attest", "--demo", "30", "--store", store, cwd=tmp_path, check=0)
        remount(disk, "ro")
        before = store_digest(disk / "b.db")
        done = run("attest", "--demo", "30", "--store", store, "--report", "r.json", cwd=tmp_path)
        refused(done, "read-only")
        assert store_digest(disk / "b.db") == before
        assert not (tmp_path / "r.json").exists()


# -- row 2: Ctrl-C -----------------------------------------------------------------------------


def test_row2_ctrl_c_exits_130_and_the_same_command_resumes_to_the_same_report(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    child = Child(["attest", "--demo", "2000", "--chunk", "50"], cwd=tmp_path / "a")
    try:
        child.wait_for("attested 50 of 2000")  # progress: it is mid-run
        child.process.send_signal(signal.SIGINT)
        status, text = child.finish()
    finally:
        child.kill()
    assert status == 130, text[-2000:]
    assert "interrupted; the same command resumes" in text
    assert "Traceback" not in text
    assert not (tmp_path / "a" / "pybb-report.json").exists()
    run("attest", "--demo", "2000", "--chunk", "50", cwd=tmp_path / "a", check=0)
    run("attest", "--demo", "2000", "--chunk", "50", cwd=tmp_path / "b", check=0)
    assert devices_of(tmp_path / "a" / "pybb-report.json") == devices_of(
        tmp_path / "b" / "pybb-report.json"
    )


# -- row 3: the report on a full disk ----------------------------------------------------------


def test_row3_a_report_that_does_not_fit_leaves_the_older_one_whole(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    run("attest", "--demo", "300", "--store", store, "--report", "old.json", cwd=tmp_path, check=0)
    old = (tmp_path / "old.json").read_bytes()
    with tmpfs(tmp_path / "full", f"{len(old) // 1024 + 64}k") as disk:
        (disk / "pybb-report.json").write_bytes(old)
        handle = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last block
            while os.write(handle, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(handle)
        before = store_digest(tmp_path / "b.db", lease=False)
        report = str(disk / "pybb-report.json")
        done = run("attest", "--demo", "300", "--store", store, "--report", report, cwd=tmp_path)
        refused(done, "cannot write the report", "disk is full")
        assert (disk / "pybb-report.json").read_bytes() == old
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "pybb-report.json"]
    assert store_digest(tmp_path / "b.db", lease=False) == before


def test_report_dash_is_standard_output_and_no_file_named_dash(tmp_path: Path) -> None:
    done = run("attest", "--demo", "20", "--report", "-", cwd=tmp_path, check=0)
    data = json.loads(done.stdout)
    assert data["devices_total"] == 20
    assert "attestation summary" in done.stderr
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(("fail_on", "status"), [("never", 0), ("escalated", 1), ("asked", 0)])
def test_fail_on_sets_the_exit_status_for_scripts(
    tmp_path: Path, fail_on: str, status: int
) -> None:
    # The demo fleet has escalated devices by design (no --inbox: nobody is asked).
    run("attest", "--demo", "40", "--fail-on", fail_on, cwd=tmp_path, check=status)


def test_version_and_defaults_in_help(tmp_path: Path) -> None:
    assert run("--version", cwd=tmp_path, check=0).stdout.startswith("pybb (mrpybb) ")
    help_text = run("attest", "--help", cwd=tmp_path, check=0).stdout
    words = " ".join(help_text.split())
    assert "(default never)" in words
    assert "unread (default: 16777216)" in words  # shown by the formatter
    worker_help = " ".join(run("worker", "--help", cwd=tmp_path, check=0).stdout.split())
    assert "(default: 10.0)" in worker_help


# -- row 4: caps before reading ----------------------------------------------------------------


def _fleet_with_a_huge_log(tmp_path: Path) -> tuple[Path, str]:
    folder = save_fleet(generate_fleet(6, seed=0), tmp_path / "fleet")
    device = sorted((folder / "devices").glob("*.json"))[0]
    evidence = json.loads(device.read_text())
    log = folder / "logs" / "huge.bin"
    log.parent.mkdir(exist_ok=True)
    with open(log, "wb") as out:
        out.write(os.urandom(1 << 20) * 64)  # 64 MiB, really on disk
    evidence.pop("log_base64", None)
    evidence["log"] = "logs/huge.bin"
    device.write_text(json.dumps(evidence))
    truth_file = folder / "truth.json"
    if truth_file.exists():  # its ground truth no longer holds: drop it
        truth = json.loads(truth_file.read_text())
        truth.pop(device.stem, None)
        truth_file.write_text(json.dumps(truth))
    return folder, device.stem


def test_row4_a_64_mib_event_log_is_escalated_unread_fast_and_small(tmp_path: Path) -> None:
    folder, device = _fleet_with_a_huge_log(tmp_path)
    # The peak memory of the child's own address space (VmHWM; getrusage's ru_maxrss
    # survives exec, so it would count this test's pages from before the fork).
    code = (
        "import re, sys\n"
        "from pathlib import Path\n"
        "from pybb.cli import main\n"
        f"status = main(['attest', {str(folder)!r}, '--report', 'r.json'])\n"
        "status_text = Path('/proc/self/status').read_text()\n"
        "print(re.search(r'VmHWM:\\s+(\\d+) kB', status_text)[1])\n"
        "sys.exit(status)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [pybb_command()[0], "-c", code],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    peak_kib = int(done.stdout.strip().splitlines()[-1])
    report = json.loads((tmp_path / "r.json").read_text())
    row = next(d for d in report["devices"] if d["device"] == device)
    assert (row["outcome"], row["reason"]) == ("escalated", "bad_evidence")
    assert "logs/huge.bin" in row["text"] and "over the cap of 16777216 bytes" in row["text"]
    assert seconds < 20, seconds
    assert peak_kib < 100 * 1024, f"{peak_kib} KiB: the log was read"


def test_row4_the_cap_is_configurable(tmp_path: Path) -> None:
    folder, device = _fleet_with_a_huge_log(tmp_path)
    cap = str(128 * 1024 * 1024)
    done = run("attest", str(folder), "--max-log-size", cap, "--report", "r.json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    row = next(
        d for d in json.loads((tmp_path / "r.json").read_text())["devices"] if d["device"] == device
    )
    assert "over the cap" not in row["text"]  # read this time (and found malformed)


# -- rows 5 and 11: one controller per board; a killed worker's lease ---------------------------


def test_row5_a_second_pybb_attest_on_the_board_is_refused_naming_the_holder(
    tmp_path: Path, reference: dict[int, list[dict[str, object]]]
) -> None:
    first = Child(["attest", "--demo", "300", "--chunk", "25"], cwd=tmp_path)
    try:
        first.wait_for("attested 25 of 300")
        # Held still (alive, holding the board) while the second one tries: a fast machine
        # would otherwise let the first finish before the second has started.
        os.kill(first.process.pid, signal.SIGSTOP)
        try:
            second = run("attest", "--demo", "300", "--report", "second.json", cwd=tmp_path)
        finally:
            os.kill(first.process.pid, signal.SIGCONT)
        refused(second, "is being attested by pybb attest on", f"pid {first.process.pid}")
        assert not (tmp_path / "second.json").exists()
        status, text = first.finish()
    finally:
        first.kill()
    assert status == 0, text[-2000:]
    assert devices_of(tmp_path / "pybb-report.json") == reference[300]
    conn = sqlite3.connect(tmp_path / "pybb-attest.db")
    keys = conn.execute(
        "SELECT ikey, count(*) FROM bb_records WHERE ikey IS NOT NULL GROUP BY ikey "
        "HAVING count(*) > 1"
    ).fetchall()
    conn.close()
    assert keys == []
    # Released at the end: the same command re-reads the board at once.
    run("attest", "--demo", "300", cwd=tmp_path, check=0)


def test_row5_a_killed_controller_is_taken_over_at_once_on_the_same_machine(
    tmp_path: Path, reference: dict[int, list[dict[str, object]]]
) -> None:
    first = Child(["attest", "--demo", "300", "--chunk", "25"], cwd=tmp_path)
    try:
        first.wait_for("attested 25 of 300")
        first.process.kill()
    finally:
        first.kill()
    run("attest", "--demo", "300", cwd=tmp_path, check=0)
    assert devices_of(tmp_path / "pybb-report.json") == reference[300]


def test_row11_the_report_step_after_a_killed_worker_names_the_lease(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    run("attest", "--demo", "2000", "--store", store, "--submit", cwd=tmp_path, check=0)
    worker = Child(
        [
            "worker", "--store", store, "--run", "attest-demo-2000-seed-0", "--app", "attest",
            "--lease", "60", "--batch", "8", "--progress", "0.2",
        ],
        cwd=tmp_path,
    )  # fmt: skip
    try:
        worker.wait_for(r"[1-9]\d* entries settled, [1-9]\d* claims held")  # mid-run
        worker.process.kill()
    finally:
        worker.kill()
    before = store_digest(tmp_path / "b.db")
    done = run("attest", "--demo", "2000", "--store", store, cwd=tmp_path)
    refused(done, "still attesting", "lease lapsing at", "UTC (in", "if a worker was killed")
    assert store_digest(tmp_path / "b.db") == before


# -- rows 6 to 10, 12: the command line and the store ------------------------------------------


def test_row6_and_10_unusable_stores_are_one_line_and_fast(tmp_path: Path) -> None:
    refused(run("inbox", "--store", "foo://bar", cwd=tmp_path), "unknown scheme 'foo'")
    for args in (
        ["inbox", "--store", UNREACHABLE],
        ["attest", "--demo", "5", "--store", UNREACHABLE],
        ["worker", "--store", UNREACHABLE, "--run", "r", "--app", "w1"],
    ):
        started = time.monotonic()
        done = run(*args, cwd=tmp_path)
        text = refused(done, "cannot connect to the PostgreSQL store 127.0.0.1:1")
        assert time.monotonic() - started < 15
        assert len(text.strip().splitlines()) == 1, text  # no pool warnings
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["attest", "--demo", "5", "--inbox", "--inbox-port", "99999"],
        ["inbox", "--store", "sqlite:///x.db", "--port", "99999"],
        ["inbox", "--store", "sqlite:///x.db", "--port", "-1"],
    ],
)
def test_row7_ports_out_of_range_are_refused(tmp_path: Path, args: list[str]) -> None:
    refused(run(*args, cwd=tmp_path), "is not a port; give 1..65535")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("ttl", ["1e308", "nan", "inf", "0", "-1"])
def test_row8_token_ttls_must_be_finite_and_positive(tmp_path: Path, ttl: str) -> None:
    done = run("inbox", "--store", "sqlite:///x.db", f"--token-ttl={ttl}", cwd=tmp_path)
    refused(done, "--token-ttl", "give a finite number above 0")
    assert list(tmp_path.iterdir()) == []


def test_row9_a_function_that_is_not_an_application(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    done = run("worker", "--store", store, "--run", "r", "--app", "os:getcwd", cwd=tmp_path)
    refused(done, "'os:getcwd' is not an application", "app(context) -> Controller")
    assert list(tmp_path.iterdir()) == []


def test_row12_a_worker_never_creates_or_fakes_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    done = run(
        "worker", "--store", f"sqlite:///{missing}", "--run", "r", "--app", "w1", cwd=tmp_path
    )
    refused(done, "there is no file", "workers do not create runs")
    assert not missing.exists()
    memory = run(
        "worker", "--store", "sqlite:///:memory:", "--run", "r", "--app", "w1", cwd=tmp_path
    )
    refused(memory, "in-memory database", "share nothing")
    store = tmp_path / "b.db"
    run("attest", "--demo", "5", "--store", f"sqlite:///{store}", "--submit", cwd=tmp_path, check=0)
    before = store_digest(store)
    absent = run(
        "worker", "--store", f"sqlite:///{store}", "--run", "nope", "--app", "w1", cwd=tmp_path
    )
    refused(absent, "there is no run 'nope'")
    read_only = run(
        "worker", "--store", f"sqlite:///{store}?mode=ro", "--run", "attest-demo-5-seed-0",
        "--app", "attest", cwd=tmp_path,
    )  # fmt: skip
    refused(read_only, "mode is not a store option", "read-only store (mode=ro) cannot be used")
    attest_ro = run("attest", "--demo", "5", "--store", f"sqlite:///{store}?mode=ro", cwd=tmp_path)
    refused(attest_ro, "mode=ro")
    assert store_digest(store) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["attest", "--demo", "5", "--board-id", ""], "is not a board id"),
        (["worker", "--store", "sqlite:///b.db", "--run", "", "--app", "w1"], "is not a board id"),
        (["attest", "--demo", "5", "--examples", "-1"], "is negative"),
        (["attest", "--demo", "0"], "is not positive"),
        (["attest", "--demo", "5", "--chunk", "0"], "is not positive"),
        (
            ["worker", "--store", "sqlite:///b.db", "--run", "r", "--app", "w1", "--lease", "nan"],
            "finite",
        ),
    ],
)
def test_row12_bad_values_are_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    refused(run(*args, cwd=tmp_path), fragment)
    assert list(tmp_path.iterdir()) == []


def test_row12_a_foreign_table_named_bb_records_is_named_and_left_alone(tmp_path: Path) -> None:
    file = tmp_path / "theirs.db"
    conn = sqlite3.connect(file)
    conn.execute("CREATE TABLE bb_records (x INTEGER)")
    conn.execute("INSERT INTO bb_records VALUES (1)")
    conn.commit()
    conn.close()
    before = file.read_bytes()
    for args in (
        ["attest", "--demo", "5", "--store", f"sqlite:///{file}"],
        ["worker", "--store", f"sqlite:///{file}", "--run", "r", "--app", "w1"],
    ):
        refused(run(*args, cwd=tmp_path), "has a table bb_records", str(file))
        assert file.read_bytes() == before


def test_an_unexpected_error_is_one_line_and_minus_v_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def app(context):\n    raise RuntimeError('boom')\n")
    store = tmp_path / "b.db"
    run("attest", "--demo", "5", "--store", f"sqlite:///{store}", "--submit", cwd=tmp_path, check=0)
    args = ["worker", "--store", f"sqlite:///{store}", "--run", "attest-demo-5-seed-0"]
    done = subprocess.run(
        pybb_command(*args, "--app", "boom:app"),
        cwd=tmp_path,
        env=environment(PYTHONPATH=f"{environment()['PYTHONPATH']}{os.pathsep}{tmp_path}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    refused(done, "internal error (RuntimeError: boom)", "pybb -v", status=3)
    verbose = subprocess.run(
        pybb_command("-v", *args, "--app", "boom:app"),
        cwd=tmp_path,
        env=environment(PYTHONPATH=f"{environment()['PYTHONPATH']}{os.pathsep}{tmp_path}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verbose.returncode == 3 and "Traceback" in verbose.stderr


# -- item 5: logs ------------------------------------------------------------------------------


def test_log_json_is_one_object_per_line_and_q_keeps_only_warnings(tmp_path: Path) -> None:
    done = run("--log-json", "attest", "--demo", "60", "--chunk", "25", cwd=tmp_path, check=0)
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert any(r["message"] == "attested 25 of 60 devices" for r in records), done.stderr
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    quiet = run("-q", "attest", "--demo", "60", "--chunk", "25", cwd=tmp_path, check=0)
    assert "attested" not in quiet.stderr


def test_a_worker_reports_its_progress_at_a_steady_rate(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    run("attest", "--demo", "200", "--store", store, "--submit", cwd=tmp_path, check=0)
    done = run(
        "worker", "--store", store, "--run", "attest-demo-200-seed-0", "--app", "attest",
        "--batch", "8", "--progress", "0.2", cwd=tmp_path, check=0,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if "entries settled" in line]
    assert lines, done.stderr[-2000:]
    assert "claims held" in lines[0] and "lease renewals" in lines[0]
    assert "settled" in done.stdout


def test_the_library_configures_no_logging() -> None:
    code = (
        "import logging, pybb, pybb.attestation, pybb.cli\n"
        "from pybb.attestation import Attestation, generate_fleet\n"
        "with Attestation(generate_fleet(10)) as a: a.run()\n"
        "root = logging.getLogger()\n"
        "assert root.handlers == [] and root.level == logging.WARNING, root.handlers\n"
        "assert all(not logging.getLogger(n).handlers for n in ('pybb', 'blackboard', 'buddhi'))\n"
    )
    subprocess.run([pybb_command()[0], "-c", code], env=environment(), check=True, timeout=120)


def test_row2_ctrl_c_stops_a_worker_with_130_and_another_finishes_the_run(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    run("attest", "--demo", "1000", "--store", store, "--submit", cwd=tmp_path, check=0)
    board = ["--store", store, "--run", "attest-demo-1000-seed-0", "--app", "attest"]
    worker = Child(["worker", *board, "--batch", "8", "--progress", "0.2"], cwd=tmp_path)
    try:
        worker.wait_for(r"[1-9]\d* entries settled, [1-9]\d* claims held")
        worker.process.send_signal(signal.SIGINT)
        status, text = worker.finish()
    finally:
        worker.kill()
    assert status == 130, text[-2000:]
    assert "interrupted; the same command resumes" in text and "Traceback" not in text
    # Its claims were released: the same command at once finishes the run, no lease wait.
    started = time.monotonic()
    done = run("worker", *board, cwd=tmp_path, check=0)
    assert "settled" in done.stdout
    assert time.monotonic() - started < 25  # less than the 30 s lease


@pytest.mark.parametrize(("fail_on", "status"), [("asked", 1), ("never", 0)])
def test_fail_on_asked_counts_the_asks_of_attest_inbox(
    tmp_path: Path, fail_on: str, status: int
) -> None:
    args = ["attest", "--demo", "40", "--inbox", "--inbox-port", "0", "--fail-on", fail_on]
    child = Child(args, cwd=tmp_path)
    try:
        line = child.wait_for(r"\d+ ask\(s\) open")
        assert not line.startswith("0 "), line  # the demo's escalations were asked about
        child.process.send_signal(signal.SIGINT)
        code, text = child.finish()
    finally:
        child.kill()
    assert code == status, text[-2000:]
    assert "Traceback" not in text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "json_lines", "kind"),
    [(_Terminal, False, "RichHandler"), (io.StringIO, False, "StreamHandler"),
     (_Terminal, True, "StreamHandler")],
)  # fmt: skip
def test_the_command_logs_with_rich_on_a_terminal_plain_lines_otherwise(
    stream: type[io.StringIO], json_lines: bool, kind: str
) -> None:
    from pybb.cli._logging import configure_logging

    root = logging.getLogger()
    level = root.level
    out = stream()
    handler = configure_logging(0, json_lines=json_lines, stream=out)
    try:
        assert type(handler).__name__ == kind
        logging.getLogger("pybb.worker").info("worker w: %d entries settled", 3)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # rich's colours
    assert "worker w: 3 entries settled" in text
    if json_lines:
        assert json.loads(text.splitlines()[0])["logger"] == "pybb.worker"
    elif kind == "StreamHandler":
        assert " INFO pybb.worker: worker w" in text

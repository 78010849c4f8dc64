"""``pybb attest --html/--csv/--jsonl`` and the JSON report's human-loop keys, end to end.

The commands run in subprocesses as an operator runs them; the pages' behaviour in a
browser is tested in ``test_report_browser.py``.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import httpx
from report_support import HOSTILE, HOSTILE_NOTE, hostile_report

from blackboard import attach
from pybb.cli._attest_report import CSV_COLUMNS, render_html, write_csv
from pybb.human import answer_rule
from pybb.supervision import applied_answers

HUMAN_KEYS = ("budget_decision", "human")


def attest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybb", "attest", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_without_inbox_the_json_says_no_human_loop_ran_and_every_file_is_written(
    tmp_path: Path,
) -> None:
    done = attest(
        "--demo", "60", "--html", "r.html", "--csv", "r.csv", "--jsonl", "r.jsonl",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "pybb-report.json").read_text())
    assert report["human_loop"] is False and report["budget"] is None
    for device in report["devices"]:
        assert {"device", "outcome", "reason"} <= set(device)
        assert all(key in device and device[key] is None for key in HUMAN_KEYS)
    rows = list(csv.DictReader(_lines(tmp_path / "r.csv")))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 60
    by_device = {d["device"]: d for d in report["devices"]}
    for row in rows:
        device = by_device[row["device"]]
        assert (row["outcome"], row["reason"]) == (device["outcome"], device["reason"] or "")
        assert row["budget_decision"] == "" and row["correct"] == "true"
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == report["devices"]
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="no-human-loop"' in page
    assert oct((tmp_path / "r.html").stat().st_mode & 0o777) == oct(
        (tmp_path / "pybb-report.json").stat().st_mode & 0o777
    )


def test_an_unwritable_html_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = attest(
        "--demo", "20", "--html", str(tmp_path / "missing" / "r.html"), "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "r.html" in done.stderr


def test_the_page_is_self_contained_and_escapes_everything_supplied() -> None:
    page = render_html(hostile_report())
    elements = _Elements()
    elements.feed(page)
    # Nothing outside the file is referenced: no src, no external link, no url().
    assert not [a for a in elements.attributes if a[1] == "src"]
    assert all(value.startswith("#") for _, name, value in elements.attributes if name == "href")
    assert "url(" not in page and "@import" not in page
    # Hostile text appears only as text: one script (the page's own), no handler, no image.
    assert elements.tags["script"] == 1 and not elements.tags["img"] and not elements.tags["iframe"]
    assert not [a for a in elements.attributes if a[1].startswith("on")], elements.attributes
    assert HOSTILE not in page and HOSTILE_NOTE not in page
    assert html.escape(HOSTILE, quote=True) in page
    assert "window.__pwned" in "".join(elements.text)  # it is there, as text
    csp = html.unescape(re.search(r'Content-Security-Policy" content="([^"]*)"', page)[1])  # type: ignore[index]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp


class _Elements(HTMLParser):
    """Every tag and attribute of a page, as a browser's tokenizer reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.attributes: list[tuple[str, str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attributes += [(tag, name.lower(), value or "") for name, value in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_csv_cells_a_spreadsheet_would_run_are_quoted(tmp_path: Path) -> None:
    write_csv(hostile_report(), tmp_path / "r.csv")
    rows = list(csv.reader(_lines(tmp_path / "r.csv")))
    assert rows[-1][0] == "'=cmd|' /C calc'!A0"
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)


# -- with --inbox: the person's answer reaches the JSON, the CSV and the page ------------------


def test_with_inbox_the_reports_say_who_decided_what_and_what_the_budget_decided(
    tmp_path: Path,
) -> None:
    command = [
        sys.executable, "-m", "pybb", "attest", "--demo", "60", "--inbox", "--inbox-port", "0",
        "--no-progress", "--html", "r.html", "--csv", "r.csv", "--report", "r.json",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        token, url = _wait_ready(process)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            asks = client.get("/api/asks", params={"status": "open"}).json()["asks"]
            ask = asks[0]["ask"]
            body = {"option": "quarantine", "note": "seen <b>it</b>"}
            response = client.post(f"/api/asks/{ask['ask_id']}/answer", json=body)
            assert response.status_code == 201, response.text
        model = attach(
            f"sqlite:///{tmp_path / 'pybb-attest.db'}", "attest-demo-60-seed-0",
            admission_rule=answer_rule,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 20
            while not applied_answers(model.reader) and time.monotonic() < deadline:
                time.sleep(0.1)  # the command applies the answer within a poll
        finally:
            model.close()
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["human_loop"] is True
    budget = report["budget"]
    assert budget["limit"] == 20 and budget["asked"] == len(asks)
    by_device = {d["device"]: d for d in report["devices"]}
    answered = by_device[ask["entry"]]
    decision = answered["human"]["decision"]
    assert answered["budget_decision"] == "asked"
    assert (decision["by"], decision["decision"], decision["note"], decision["via"]) == (
        "human:operator",
        "quarantine",
        "seen <b>it</b>",
        "answer",
    )
    escalated = [d for d in report["devices"] if d["human"] is not None]
    assert escalated and all(d["budget_decision"] in ("asked", "denied") for d in escalated)
    assert budget["denied"] == sum(d["budget_decision"] == "denied" for d in escalated)
    for device in report["devices"]:
        if device["outcome"] in ("passed", "repaired"):
            assert device["human"] is None and device["budget_decision"] is None
    rows = {r["device"]: r for r in csv.DictReader(_lines(tmp_path / "r.csv"))}
    assert (rows[ask["entry"]]["decided_by"], rows[ask["entry"]]["note"]) == (
        "human:operator",
        "seen <b>it</b>",
    )
    page = (tmp_path / "r.html").read_text()
    assert "human:operator" in page and "seen &lt;b&gt;it&lt;/b&gt;" in page


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _wait_ready(process: subprocess.Popen[str]) -> tuple[str, str]:
    assert process.stdout is not None
    seen: list[str] = []
    token = url = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        token = token or _match(r"token for human:operator: (pybb_\S+)", line)
        url = url or _match(r"pybb inbox for run '[^']+': (http://\S+)", line)
        if "Ctrl-C to stop" in line:
            break
    assert token and url, "".join(seen)
    return token, url.rstrip("/")


def _match(pattern: str, line: str) -> str | None:
    found = re.search(pattern, line)
    return found.group(1) if found else None

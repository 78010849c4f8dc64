"""A writer process SIGKILLed mid-stream, again and again, on one SQLite board.

The writer (``bb_worker.py stream``) makes level writes, unique-level writes, premise
compare-and-sets and batches, each under an idempotency key. Before each write it logs
its intent and after each ``Written`` its acknowledgement to a side file, one
unbuffered ``write(2)`` per line, so the side file holds exactly what it was told.
After every kill, read independently of the kernel: ``integrity_check`` ok, sequence
gap-free with the head counter equal to it, every derived row consistent with its
records, every acknowledged write there exactly once at the sequence it was told,
batches all-or-nothing, and nothing on the board but the writer's intents (at most the
last one unacknowledged). Each restarted writer first replays its in-doubt intent with
the same key, which must resolve it without writing it twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from bb_reliability import (
    HERE,
    WORKER,
    in_doubt,
    open_model,
    raw_connect,
    read_side_file,
    sqlite_board_violations,
)

from storekit import sized

KILLS = sized(15, 200)
BOARD = "kill"


def _expected(intent: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """The records an intent writes: idempotency key -> (region, content)."""
    i, kind, key = intent["i"], intent["intent"], f"k{intent['i']}"
    if kind == "premise":
        return {key: ("counter", i)}
    if kind == "unique":
        return {key: ("ids", {"id": i})}
    if kind == "batch":
        return {f"{key}.{j}": ("events", {"i": i, "j": j}) for j in range(intent["size"])}
    return {key: ("events", {"i": i, "pad": "x" * intent["pad"]})}


def ack_violations(path: Path, side_file: Path) -> list[str]:
    """What the writer was told against what the board holds."""
    intents, acks = read_side_file(side_file)
    with closing(raw_connect(path)) as conn:
        stored = {
            ikey: (seq, region, json.loads(payload), version)
            for seq, region, payload, version, ikey in conn.execute(
                "SELECT seq, region, payload, version, ikey FROM bb_records"
                " WHERE board_id = ? AND ikey IS NOT NULL",
                (BOARD,),
            )
        }
        keys = Counter(
            k
            for (k,) in conn.execute(
                "SELECT ikey FROM bb_records WHERE board_id = ? AND ikey IS NOT NULL", (BOARD,)
            )
        )
    problems = [f"key {k} applied {n} times" for k, n in keys.items() if n > 1]
    known: set[str] = set()
    for i, intent in intents.items():
        expected = _expected(intent)
        known |= set(expected)
        landed = [k for k in expected if k in stored]
        if landed and len(landed) != len(expected):
            problems.append(f"intent {i} half-written: {len(landed)}/{len(expected)} records")
        for key, (region, content) in expected.items():
            if key in stored and stored[key][1:3] != (region, content):
                problems.append(f"key {key} holds {stored[key][1:3]}, not {(region, content)}")
        if i in acks:
            problems += _acknowledged(i, intent, acks[i], expected, stored)
    problems += [f"record under unknown key {k}" for k in set(stored) - known]
    unanswered = sorted(set(intents) - set(acks))
    if unanswered[:-1]:
        problems.append(f"more than the last intent unacknowledged: {unanswered}")
    return problems


def _acknowledged(
    i: int,
    intent: dict[str, Any],
    ack: dict[str, Any],
    expected: dict[str, tuple[str, Any]],
    stored: dict[str, tuple[int, str, Any, int | None]],
) -> list[str]:
    seqs = [stored[k][0] if k in stored else None for k in expected]
    if seqs != ack["seqs"]:
        return [f"acknowledged intent {i} told {ack['seqs']} but the board holds {seqs}"]
    if intent["intent"] == "premise" and stored[f"k{i}"][3] != ack["version"]:
        return [f"premise write {i} told version {ack['version']}, stored {stored[f'k{i}'][3]}"]
    return []


def _start_writer(url: str, side: Path, seed: int, limit: int, err: Any) -> subprocess.Popen[str]:
    intents, _ = read_side_file(side)
    start = max(intents, default=-1) + 1
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            "stream",
            url,
            BOARD,
            str(side),
            str(start),
            str(seed),
            str(limit),
        ],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n", "the writer did not start"
    return proc


def test_sigkill_loses_no_acknowledged_write_and_leaves_nothing_half_written(
    tmp_path: Path,
) -> None:
    path, side = tmp_path / "board.db", tmp_path / "side.jsonl"
    url = f"sqlite:///{path}"
    open_model("mixed", url, BOARD).close()
    rng = random.Random(9)
    failures: dict[int, list[str]] = {}
    replayed = 0
    with (tmp_path / "writer.err").open("w") as err:
        for kill in range(KILLS):
            replayed += in_doubt(*read_side_file(side)) is not None
            proc = _start_writer(url, side, seed=kill, limit=10**9, err=err)
            time.sleep(rng.uniform(0.0, 0.3))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
            assert proc.returncode == -signal.SIGKILL, (tmp_path / "writer.err").read_text()
            problems = sqlite_board_violations(path, BOARD) + ack_violations(path, side)
            if problems:
                failures[kill] = problems[:5]
        # A last writer resumes, resolves the in-doubt write, and finishes cleanly.
        proc = _start_writer(url, side, seed=KILLS, limit=20, err=err)
        assert proc.wait(timeout=60) == 0, (tmp_path / "writer.err").read_text()
        assert proc.stdout is not None
        proc.stdout.close()
    assert failures == {}
    assert sqlite_board_violations(path, BOARD) == []
    assert ack_violations(path, side) == []
    intents, acks = read_side_file(side)
    assert set(intents) == set(acks), "the resumed writer left an intent unresolved"
    with open_model("mixed", url, BOARD) as model:  # the kernel reopens it where it stood
        premise = model.reader.read_premise("counter")
        log = model.reader.log()
        assert model.reader.head() == len(log) == log[-1].sequence
        assert premise.version == sum(1 for r in log if r.region == "counter")
    print(f"kill -9: {KILLS} kills, {len(acks)} acknowledged intents, {replayed} replays")


def test_negative_control_the_checks_catch_lost_half_written_and_doubled_writes(
    tmp_path: Path,
) -> None:
    """Doctor a healthy board three ways; the same checks must notice each."""
    path, side = tmp_path / "board.db", tmp_path / "side.jsonl"
    url = f"sqlite:///{path}"
    open_model("mixed", url, BOARD).close()
    with (tmp_path / "writer.err").open("w") as err:
        proc = _start_writer(url, side, seed=1, limit=40, err=err)
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None
        proc.stdout.close()
    assert ack_violations(path, side) == []
    assert sqlite_board_violations(path, BOARD) == []
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:  # lose the last write
        (head,) = conn.execute("SELECT head FROM bb_boards WHERE board_id = ?", (BOARD,)).fetchone()
        conn.execute("DELETE FROM bb_records WHERE board_id = ? AND seq = ?", (BOARD, head))
        conn.execute("DELETE FROM bb_uniques WHERE board_id = ? AND seq = ?", (BOARD, head))
    assert any("holds" in p or "told" in p for p in ack_violations(path, side))
    assert any("head" in p for p in sqlite_board_violations(path, BOARD))
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:  # half a batch
        conn.execute(
            "DELETE FROM bb_records WHERE board_id = ? AND seq ="
            " (SELECT MIN(seq) FROM bb_records WHERE board_id = ? AND ikey LIKE 'k%.1')",
            (BOARD, BOARD),
        )
    assert any("half-written" in p for p in ack_violations(path, side))
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:  # apply one twice
        conn.execute("DROP INDEX bb_records_ikey")  # the kernel's own guard, removed
        conn.execute(
            "INSERT INTO bb_records (board_id, seq, kind, region, writer, payload, version, at,"
            " ikey, fingerprint) SELECT board_id, ?, kind, region, writer, payload, version, at,"
            " ikey, fingerprint FROM bb_records WHERE board_id = ? AND ikey = 'k0'",
            (head, BOARD),
        )
    assert any("applied 2 times" in p for p in ack_violations(path, side))

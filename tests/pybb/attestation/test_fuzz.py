"""RA-11: fuzz the event-log decoder; only EventLogError may escape, each input < 1 s."""

from __future__ import annotations

import hashlib
import importlib.util
import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybb.attestation as att
from pybb.attestation import _describe

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
TARGET = HERE / "fuzz_eventlog_target.py"
PER_INPUT_SECONDS = 1.0
MUTATOR_SEED = 20240611
MUTATOR_ITERATIONS = 6000
MUTATOR_BUDGET_SECONDS = 8.0
ATHERIS_SECONDS = 8


def exercise(data: bytes) -> None:
    """Everything a tier does with a log; only EventLogError may come out."""
    try:
        log = att.parse_event_log(data)
    except att.EventLogError:
        return
    for step in att.iter_replay(log):
        assert isinstance(step.event.description, str)
        assert isinstance(step.event.label, str)
    assert log.secure_boot in (True, False, None)
    assert len(log.boot_components()) <= len(log.events)
    att.replay(log)


def check(data: bytes, origin: str) -> None:
    """Run one input; a crash or a slow input is saved to the corpus and fails."""
    started = time.perf_counter()
    try:
        exercise(data)
    except Exception as exc:
        saved = _save_crasher(data)
        raise AssertionError(f"{origin}: {type(exc).__name__} escaped; saved as {saved}") from exc
    elapsed = time.perf_counter() - started
    if elapsed > PER_INPUT_SECONDS:
        saved = _save_crasher(data)
        raise AssertionError(f"{origin}: input took {elapsed:.2f} s; saved as {saved}")


def _save_crasher(data: bytes) -> Path:
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"crash-{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def real_logs(eventlogs: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(eventlogs.glob("*.bin"))]


# --- the harness itself can fail --------------------------------------------------------------


def test_check_reports_and_saves_an_escaping_exception(
    real_logs: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(data: bytes) -> object:
        raise IndexError("a decoder bug")

    monkeypatch.setitem(globals(), "CORPUS", tmp_path)
    monkeypatch.setitem(_describe._DECODERS, int(att.EventType.EV_SEPARATOR), broken)
    with pytest.raises(AssertionError, match="control: IndexError escaped; saved as"):
        check(real_logs[0], "control")
    assert [p.read_bytes() for p in tmp_path.iterdir()] == [real_logs[0]]


def test_check_reports_a_slow_input(
    real_logs: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(globals(), "CORPUS", tmp_path)
    monkeypatch.setitem(globals(), "PER_INPUT_SECONDS", 0.0)
    with pytest.raises(AssertionError, match="control: input took"):
        check(real_logs[0], "control")


# --- the regression corpus -----------------------------------------------------------------


def _corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_file()) if CORPUS.is_dir() else []


def test_the_corpus_is_small_and_present() -> None:
    files = _corpus()
    assert len(files) >= 10
    assert all(p.stat().st_size <= 4096 for p in files)


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_corpus_inputs_fail_cleanly(path: Path) -> None:
    check(path.read_bytes(), path.name)


# --- hypothesis: random flips and truncations of the real logs ---------------------------------


@settings(max_examples=1000, deadline=None, database=None)
@given(
    choice=st.integers(min_value=0, max_value=1000),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=1 << 20), st.integers(0, 255)), max_size=6
    ),
    cut=st.none() | st.integers(min_value=0, max_value=1 << 20),
)
def test_flipped_and_truncated_real_logs_only_raise_event_log_error(
    real_logs: list[bytes], choice: int, flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(real_logs[choice % len(real_logs)])
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    check(bytes(data), "hypothesis")


# --- a seeded, structure-aware mutator (runs with or without atheris) --------------------------

_INTERESTING_U32 = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


class _Seed:
    """A log to mutate, with where its header fields and its event data lie."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.fields: list[int] = []
        self.payloads: list[tuple[int, int]] = []
        try:
            events = att.parse_event_log(data).events
        except att.EventLogError:
            return
        ends = [e.offset for e in events[1:]] + [len(data)]
        for event, end in zip(events, ends, strict=True):
            start = end - len(event.data)
            self.fields += [event.offset, event.offset + 4, event.offset + 8, start - 4]
            if event.data:
                self.payloads.append((start, end))


def _mutate(rng: random.Random, seed: _Seed, others: list[bytes]) -> bytes:
    buf = bytearray(seed.data)
    if seed.payloads and rng.random() < 0.5:
        # Keep the framing intact and damage one event's payload: this is what
        # reaches the EFI decoders behind the descriptions.
        start, end = rng.choice(seed.payloads)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(start, end)
            if rng.random() < 0.5:
                buf[at] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.getrandbits(8)))
            else:
                value = rng.choice((*_INTERESTING_U32, rng.getrandbits(32)))
                buf[at : min(at + 4, end)] = struct.pack("<I", value)[: end - at]
        return bytes(buf)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            buf = bytearray(rng.randbytes(rng.randint(1, 64)))
        pos = rng.randrange(len(buf))
        op = rng.randrange(8)
        if op == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
        elif op in (2, 3):
            at = rng.choice(seed.fields) if op == 3 and seed.fields else pos
            value = rng.choice((*_INTERESTING_U32, len(buf), rng.getrandbits(32)))
            buf[at : at + 4] = struct.pack("<I", value)
        elif op == 4:
            del buf[rng.randrange(len(buf)) :]
        elif op == 5:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 6:
            del buf[pos : pos + rng.randint(1, 64)]
        else:
            other = rng.choice(others)
            start = rng.randrange(len(other))
            buf[pos:] = other[start : start + rng.randint(1, 4096)]
    return bytes(buf)


def test_seeded_mutations_only_raise_event_log_error(real_logs: list[bytes]) -> None:
    rng = random.Random(MUTATOR_SEED)
    seeds = [_Seed(data) for data in real_logs + [p.read_bytes() for p in _corpus()]]
    started = time.perf_counter()
    parsed = done = 0
    for done in range(1, MUTATOR_ITERATIONS + 1):
        data = _mutate(rng, rng.choice(seeds), real_logs)
        check(data, f"mutation {done} (seed {MUTATOR_SEED})")
        parsed += _parses(data)
        if time.perf_counter() - started > MUTATOR_BUDGET_SECONDS:
            break
    assert done >= 500, f"only {done} mutations ran in {MUTATOR_BUDGET_SECONDS} s"
    # The mutator must not only produce garbage the parser rejects at once.
    assert parsed >= done // 5, f"only {parsed} of {done} mutated logs parsed"


def _parses(data: bytes) -> bool:
    try:
        att.parse_event_log(data)
    except att.EventLogError:
        return False
    return True


# --- atheris, when it is installed ---------------------------------------------------------------


def test_atheris_finds_no_crash(real_logs: list[bytes], tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        pytest.skip(
            "atheris is not installed (pip install atheris); the seeded mutator ran instead"
        )
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for number, data in enumerate(real_logs):
        (seeds / f"log-{number}.bin").write_bytes(data)
    for path in _corpus():
        shutil.copy(path, seeds / path.name)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    command = [
        sys.executable, str(TARGET), f"-max_total_time={ATHERIS_SECONDS}", "-timeout=1",
        "-rss_limit_mb=2048", "-seed=1", f"-artifact_prefix={artifacts}/", str(seeds),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    crashers = sorted(artifacts.iterdir())
    saved = [_save_crasher(p.read_bytes()) for p in crashers]
    assert done.returncode == 0 and not crashers, (
        f"atheris exited {done.returncode}; crashers saved as {saved}\n{done.stderr[-3000:]}"
    )
    assert "Done" in done.stderr, done.stderr[-2000:]

"""RA-10 ``malformed_inputs_1000`` for evidence files: hostile files get a typed error.

1,000 generated hostile evidence files (100,000 under ``PYBB_NIGHTLY=1``): wrong types,
missing and unknown fields (SQL metacharacters, NUL, Unicode confusables), bad hex,
PCR indices out of range, huge values, nesting 10,000 deep, ``NaN``/``Infinity``,
duplicate keys, path traversal in log paths (``..``, absolute, links leading out, a
FIFO), non-UTF-8 bytes, files over the size cap. Pass criterion: every one refused with
:class:`EvidenceError` naming the file and the field at fault (no other exception, no
unclipped echo of the input, p99 rejection ≤ 50 ms); in a run, each such device is
escalated with a ``bad_evidence`` report naming file and field, and every good device
lands exactly as it does without them. Negative controls: a loader that follows log
paths out of the folder, and one that lets duplicate keys through, must be caught.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from attest_support import FEDORA, golden

from pybb.attestation import (
    Attestation,
    DeviceOutcome,
    EvidenceError,
    Reason,
    _evidence,
    _jsonfile,
    generate_fleet,
    load_fleet,
    replay,
    save_fleet,
)
from storekit import sized

CASES = sized(1000, 100_000)
GOOD = 30


@dataclass
class Case:
    stem: str
    content: bytes
    field: str | None  # the field the error must name; None: the file as a whole
    family: str


def base(stem: str) -> dict[str, Any]:
    quote = {
        bank: {str(p): v.hex() for p, v in values.items()}
        for bank, values in replay(golden(FEDORA)).items()
    }
    return {"device": stem, "class": FEDORA, "log": "logs/good.bin", "quote": quote}


def dumps(data: object) -> bytes:
    return json.dumps(data).encode()


def _with(stem: str, key: str, value: object) -> dict[str, Any]:
    data = base(stem)
    data[key] = value
    return data


def _without(stem: str, key: str) -> dict[str, Any]:
    data = base(stem)
    del data[key]
    return data


WRONG: list[object] = [5, None, [], {}, True, -1]
METACHARACTERS = [
    "x'); DROP TABLE levels;--",
    '"',
    ";",
    "\x00",
    "dеvice",
    "Device",
    "quote ",
    "a" * 5000,
]
BAD_HEX = [
    "zz" * 32,
    "0" * 63,
    "00" * 31,
    "00" * 33,
    "",
    "0x" + "00" * 31,
    "00 " * 32,
    "٣" * 64,
    "０" * 64,
]
BAD_PCRS = ["99999999999999999999999", "-1", "007", "1e3", " 7", "32", "", "७", "0x1"]
BAD_LOGS = [
    "../../etc/passwd",
    "/etc/passwd",
    "logs/../../outside.bin",
    "C:\\Windows\\win.ini",
    "logs\\..\\good.bin",
    "logs/\x00good.bin",
    "",
    "a/" * 600,
    "logs/missing.bin",
    "logs",
    "logs/evil.bin",
    "logs/fifo",
]
BAD_IDS = ["dev 1", "dev/1", "", "-dev", "d" * 65, "dеv", "\ud800", "../x"]
NOT_UTF8 = [
    "\ufeff{}".encode("utf-16"),
    b'{"device": "\xe9"}',
    b'{"device": "\xed\xa0\x80"}',
    b'{"device": "\xc0\xaf"}',
    bytes(range(256)),
]
NOT_OBJECT = [b"[]", b'"x"', b"5", b"null", b"", b"   ", b"{", b"\x00"]


def families(stem: str, rng: random.Random) -> list[Callable[[], Case]]:
    def case(content: bytes, field: str | None, family: str) -> Case:
        return Case(stem, content, field, family)

    def missing() -> Case:
        key = rng.choice(["device", "class", "quote"])
        return case(dumps(_without(stem, key)), key, "missing field")

    def log_choice() -> Case:
        data = base(stem) if rng.random() < 0.5 else _without(stem, "log")
        if "log" in data:
            data["log_base64"] = "AAAA"
        return case(dumps(data), "log", "log and log_base64")

    def unknown() -> Case:
        key = rng.choice(METACHARACTERS)
        return case(dumps(_with(stem, key, rng.choice(WRONG))), key, "unknown field")

    def wrong_type() -> Case:
        wrong_quotes: list[object] = ["x", [], 7, None, True]
        wrong_logs: list[object] = [42, None, [], {}]
        key, value = rng.choice(
            [("device", v) for v in WRONG]
            + [("class", v) for v in WRONG]
            + [("quote", v) for v in wrong_quotes]
            + [("log", v) for v in wrong_logs]
        )
        return case(dumps(_with(stem, key, value)), key, "wrong type")

    def wrong_nested_type() -> Case:
        data = base(stem)
        if rng.random() < 0.5:
            data["quote"]["sha256"] = rng.choice(["x", [], 7, None])
            return case(dumps(data), "quote.sha256", "wrong type")
        data["quote"]["sha256"]["0"] = rng.choice([12, None, [], {}, True])
        return case(dumps(data), "quote.sha256.0", "wrong type")

    def bad_hex() -> Case:
        data = base(stem)
        pcr = rng.choice(sorted(data["quote"]["sha256"]))
        data["quote"]["sha256"][pcr] = rng.choice(BAD_HEX)
        return case(dumps(data), f"quote.sha256.{pcr}", "bad hex")

    def bad_pcr() -> Case:
        data = base(stem)
        key = rng.choice(BAD_PCRS)
        data["quote"]["sha256"][key] = "00" * 32
        return case(dumps(data), f"quote.sha256.{key}", "bad PCR index")

    def bad_bank() -> Case:
        data = base(stem)
        bank = rng.choice(["sha999", "SHA256", "", "sha256 ", "md5"])
        data["quote"][bank] = {}
        return case(dumps(data), f"quote.{bank}", "unknown bank")

    def huge() -> Case:
        kind = rng.randrange(5)
        if kind == 0:
            return case(dumps(_with(stem, "device", "d" * 100_000)), "device", "huge value")
        if kind == 1:
            data = base(stem)
            data["quote"]["sha256"] = {str(i): "00" * 32 for i in range(1000)}
            return case(dumps(data), "quote.sha256", "huge value")
        if kind == 2:
            text = dumps(base(stem)).replace(b'"class"', b'"n": ' + b"9" * 5000 + b', "class"')
            return case(text, None, "huge value")
        if kind == 3:
            return case(dumps(_with(stem, "pad", " " * (1024 * 1024))), None, "file over the cap")
        deep = b"[" * 10_000 + b"]" * 10_000
        return case(
            dumps(base(stem)).replace(b'"quote": ', b'"quote": ' + deep + b', "q": '),
            None,
            "deep nesting",
        )

    def constant() -> Case:
        literal = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"7.0", b"1e400"])
        text = dumps(base(stem)).replace(b'"class": "', b'"x": ' + literal + b', "class": "')
        return case(text, None, "NaN or float")

    def duplicate() -> Case:
        # the same key twice, with another value or the same one (parsers differ on which wins)
        repeat = rng.choice([b'"device": "other", ', b'"class": "%s", ' % FEDORA.encode()])
        text = dumps(base(stem)).replace(b'"class":', repeat + b'"class":', 1)
        return case(text, None, "duplicate key")

    def traversal() -> Case:
        return case(dumps(_with(stem, "log", rng.choice(BAD_LOGS))), "log", "path traversal")

    def not_utf8() -> Case:
        return case(rng.choice(NOT_UTF8), None, "not UTF-8")

    def not_object() -> Case:
        return case(rng.choice(NOT_OBJECT), None, "not an object")

    def mismatch() -> Case:
        return case(dumps(_with(stem, "device", "someone-else")), "device", "device mismatch")

    def unknown_class() -> Case:
        return case(dumps(_with(stem, "class", "no-such-class")), "class", "unknown class")

    def bad_id() -> Case:
        return case(dumps(_with(stem, "device", rng.choice(BAD_IDS))), "device", "bad device id")

    def bad_base64() -> Case:
        data = _without(stem, "log")
        data["log_base64"] = rng.choice(
            ["!!!", "abc", "a===", base64.b64encode(b"x").decode() + "*"]
        )
        return case(dumps(data), "log_base64", "bad base64")

    return [
        missing,
        log_choice,
        unknown,
        wrong_type,
        wrong_nested_type,
        bad_hex,
        bad_pcr,
        bad_bank,
        huge,
        constant,
        duplicate,
        traversal,
        not_utf8,
        not_object,
        mismatch,
        unknown_class,
        bad_id,
        bad_base64,
    ]


def hostile_folder(root: Path, count: int, seed: int = 10) -> list[Case]:
    save_fleet(generate_fleet(GOOD, seed=seed, mix={"clean": 0.6, "sanctioned_update": 0.4}), root)
    # The hand-written hostile files carry no signed quotes: without the saved ledger the
    # folder is an unsigned one, whose evidence files alone are under test here.
    (root / "registry.json").unlink()
    (root / "logs" / "good.bin").write_bytes(golden(FEDORA))
    (root.parent / "outside.bin").write_bytes(golden(FEDORA))
    os.symlink("/etc/passwd", root / "logs" / "evil.bin")
    os.mkfifo(root / "logs" / "fifo")
    rng = random.Random(seed)
    cases = []
    for number in range(count):
        stem = f"h-{number:06d}"
        options = families(stem, rng)
        cases.append(options[number % len(options)]())
        (root / "devices" / f"{stem}.json").write_bytes(cases[-1].content)
    return cases


def rejections(root: Path, cases: list[Case]) -> tuple[list[str], list[float]]:
    """What is wrong with how the fleet refuses each hostile file, and how long each took."""
    fleet = load_fleet(root)
    problems, seconds = [], []
    for case in cases:
        path = f"devices/{case.stem}.json"
        started = time.perf_counter()
        try:
            fleet.load(case.stem)
        except EvidenceError as exc:
            seconds.append(time.perf_counter() - started)
            message = str(exc)
            if exc.path != path or exc.field != case.field:
                named = f"{exc.path!r} {exc.field!r}"
                problems.append(
                    f"{case.family} {path}: named {named}, not {case.field!r}: {message}"
                )
            elif path not in message or (
                case.field is not None and f"field {_jsonfile.show(case.field)}" not in message
            ):
                problems.append(
                    f"{case.family} {path}: the message does not name file and field: {message}"
                )
            elif len(message) > 1000:
                problems.append(
                    f"{case.family} {path}: a {len(message)}-character message echoes the input"
                )
        except Exception as exc:  # anything else is the finding
            problems.append(f"{case.family} {path}: raised {type(exc).__name__}: {exc}")
        else:
            problems.append(f"{case.family} {path}: accepted")
    return problems, seconds


def test_every_hostile_evidence_file_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    cases = hostile_folder(root, CASES)
    assert len({c.family for c in cases}) >= 18
    problems, seconds = rejections(root, cases)
    assert problems == []
    seconds.sort()
    assert seconds[int(len(seconds) * 0.99)] <= 0.050


def test_hostile_devices_are_escalated_and_the_rest_of_the_fleet_runs_on(tmp_path: Path) -> None:
    clean_root = tmp_path / "clean"
    save_fleet(
        generate_fleet(GOOD, seed=10, mix={"clean": 0.6, "sanctioned_update": 0.4}), clean_root
    )
    with Attestation(load_fleet(clean_root)) as attestation:
        alone = {r.device: (r.outcome, r.reason) for r in attestation.run().devices}
    root = tmp_path / "fleet"
    cases = {c.stem: c for c in hostile_folder(root, min(CASES, 1000))}
    with Attestation(load_fleet(root)) as attestation:
        report = attestation.run()
        for result in report.devices:
            if result.device in alone:
                assert (result.outcome, result.reason) == alone[result.device]
                continue
            case = cases[result.device]
            assert (result.outcome, result.reason) == (DeviceOutcome.ESCALATED, Reason.BAD_EVIDENCE)
            escalation = attestation.blackboard.get_escalation(result.device)
            assert escalation is not None
            evidence = escalation.report.tier_report["evidence"]
            assert (evidence["file"], evidence["field"]) == (
                f"devices/{case.stem}.json",
                case.field,
            )
    assert len(report.devices) == GOOD + len(cases)


def _lenient_paths(root: Path, value: str) -> Path | None:
    return root / value


@pytest.mark.parametrize(
    ("target", "name", "lenient"),
    [
        (_evidence, "relative_to_root", _lenient_paths),
        (_jsonfile, "_no_duplicates", dict),
    ],
    ids=["log paths followed out of the folder", "duplicate keys let through"],
)
def test_negative_controls_a_lenient_loader_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object, name: str, lenient: object
) -> None:
    root = tmp_path / "fleet"
    cases = hostile_folder(root, 200)
    monkeypatch.setattr(target, name, lenient)
    problems, _ = rejections(root, cases)
    assert any(": accepted" in p for p in problems), problems[:5]

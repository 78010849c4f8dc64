"""Shared data for the event-log tests: the real logs, their expected PCRs, a builder.

The real logs are copied from ``shared/attestation/eventlogs`` (beside the repository)
into ``eventlogs/`` here, with tpm2-tools' licence, so a checkout anywhere tests them.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


EVENTLOGS = HERE / "eventlogs"
EXPECTED = EVENTLOGS / "expected"
MISSING_DATA = f"the event logs are not at {EVENTLOGS} (copy shared/attestation/eventlogs there)"


def all_logs() -> list[Path]:
    return sorted(EVENTLOGS.glob("*.bin")) if EVENTLOGS.is_dir() else []


def expected_logs() -> list[Path]:
    return [p for p in all_logs() if (EXPECTED / f"{p.name}.pcrs.yaml").is_file()]


_BANK_LINE = re.compile(r"^  (\w+):\s*$")
_PCR_LINE = re.compile(r"^\s+(\d+)\s*:\s*0x([0-9a-fA-F]+)\s*$")


def parse_pcrs_yaml(text: str) -> dict[str, dict[int, bytes]]:
    """Read the ``pcrs:`` section tpm2_eventlog prints (and expected/ holds)."""
    lines = text.splitlines()
    start = lines.index("pcrs:") + 1
    result: dict[str, dict[int, bytes]] = {}
    bank = None
    for line in lines[start:]:
        if match := _BANK_LINE.match(line):
            bank = match.group(1)
            result[bank] = {}
        elif (match := _PCR_LINE.match(line)) and bank is not None:
            result[bank][int(match.group(1))] = bytes.fromhex(match.group(2))
        elif line.strip():
            raise ValueError(f"unexpected line in pcrs section: {line!r}")
    return result


_EVENT_PCR = re.compile(r"^  PCRIndex: (\d+)$")
_EVENT_TYPE = re.compile(r"^  EventType: (\S+)$")
_ALGORITHM = re.compile(r"^  - AlgorithmId: (\w+)$")
_DIGEST = re.compile(r'^    Digest: "([0-9a-f]+)"$')


@dataclass
class YamlEvent:
    pcr_index: int
    type_name: str = ""
    digests: dict[str, bytes] = field(default_factory=dict)


def parse_events_yaml(text: str) -> list[YamlEvent]:
    """Read pcr, type and digests of each event from tpm2_eventlog's output."""
    events: list[YamlEvent] = []
    algorithm = None
    for line in text.splitlines():
        if line == "pcrs:":
            break
        if match := _EVENT_PCR.match(line):
            events.append(YamlEvent(int(match.group(1))))
            algorithm = None
        elif match := _EVENT_TYPE.match(line):
            events[-1].type_name = match.group(1)
        elif match := _ALGORITHM.match(line):
            algorithm = match.group(1)
        elif (match := _DIGEST.match(line)) and algorithm is not None:
            events[-1].digests[algorithm] = bytes.fromhex(match.group(1))
            algorithm = None
    return events


def expected_pcrs(log: Path) -> dict[str, dict[int, bytes]]:
    return parse_pcrs_yaml((EXPECTED / f"{log.name}.pcrs.yaml").read_text())


def _params(paths: list[Path]) -> list[object]:
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason=MISSING_DATA), id="no-data")]
    return [pytest.param(p, id=p.name) for p in paths]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "expected_log" in metafunc.fixturenames:
        metafunc.parametrize("expected_log", _params(expected_logs()))
    if "any_log" in metafunc.fixturenames:
        metafunc.parametrize("any_log", _params(all_logs()))
    if "unexpected_log" in metafunc.fixturenames:
        others = [p for p in all_logs() if p not in expected_logs()]
        metafunc.parametrize("unexpected_log", _params(others))


@pytest.fixture(scope="session")
def eventlogs() -> Path:
    if not EVENTLOGS.is_dir():
        pytest.skip(MISSING_DATA)
    return EVENTLOGS


def tpm2_eventlog_output(path: Path) -> str:
    """Run Debian's tpm2_eventlog on a log, skipping when the tool is absent."""
    tool = shutil.which("tpm2_eventlog")
    if tool is None:
        pytest.skip("tpm2_eventlog is not on PATH (apt-get install tpm2-tools)")
    done = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"tpm2_eventlog failed on {path}: {done.stderr}"
    return done.stdout


# --- building logs byte by byte -------------------------------------------------------

SHA1, SHA256, SHA384, SHA512, SM3 = 0x0004, 0x000B, 0x000C, 0x000D, 0x0012
_HASHES = {SHA1: "sha1", SHA256: "sha256", SHA384: "sha384", SHA512: "sha512", SM3: "sm3"}
_SIZES = {SHA1: 20, SHA256: 32, SHA384: 48, SHA512: 64, SM3: 32}

EV_NO_ACTION = 0x3
EV_SEPARATOR = 0x4
EV_S_CRTM_VERSION = 0x8
EV_EFI_VARIABLE_DRIVER_CONFIG = 0x80000001
EV_EFI_BOOT_SERVICES_APPLICATION = 0x80000003
EV_EFI_ACTION = 0x80000007
EV_EFI_HCRTM_EVENT = 0x80000010


def digest_of(alg: int, data: bytes) -> bytes:
    return hashlib.new(_HASHES[alg], data).digest()


@dataclass
class LogBuilder:
    """Builds crypto-agile or legacy logs, with hooks to corrupt any field."""

    algorithms: tuple[int, ...] = (SHA1, SHA256)
    declared_sizes: dict[int, int] = field(default_factory=dict)
    vendor_info: bytes = b""
    algorithm_count: int | None = None

    def spec_id(self) -> bytes:
        count = len(self.algorithms) if self.algorithm_count is None else self.algorithm_count
        body = b"Spec ID Event03\x00" + struct.pack("<IBBBBI", 0, 0, 2, 0, 2, count)
        for alg in self.algorithms:
            size = self.declared_sizes[alg] if alg in self.declared_sizes else _SIZES[alg]
            body += struct.pack("<HH", alg, size)
        body += bytes([len(self.vendor_info)]) + self.vendor_info
        return legacy_event(0, EV_NO_ACTION, bytes(20), body)

    def event(
        self,
        pcr: int,
        event_type: int,
        data: bytes,
        *,
        digests: list[tuple[int, bytes]] | None = None,
        count: int | None = None,
        size: int | None = None,
    ) -> bytes:
        if digests is None:
            digests = [(alg, digest_of(alg, data)) for alg in self.algorithms]
        head = struct.pack("<III", pcr, event_type, len(digests) if count is None else count)
        body = b"".join(struct.pack("<H", alg) + value for alg, value in digests)
        return head + body + struct.pack("<I", len(data) if size is None else size) + data

    def build(self, *events: bytes) -> bytes:
        return self.spec_id() + b"".join(events)


def legacy_event(
    pcr: int, event_type: int, digest: bytes, data: bytes, *, size: int | None = None
) -> bytes:
    head = struct.pack("<II", pcr, event_type) + digest
    return head + struct.pack("<I", len(data) if size is None else size) + data


def extend(alg: int, old: bytes, digest: bytes) -> bytes:
    return hashlib.new(_HASHES[alg], old + digest).digest()


def locality_event_data(locality: int) -> bytes:
    return b"StartupLocality\x00" + bytes([locality])


def variable_data(guid: bytes, name: str, value: bytes) -> bytes:
    encoded = name.encode("utf-16-le")
    return guid + struct.pack("<QQ", len(name), len(value)) + encoded + value


EFI_GLOBAL_GUID = bytes.fromhex("61dfe48bca93d211aa0d00e098032b8c")


@pytest.fixture(scope="session")
def kit() -> ModuleType:
    """This module: the builders, constants and parsers above, for the tests to use."""
    return sys.modules[__name__]

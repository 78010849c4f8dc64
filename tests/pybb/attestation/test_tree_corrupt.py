"""Corrupt evidence of every kind: a clear report for that device, and the rest runs on.

Includes a Hypothesis fuzz of random byte flips and truncations, of the event log and
of the evidence file, that must never crash the run: every device ends passed,
repaired or escalated, and never through a tier failing without its report.
"""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
from attest_support import FEDORA, LEGACY, MULTI, device, event, golden
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybb.attestation import (
    Attestation,
    DeviceClass,
    DeviceOutcome,
    Evidence,
    EvidenceError,
    Fleet,
    Reason,
    Tier,
    parse_evidence,
    replay,
)
from pybb.attestation._analysis import verify
from storekit import sized

SETTLED = {DeviceOutcome.PASSED, DeviceOutcome.REPAIRED, DeviceOutcome.ESCALATED}


def classes() -> list[DeviceClass]:
    return [
        DeviceClass.from_log(FEDORA, golden(FEDORA)),
        DeviceClass.from_log(LEGACY, golden(LEGACY)),
        DeviceClass.from_log(MULTI, golden(MULTI)),
    ]


def corrupt(name: str, how: str) -> bytes:
    data = bytearray(golden(name))
    target = event(name, 5)
    if how == "truncated":
        del data[target.offset + 7 :]
    elif how == "empty":
        data.clear()
    elif how == "pcr_index":
        struct.pack_into("<I", data, target.offset, 0xDEAD)
    elif how == "event_size":
        header = 32 if name == LEGACY else 12 + sum(2 + len(d) for d in target.digests.values()) + 4
        struct.pack_into("<I", data, target.offset + header - 4, 0xFFFFFFF0)
    elif how == "algorithm":
        struct.pack_into("<H", data, target.offset + 12, 0x0099)
    return bytes(data)


LOG_FAULTS = [
    (FEDORA, "truncated"),
    (LEGACY, "truncated"),
    (MULTI, "empty"),
    (FEDORA, "pcr_index"),
    (LEGACY, "event_size"),
    (MULTI, "event_size"),
    (FEDORA, "algorithm"),
    (MULTI, "algorithm"),
]


@pytest.mark.parametrize("quote", ["clean", "forged"])
def test_every_kind_of_corrupt_log_is_reported_by_event_and_offset_and_the_rest_runs_on(
    quote: str,
) -> None:
    devices = []
    for number, (name, how) in enumerate(LOG_FAULTS):
        values = replay(golden(name))
        if quote == "forged":
            bank = "sha256" if "sha256" in values else "sha1"
            values[bank] = {**values[bank], 0: bytes(len(values[bank][0]))}
        devices.append(device(f"bad-{number}-{how}", name, corrupt(name, how), quote=values))
        devices.append(device(f"good-{number}", name, golden(name)))
    with Attestation(Fleet.of(classes(), devices)) as attestation:
        report = attestation.run()
    tier = Tier.VERIFICATION if quote == "clean" else Tier.ATTRIBUTION
    for result in report.devices:
        if result.device.startswith("good"):
            assert result.outcome is DeviceOutcome.PASSED, result
            continue
        assert (result.outcome, result.reason, result.tier) == (
            DeviceOutcome.ESCALATED,
            Reason.CORRUPT_LOG,
            tier,
        ), result
        assert result.report is not None
        (finding,) = result.report.findings
        assert finding.event is not None and finding.offset is not None
        assert f"event {finding.event}" in finding.message
        assert f"byte offset {finding.offset}" in result.report.text()
        if "algorithm" in result.device:
            assert "algorithm id 0x0099" in finding.message
        if "empty" in result.device:
            assert "empty" in finding.message


def test_a_quote_for_a_bank_the_log_does_not_carry_is_a_mismatch() -> None:
    values = replay(golden(FEDORA))
    values["sha384"] = {0: bytes(48)}
    fleet = Fleet.of(classes(), [device("extra-bank", FEDORA, golden(FEDORA), quote=values)])
    with Attestation(fleet) as attestation:
        (result,) = attestation.run().devices
    assert (result.reason, result.tier) == (Reason.LOG_QUOTE_MISMATCH, Tier.VERIFICATION)
    assert result.report is not None and "no sha384 bank" in result.report.findings[0].message


def test_evidence_naming_an_unknown_class_is_bad_evidence_naming_the_field() -> None:
    fleet = Fleet.of(classes(), [device("stray", "no-such-class", golden(FEDORA))])
    with Attestation(fleet) as attestation:
        (result,) = attestation.run().devices
        escalation = attestation.blackboard.get_escalation("stray")
    assert (result.reason, result.tier) == (Reason.BAD_EVIDENCE, Tier.ATTRIBUTION)
    assert escalation is not None
    carried = escalation.report.tier_report
    assert carried["evidence"]["field"] == "class"
    assert "no-such-class" in carried["findings"][0]["message"]
    recorded = escalation.entry.measurement["evidence"]
    assert (recorded["file"], recorded["field"]) == (None, "class")
    assert recorded["problem"] in carried["evidence"]["message"]


# -- fuzzing the evidence ---------------------------------------------------------------


def _flipped(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    mutated = bytearray(data)
    for position, mask in flips:
        if mutated:
            mutated[position % len(mutated)] ^= mask
    if cut is not None:
        del mutated[cut % (len(mutated) + 1) :]
    return bytes(mutated)


FLIPS = st.lists(st.tuples(st.integers(0, 2**20), st.integers(1, 255)), max_size=6)
CUTS = st.none() | st.integers(0, 2**20)


@settings(
    max_examples=sized(200, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    name=st.sampled_from([FEDORA, LEGACY, MULTI]),
    flips=FLIPS,
    cut=CUTS,
    quote=st.sampled_from(["golden", "replayed", "flipped"]),
)
def test_byte_flips_and_truncations_of_a_log_never_crash_the_run(
    name: str, flips: list[tuple[int, int]], cut: int | None, quote: str
) -> None:
    log = _flipped(golden(name), flips, cut)
    values = replay(golden(name))
    if quote == "replayed":
        try:
            values = replay(log)
        except Exception:
            values = replay(golden(name))
    elif quote == "flipped":
        bank = next(iter(values))
        raw = _flipped(values[bank][7], flips, None)
        values[bank] = {**values[bank], 7: raw}
    fleet = Fleet.of(
        classes(), [device("fuzzed", name, log, quote=values), device("clean", name, golden(name))]
    )
    with Attestation(fleet) as attestation:
        fuzzed, clean = attestation.run().devices
    assert fuzzed.outcome in SETTLED and clean.outcome is DeviceOutcome.PASSED
    assert fuzzed.reason is not Reason.TIER_ERROR, fuzzed
    if fuzzed.outcome is DeviceOutcome.PASSED:
        # nothing the verification tier checks changed: the log still replays to the quote
        assert verify(fleet.load("fuzzed"), fleet.classes[name]).passed
    if fuzzed.outcome is DeviceOutcome.ESCALATED:
        assert fuzzed.report is not None and fuzzed.report.findings


def _evidence_file(name: str) -> bytes:
    evidence = Evidence("dev-1", name, golden(name), replay(golden(name)))
    return json.dumps(evidence.to_json()).encode()


@settings(
    max_examples=sized(200, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(name=st.sampled_from([FEDORA, LEGACY]), flips=FLIPS, cut=CUTS)
def test_byte_flips_and_truncations_of_an_evidence_file_are_refused_or_attested(
    name: str, flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = _flipped(_evidence_file(name), flips, cut)
    try:
        loaded: Evidence | EvidenceError = parse_evidence(data, path="devices/dev-1.json")
    except EvidenceError as exc:
        loaded = exc
    if isinstance(loaded, EvidenceError):
        assert loaded.path == "devices/dev-1.json" and "devices/dev-1.json" in str(loaded)

    def load(key: str) -> Evidence:
        if isinstance(loaded, EvidenceError):
            raise loaded
        return loaded

    fleet = Fleet(
        f"fuzz-{hashlib.sha256(data).hexdigest()[:8]}",
        {n.name: n for n in classes()},
        ("dev-1",),
        load,
    )
    with Attestation(fleet) as attestation:
        (result,) = attestation.run().devices
    assert result.outcome in SETTLED and result.reason is not Reason.TIER_ERROR
    if isinstance(loaded, EvidenceError):
        assert (result.outcome, result.reason) == (DeviceOutcome.ESCALATED, Reason.BAD_EVIDENCE)


def test_the_entry_is_the_record_when_evidence_changes_between_a_kill_and_its_resume(
    tmp_path: object,
) -> None:
    store = f"sqlite:///{tmp_path}/changed.db"
    fedora = DeviceClass.from_log(FEDORA, golden(FEDORA))
    original = device("d", FEDORA, golden(FEDORA))
    changed = device("d", FEDORA, golden(FEDORA), quote={"sha256": {0: bytes(32)}})

    def fleet(load: object) -> Fleet:
        return Fleet("f", {FEDORA: fedora}, ("d",), load, fingerprint="fixed")  # type: ignore[arg-type]

    with Attestation(fleet(lambda _: original), store=store) as attestation:
        attestation._write(["d"])  # killed after the entry, before the controller ran
    with Attestation(fleet(lambda _: changed), store=store) as attestation:
        (result,) = attestation.run().devices
    assert (result.reason, result.tier) == (Reason.BAD_EVIDENCE, Tier.VERIFICATION)
    assert result.report is not None and "evidence changed" in result.report.findings[0].message

    def refuse(_: str) -> Evidence:
        raise EvidenceError("unreadable", path="devices/d.json", field="quote")

    store = f"sqlite:///{tmp_path}/refused.db"
    with Attestation(fleet(refuse), store=store) as attestation:
        attestation._write(["d"])
    with Attestation(fleet(lambda _: original), store=store) as attestation:
        (result,) = attestation.run().devices
    assert (result.reason, result.tier) == (Reason.BAD_EVIDENCE, Tier.ATTRIBUTION)
    assert result.report is not None and "unreadable" in result.report.findings[0].message

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import cast

import pytest

import pybb.attestation as att
from pybb.attestation import _replay
from pybb.attestation._tcg import HashFunction


def _hex(pcrs: dict[str, dict[int, bytes]]) -> dict[str, dict[int, str]]:
    return {
        bank: {pcr: value.hex() for pcr, value in values.items()} for bank, values in pcrs.items()
    }


# --- the expected files ------------------------------------------------------------------


def test_replay_equals_the_expected_pcrs(expected_log: Path, kit: ModuleType) -> None:
    expected = kit.expected_pcrs(expected_log)
    assert expected, f"{expected_log.name}: the expected file lists no PCRs"
    # Exact equality: same banks, same PCRs in each bank, same values.
    assert _hex(att.replay(expected_log)) == _hex(expected)


def test_every_source_kind_replays_the_same(expected_log: Path) -> None:
    data = expected_log.read_bytes()
    by_path = att.replay(expected_log)
    assert att.replay(str(expected_log)) == by_path
    assert att.replay(data) == by_path
    assert att.replay(bytearray(data)) == by_path
    assert att.replay(memoryview(data)) == by_path
    assert att.replay(att.parse_event_log(data)) == by_path


def test_every_log_parses_and_replays(any_log: Path) -> None:
    log = att.read_event_log(any_log)
    pcrs = att.replay(log)
    assert log.events
    assert set(pcrs) <= set(log.banks)
    assert all(0 <= pcr <= att.MAX_PCR_INDEX for values in pcrs.values() for pcr in values)
    sizes = {alg.name: alg.digest_size for alg in log.algorithms}
    assert all(len(v) == sizes[bank] for bank, values in pcrs.items() for v in values.values())
    measured_pcrs = {e.pcr_index for e in log.events if e.measured}
    for bank in pcrs:
        assert set(pcrs[bank]) <= measured_pcrs


# --- incremental replay ------------------------------------------------------------------


def test_incremental_replay_ends_where_the_whole_replay_does(any_log: Path) -> None:
    log = att.read_event_log(any_log)
    steps = list(att.iter_replay(log))
    assert [step.event for step in steps] == list(log.events)
    last: dict[str, dict[int, bytes]] = {}
    for step in steps:
        assert step.extended == step.event.measured
        for bank, value in step.values.items():
            last.setdefault(bank, {})[step.event.pcr_index] = value
    expected = att.replay(log)
    assert {b: dict(sorted(v.items())) for b, v in last.items()} == expected


def test_replayer_steps_name_the_first_tampered_event(eventlogs: Path) -> None:
    log = att.read_event_log(eventlogs / "event-bootorder.bin")
    victim = 25  # the boot loader, \EFI\BOOT\BOOTX64.EFI in PCR 4
    forged = bytes(32)
    events = list(log.events)
    tampered_digests = MappingProxyType({**events[victim].digests, "sha256": forged})
    events[victim] = dataclasses.replace(events[victim], digests=tampered_digests)

    reference, tampered = att.Replayer.for_log(log), att.Replayer.for_log(log)
    diverged = [
        event.index
        for good, event in zip(log.events, events, strict=True)
        if reference.feed(good).values != tampered.feed(event).values
    ]
    assert diverged[0] == victim
    assert all(log.events[i].pcr_index == 4 for i in diverged)
    assert reference.pcrs()["sha1"] == tampered.pcrs()["sha1"]
    assert reference.pcrs()["sha256"][4] != tampered.pcrs()["sha256"][4]


def test_replayer_refuses_a_digest_for_a_bank_it_does_not_keep(eventlogs: Path) -> None:
    log = att.read_event_log(eventlogs / "event-bootorder.bin")
    only_sha256 = att.Replayer([att.KNOWN_ALGORITHMS[0x000B]])
    with pytest.raises(att.EventLogError, match="sha1 digest") as info:
        only_sha256.feed(log.events[1])
    assert (info.value.event, info.value.offset) == (1, log.events[1].offset)


# --- negative control --------------------------------------------------------------------


def test_the_equality_check_catches_one_skipped_extend(
    expected_log: Path, kit: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = att.read_event_log(expected_log)
    skipped = [e for e in log.events if e.measured][-1]
    real_extend = _replay._extend
    calls = {"n": 0}
    target_calls = range(
        sum(len(e.digests) for e in log.events if e.measured and e.index < skipped.index),
        sum(len(e.digests) for e in log.events if e.measured and e.index <= skipped.index),
    )

    def skipping_extend(hasher: HashFunction, old: bytes, digest: bytes) -> bytes:
        n = calls["n"]
        calls["n"] += 1
        return old if n in target_calls else real_extend(hasher, old, digest)

    monkeypatch.setattr(_replay, "_extend", skipping_extend)
    broken = att.replay(log)
    expected = kit.expected_pcrs(expected_log)
    assert broken != expected
    for bank in skipped.digests:
        assert broken[bank][skipped.pcr_index] != expected[bank][skipped.pcr_index]
    monkeypatch.undo()
    assert att.replay(log) == expected


# --- the rules on top of plain extends -----------------------------------------------------


def _locality_log(kit: ModuleType, locality: int, *, before: bytes = b"") -> bytes:
    builder = kit.LogBuilder()
    zero_digests = [(kit.SHA1, bytes(20)), (kit.SHA256, bytes(32))]
    locality_event = builder.event(
        0, kit.EV_NO_ACTION, kit.locality_event_data(locality), digests=zero_digests
    )
    crtm = builder.event(0, kit.EV_S_CRTM_VERSION, b"\x00\x00")
    return cast("bytes", builder.build(before, locality_event, crtm))  # kit's LogBuilder.build


@pytest.mark.parametrize("locality", [0, 3])
def test_startup_locality_sets_the_starting_value_of_pcr0(kit: ModuleType, locality: int) -> None:
    pcrs = att.replay(_locality_log(kit, locality))
    for alg, bank, size in ((kit.SHA1, "sha1", 20), (kit.SHA256, "sha256", 32)):
        start = bytes(size - 1) + bytes([locality])
        assert pcrs[bank][0] == kit.extend(alg, start, kit.digest_of(alg, b"\x00\x00"))


def test_startup_locality_alone_shows_pcr0_at_the_locality(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    event = builder.event(0, kit.EV_NO_ACTION, kit.locality_event_data(3))
    assert att.replay(builder.build(event)) == {
        "sha1": {0: bytes(19) + b"\x03"},
        "sha256": {0: bytes(31) + b"\x03"},
    }


def test_startup_locality_after_a_pcr0_extend_is_ignored(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    early = builder.event(0, kit.EV_S_CRTM_VERSION, b"early")
    late = att.replay(_locality_log(kit, 3, before=early))
    plain = att.replay(builder.build(early, builder.event(0, kit.EV_S_CRTM_VERSION, b"\x00\x00")))
    assert late == plain


def test_no_action_events_are_not_extended(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    action = builder.event(4, kit.EV_EFI_ACTION, b"Calling EFI Application from Boot Option")
    noise = builder.event(4, kit.EV_NO_ACTION, b"SP800-155 Event\x00" + bytes(8))
    assert att.replay(builder.build(noise, action, noise)) == att.replay(builder.build(action))
    assert att.replay(builder.build(noise)) == {}


def test_hcrtm_event_starts_pcr0_at_four(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    log = builder.build(
        builder.event(0, kit.EV_EFI_HCRTM_EVENT, b"HCRTM"),
        builder.event(0, kit.EV_NO_ACTION, kit.locality_event_data(3)),
        builder.event(0, kit.EV_S_CRTM_VERSION, b"\x00\x00"),
    )
    pcr0 = att.replay(log)["sha256"][0]
    start = bytes(31) + b"\x04"
    step = kit.extend(kit.SHA256, start, kit.digest_of(kit.SHA256, b"HCRTM"))
    assert pcr0 == kit.extend(kit.SHA256, step, kit.digest_of(kit.SHA256, b"\x00\x00"))


@pytest.mark.skipif("sm3" not in hashlib.algorithms_available, reason="hashlib has no sm3")
def test_sm3_and_sha384_sha512_banks_replay(kit: ModuleType) -> None:
    builder = kit.LogBuilder(algorithms=(kit.SM3, kit.SHA384, kit.SHA512))
    log = builder.build(builder.event(4, kit.EV_EFI_ACTION, b"hello"))
    pcrs = att.replay(log)
    assert set(pcrs) == {"sm3_256", "sha384", "sha512"}
    for alg, bank, size in ((kit.SM3, "sm3_256", 32), (kit.SHA384, "sha384", 48)):
        assert pcrs[bank] == {4: kit.extend(alg, bytes(size), kit.digest_of(alg, b"hello"))}


def test_a_bank_without_hashlib_support_is_a_typed_error(
    kit: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_replay, "hash_constructor", lambda bank: None)
    builder = kit.LogBuilder()
    with pytest.raises(att.UnknownAlgorithmError, match="cannot compute sha1") as info:
        att.replay(builder.build(builder.event(4, kit.EV_EFI_ACTION, b"x")))
    assert info.value.algorithm_id == kit.SHA1


# --- tpm2-tools as an independent oracle -------------------------------------------------


def test_replay_agrees_with_tpm2_eventlog_on_logs_without_expected_files(
    unexpected_log: Path, kit: ModuleType
) -> None:
    output = kit.tpm2_eventlog_output(unexpected_log)
    assert _hex(att.replay(unexpected_log)) == _hex(kit.parse_pcrs_yaml(output))


def test_parsed_events_agree_with_tpm2_eventlog(any_log: Path, kit: ModuleType) -> None:
    theirs = kit.parse_events_yaml(kit.tpm2_eventlog_output(any_log))
    ours = att.read_event_log(any_log).events
    assert [(e.pcr_index, e.type_name, dict(e.digests)) for e in ours] == [
        (e.pcr_index, e.type_name, e.digests) for e in theirs
    ]


@pytest.mark.skipif("sm3" not in hashlib.algorithms_available, reason="hashlib has no sm3")
def test_sm3_replay_agrees_with_tpm2_eventlog(kit: ModuleType, tmp_path: Path) -> None:
    # Debian's tpm2-tools 5.4 still extends EV_NO_ACTION events (tpm2-tools issue
    # 3224, fixed upstream), so only logs without such events make a fair oracle.
    builder = kit.LogBuilder(algorithms=(kit.SM3, kit.SHA256))
    path = tmp_path / "sm3.bin"
    path.write_bytes(
        builder.build(
            builder.event(0, kit.EV_S_CRTM_VERSION, b"\x00\x00"),
            builder.event(4, kit.EV_EFI_ACTION, b"Calling EFI Application from Boot Option"),
        )
    )
    theirs = kit.parse_pcrs_yaml(kit.tpm2_eventlog_output(path))
    assert _hex(att.replay(path)) == _hex(theirs)


def test_iter_replay_fails_when_called_not_when_iterated(tmp_path: Path) -> None:
    with pytest.raises(att.EventLogError):
        att.iter_replay(tmp_path / "missing.bin")


def test_events_and_components_are_hashable_values(eventlogs: Path) -> None:
    log = att.read_event_log(eventlogs / "event-bootorder.bin")
    again = att.read_event_log(eventlogs / "event-bootorder.bin")
    assert log == again and hash(log) == hash(again)
    assert len(set(log.events)) == len(log.events)
    assert {c.identity for c in log.boot_components()} == {
        c.identity for c in again.boot_components()
    }

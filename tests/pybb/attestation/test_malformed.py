from __future__ import annotations

import pickle
import struct
from pathlib import Path
from types import ModuleType

import pytest

import pybb.attestation as att
from pybb.attestation import _eventlog

# Layout of a log from kit.LogBuilder() (sha1 + sha256): the Spec ID event is bytes
# 0..68; event 1 starts at 69: pcrIndex 69, eventType 73, count 77, sha1 id 81,
# sha1 digest 83, sha256 id 103, sha256 digest 105, eventSize 137, data 141.
SPEC_END = 69


def _raises(data: bytes, error: type[att.EventLogError]) -> att.EventLogError:
    with pytest.raises(error) as info:
        att.parse_event_log(data)
    assert type(info.value) is error
    return info.value


def _where(err: att.EventLogError) -> tuple[int | None, int | None]:
    return err.event, err.offset


def test_an_empty_log_is_a_truncated_log() -> None:
    err = _raises(b"", att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed, err.available) == ((0, 0), 32, 0)
    assert "the log is empty (0 bytes)" in str(err)


def test_a_legacy_log_shorter_than_one_header() -> None:
    err = _raises(b"\x01" * 10, att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed, err.available) == ((0, 0), 32, 10)


def test_a_log_ending_inside_an_event_header(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    err = _raises(builder.build(b"\x04\x00\x00\x00\x07"), att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed, err.available) == ((1, SPEC_END), 12, 5)


def test_an_event_size_of_4_gib_running_past_the_end(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    event = builder.event(4, kit.EV_EFI_ACTION, b"abc", size=0xFFFFFFFF)
    err = _raises(builder.build(event), att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed, err.available) == ((1, 141), 0xFFFFFFFF, 3)
    assert "eventSize 4294967295" in str(err)
    assert "byte offset 141 (0x8d)" in str(err)


def test_a_digest_count_of_0xffffffff(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    event = builder.event(4, kit.EV_EFI_ACTION, b"abc", count=0xFFFFFFFF)
    err = _raises(builder.build(event), att.EventLogError)
    assert _where(err) == (1, 77)
    assert "digest count 4294967295 exceeds the 2 algorithm(s)" in str(err)


def test_an_algorithm_id_unknown_to_anyone(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    event = builder.event(4, kit.EV_EFI_ACTION, b"x", digests=[(0x0099, bytes(32))])
    err = _raises(builder.build(event), att.UnknownAlgorithmError)
    assert isinstance(err, att.UnknownAlgorithmError)
    assert (_where(err), err.algorithm_id) == ((1, 81), 0x0099)
    assert "0x0099 is not declared by the Spec ID event" in str(err)
    assert "0x0004 sha1, 0x000b sha256" in str(err)


def test_a_known_algorithm_the_spec_id_did_not_declare(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    digests = [(kit.SHA1, bytes(20)), (kit.SHA384, bytes(48))]
    event = builder.event(4, kit.EV_EFI_ACTION, b"x", digests=digests)
    err = _raises(builder.build(event), att.UnknownAlgorithmError)
    assert isinstance(err, att.UnknownAlgorithmError)
    assert (_where(err), err.algorithm_id) == ((1, 103), kit.SHA384)


def test_a_digest_given_twice(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    digests = [(kit.SHA1, bytes(20)), (kit.SHA1, bytes(20))]
    err = _raises(builder.build(builder.event(4, 7, b"", digests=digests)), att.EventLogError)
    assert _where(err) == (1, 103)
    assert "appears twice" in str(err)


@pytest.mark.parametrize(
    ("cut", "offset", "needed", "what"),
    [
        (115, 105, 32, "sha256 digest"),
        (139, 137, 4, "eventSize field"),
        (82, 81, 2, "algorithm id"),
    ],
)
def test_a_log_ending_inside_digests_or_sizes(
    kit: ModuleType, cut: int, offset: int, needed: int, what: str
) -> None:
    builder = kit.LogBuilder()
    data = builder.build(builder.event(4, kit.EV_EFI_ACTION, b"abc"))[:cut]
    err = _raises(data, att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed, err.available) == ((1, offset), needed, cut - offset)
    assert what in str(err)


def test_a_pcr_index_out_of_range(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    err = _raises(builder.build(builder.event(0xFFFFFFFF, 7, b"")), att.EventLogError)
    assert _where(err) == (1, SPEC_END)
    assert "PCR index 4294967295 (0xffffffff) is out of range 0..31" in str(err)


def test_a_spec_id_declaring_an_unknown_algorithm(kit: ModuleType) -> None:
    builder = kit.LogBuilder(algorithms=(kit.SHA1, 0x0099), declared_sizes={0x0099: 32})
    err = _raises(builder.build(), att.UnknownAlgorithmError)
    assert isinstance(err, att.UnknownAlgorithmError)
    assert (_where(err), err.algorithm_id) == ((0, 64), 0x0099)


@pytest.mark.parametrize("count", [0, 3, 0xFFFFFFFF])
def test_a_spec_id_with_an_absurd_number_of_algorithms(kit: ModuleType, count: int) -> None:
    err = _raises(kit.LogBuilder(algorithm_count=count).build(), att.EventLogError)
    assert _where(err) == (0, 56)
    assert f"numberOfAlgorithms {count}" in str(err)


def test_a_spec_id_with_a_wrong_digest_size(kit: ModuleType) -> None:
    builder = kit.LogBuilder(declared_sizes={kit.SHA256: 20})
    err = _raises(builder.build(), att.EventLogError)
    assert _where(err) == (0, 64)
    assert "sha256 with digest size 20; sha256 digests are 32 bytes" in str(err)


def test_a_spec_id_declaring_an_algorithm_twice(kit: ModuleType) -> None:
    err = _raises(kit.LogBuilder(algorithms=(kit.SHA1, kit.SHA1)).build(), att.EventLogError)
    assert _where(err) == (0, 64)


def test_a_spec_id_too_short_or_running_past_the_end(kit: ModuleType) -> None:
    short = kit.legacy_event(0, kit.EV_NO_ACTION, bytes(20), b"Spec ID Event03\x00" + bytes(4))
    err = _raises(short, att.EventLogError)
    assert _where(err) == (0, 32)
    assert "Spec ID event is 20 bytes; it needs at least 29" in str(err)
    long = kit.LogBuilder().spec_id()
    long = long[:28] + struct.pack("<I", 1000) + long[32:]
    err = _raises(long, att.TruncatedLogError)
    assert _where(err) == (0, 32)


def test_a_spec_id_vendor_info_running_past_the_end(kit: ModuleType) -> None:
    spec = kit.LogBuilder().spec_id()
    err = _raises(spec[:-1] + b"\xc8", att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    assert (_where(err), err.needed) == ((0, SPEC_END), 200)


def test_legacy_logs_with_absurd_or_truncated_sizes(kit: ModuleType) -> None:
    first = kit.legacy_event(0, kit.EV_S_CRTM_VERSION, bytes(20), b"ab")
    err = _raises(kit.legacy_event(0, 8, bytes(20), b"ab", size=0xFFFFFFFF), att.TruncatedLogError)
    assert _where(err) == (0, 32)
    err = _raises(first + first[:31], att.TruncatedLogError)
    assert _where(err) == (1, len(first))
    err = _raises(first + kit.legacy_event(40, 4, bytes(20), bytes(4)), att.EventLogError)
    assert _where(err) == (1, len(first))


def test_a_real_log_cut_anywhere_names_the_event_it_ends_in(any_log: Path) -> None:
    data = any_log.read_bytes()
    events = att.parse_event_log(data).events
    ends = [e.offset for e in events[1:]] + [len(data)]
    for event in {events[len(events) // 2], events[-1]}:
        for cut in (event.offset + 5, ends[event.index] - 1):
            err = _raises(data[:cut], att.TruncatedLogError)
            assert err.event == event.index, (cut, str(err))
            assert event.offset <= (err.offset or 0) <= cut


# --- reading files ---------------------------------------------------------------------------


def test_a_missing_file_is_an_event_log_error(tmp_path: Path) -> None:
    path = tmp_path / "nothing.bin"
    with pytest.raises(att.EventLogError) as info:
        att.read_event_log(path)
    assert _where(info.value) == (None, None)
    assert repr(str(path)) in str(info.value)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(att.EventLogError):
        att.replay(tmp_path)


def test_a_file_larger_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_eventlog, "MAX_LOG_FILE_SIZE", 16)
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(17))
    with pytest.raises(att.EventLogError, match="larger than 16 bytes"):
        att.read_event_log(path)


def test_an_unsupported_source_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot load an event log from int 42"):
        att.load_event_log(42)  # type: ignore[arg-type]


# --- the errors themselves -------------------------------------------------------------------


def test_errors_survive_pickling_with_their_fields(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    err = _raises(builder.build(builder.event(4, 7, b"", size=99)), att.TruncatedLogError)
    assert isinstance(err, att.TruncatedLogError)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is att.TruncatedLogError
    assert (copy.event, copy.offset, copy.needed, copy.available, str(copy)) == (
        err.event,
        err.offset,
        err.needed,
        err.available,
        str(err),
    )


def test_messages_say_where_what_and_what_to_do(kit: ModuleType) -> None:
    builder = kit.LogBuilder()
    err = _raises(builder.build(builder.event(4, 7, b"", size=99)), att.TruncatedLogError)
    assert str(err) == (
        "TCG event log, event 1 at byte offset 141 (0x8d): the event data (eventSize 99) needs "
        "99 bytes but the log ends after 0; the log is corrupt or was cut short; copy it again "
        "from the machine (e.g. /sys/kernel/security/tpm0/binary_bios_measurements) and retry."
    )

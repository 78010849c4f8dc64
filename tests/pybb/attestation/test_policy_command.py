"""`pybb attest policy` (enrol a class from a golden log) and `pybb attest show` (read a log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from attest_support import FEDORA, golden

from pybb.attestation import DeviceClass, load_class, parse_event_log
from pybb.cli import main

GCE_LOG = "event-gce-ubuntu-2104-log.bin"


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def forged_secure_boot(log: bytes) -> bytes:
    variable = next(e for e in parse_event_log(log).events if e.label.startswith("SecureBoot "))
    at = variable.offset + 12 + sum(2 + len(d) for d in variable.digests.values()) + 4
    end = at + len(variable.data)
    return log[: end - 1] + b"\x01" + log[end:]


# -- show ---------------------------------------------------------------------------------------


def test_show_prints_every_event_with_its_data_check(
    eventlogs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["attest", "show", str(eventlogs / GCE_LOG)]) == 0
    out = capsys.readouterr().out
    assert "EV_EFI_VARIABLE_DRIVER_CONFIG" in out and "SecureBoot = 0 (disabled)" in out
    assert "ok (variable value only)" in out  # OVMF's boot variables, named
    assert "ok (GRUB command without its NUL)" in out
    assert "sha384 " in out  # every bank, shortened
    assert "112 events" in out and "0 do not" in out and "Secure Boot off" in out


def test_show_flags_forged_data_and_exits_1(
    eventlogs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = write(tmp_path, "forged.bin", forged_secure_boot((eventlogs / GCE_LOG).read_bytes()))
    assert main(["attest", "show", str(forged), "--pcr", "7", "--bank", "sha256"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "SecureBoot = 1 (enabled)" in out
    assert "sha1 " not in out and "EV_IPL" not in out  # one bank, one PCR
    assert "1 do not" in out and "Secure Boot not shown" in out


def test_show_json_lines(eventlogs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attest", "show", str(eventlogs / "event-uefivar.bin"), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["event"], r["type"], r["data"]) for r in rows] == [
        (0, "EV_NO_ACTION", "not_applicable"),
        (1, "EV_EFI_VARIABLE_DRIVER_CONFIG", "verified"),
    ]


@pytest.mark.parametrize(
    ("content", "fragment"), [(b"", "the log is empty"), (None, "cannot read the event log file")]
)
def test_show_names_a_log_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, fragment: str
) -> None:
    path = tmp_path / "x.bin"
    if content is not None:
        path.write_bytes(content)
    assert main(["attest", "show", str(path)]) == 2
    assert fragment in capsys.readouterr().err


def test_show_names_a_bank_the_log_lacks(
    eventlogs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["attest", "show", str(eventlogs / GCE_LOG), "--bank", "sm3_256"]) == 2
    assert "carries no sm3_256 bank" in capsys.readouterr().err


# -- policy -------------------------------------------------------------------------------------


def test_policy_writes_the_class_a_golden_log_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path, "golden.bin", golden(FEDORA))
    out = tmp_path / "fedora.json"
    assert (
        main(["attest", "policy", "fedora", "--golden", str(log), "--out", str(out), "--no-store"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "class fedora" in printed and "PCRs covered" in printed
    assert load_class(out) == DeviceClass.from_log("fedora", golden(FEDORA))
    assert "note:" not in printed


def test_require_secure_boot_is_added_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path, "golden.bin", golden(FEDORA))  # Secure Boot off on this machine
    out = tmp_path / "strict.json"
    argv = ["attest", "policy", "strict", "--golden", str(log), "--require-secure-boot"]
    assert main([*argv, "--out", str(out), "--no-store", "--pcrs", "0,1,2,3,4,5"]) == 0
    printed = capsys.readouterr().out
    assert "the golden log measured Secure Boot off" in printed
    assert "requires it on anyway" in printed and "PCR 7" not in printed
    strict = load_class(out)
    assert strict.policy.secure_boot_required and strict.policy.pcrs == (0, 1, 2, 3, 4, 5)
    assert main([*argv, "--out", str(out), "--no-store"]) == 0
    assert "leave PCR 7 out (--pcrs)" in capsys.readouterr().out  # it covers PCR 7 now


def test_policy_refuses_a_golden_log_with_forged_data(
    eventlogs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = write(tmp_path, "forged.bin", forged_secure_boot((eventlogs / GCE_LOG).read_bytes()))
    out = tmp_path / "gce.json"
    assert main(["attest", "policy", "gce", "--golden", str(forged), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "forged.bin" in err and "PCR 7" in err and "must not be enrolled" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--pcrs", "0,x"], "is not a comma-separated list"),
        (["--pcrs", "40"], "from 0 to 31"),
        (["--bank", "sha384"], "carries no sha384 values"),
    ],
)
def test_policy_names_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], fragment: str
) -> None:
    log = write(tmp_path, "golden.bin", golden(FEDORA))
    assert main(["attest", "policy", "c", "--golden", str(log), "--no-store", *extra]) == 2
    assert fragment in capsys.readouterr().err


def test_policy_enrols_the_class_on_the_registry_board(tmp_path: Path) -> None:
    registry = pytest.importorskip("pybb.attestation._registry")
    log = write(tmp_path, "golden.bin", golden(FEDORA))
    store = f"sqlite:///{tmp_path / 'r.db'}"
    for _ in range(2):  # enrolled again: the next version, the same class in force
        assert main(["attest", "policy", "fedora", "--golden", str(log), "--store", store]) == 0
        with registry.Registry(store) as board:
            assert board.classes()["fedora"] == DeviceClass.from_log("fedora", golden(FEDORA))


def test_attest_demo_and_a_folder_named_policy_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The words do not take over ``pybb attest --demo N`` or ``pybb attest ./policy``."""
    monkeypatch.chdir(tmp_path)
    demo = ["attest", "--demo", "3", "--no-progress", "--save-fleet", "policy"]
    assert main([*demo, "--store", "sqlite:///a.db", "--report", "a.json"]) == 0
    folder = ["attest", "./policy", "--no-progress", "--store", "sqlite:///b.db"]
    assert main([*folder, "--report", "b.json"]) == 0
    assert json.loads(Path("b.json").read_text())["devices_total"] == 3

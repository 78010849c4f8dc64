"""The registry board: AK enrolment, re-enrolment and revocation; nonces spent exactly once.

Over every backend; the cross-process test runs real processes on one SQLite file
(and PostgreSQL when a server answers) that all try to spend the same nonces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import pybb.attestation._registry as registry_module
from blackboard import Level
from pybb.attestation import FleetError, Reason
from pybb.attestation._quote import AttestationKey, QuoteError
from pybb.attestation._registry import NONCE_TTL, NONCE_USES, Registry
from pybb.attestation._tpm import ClockInfo
from storekit import StoreSpec

_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_EC = ec.generate_private_key(ec.SECP256R1())
AK1 = AttestationKey(_RSA.public_key())
AK2 = AttestationKey(_EC.public_key())


def test_enrol_reenrol_revoke_are_versioned_changes(store_spec: StoreSpec) -> None:
    with Registry(store_spec.open(), writer="alice") as registry:
        assert registry.ak("dev-1") is None
        assert registry.enroll("dev-1", AK1, "fedora") == 1
        with pytest.raises(FleetError, match="already enrolled"):
            registry.enroll("dev-1", AK2, "fedora")
        with pytest.raises(FleetError, match="nothing to replace"):
            registry.enroll("dev-2", AK2, "fedora", replace=True)
        assert registry.enroll("dev-1", AK2, "fedora", replace=True, by="bob") == 2
        held = registry.ak("dev-1")
        assert held is not None
        assert (held.version, held.key.fingerprint, held.revoked, held.by) == (
            2,
            AK2.fingerprint,
            False,
            "bob",
        )
        assert registry.revoke("dev-1") == 3
        revoked = registry.ak("dev-1")
        assert revoked is not None
        assert revoked.revoked
        with pytest.raises(FleetError, match="revoked already"):
            registry.revoke("dev-1")
        with pytest.raises(FleetError, match="not enrolled"):
            registry.revoke("dev-9")
        assert registry.enroll("dev-1", AK1, "fedora", replace=True) == 4
        again = registry.ak("dev-1")
        assert again is not None
        assert not again.revoked
        assert again.key.fingerprint == AK1.fingerprint
    # Another handle on the same store sees the same history.
    with Registry(store_spec.open()) as other:
        found = other.ak("dev-1")
        assert found is not None
        assert found.version == 4


def test_two_changes_racing_for_one_version_land_once(store_spec: StoreSpec) -> None:
    with Registry(store_spec.open()) as first, Registry(store_spec.open()) as second:
        first.enroll("dev-1", AK1, "fedora")
        stale = first.ak("dev-1")
        assert first._change("dev-1", stale, "enroll", AK2, "fedora", None) == 2
        with pytest.raises(FleetError, match="same moment"):
            second._change("dev-1", stale, "enroll", AK1, "fedora", None)
        held = second.ak("dev-1")
        assert held is not None
        assert held.key.fingerprint == AK2.fingerprint


def test_a_nonce_is_issued_to_one_device_spent_once_and_expires(store_spec: StoreSpec) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with Registry(store_spec.open()) as registry:
        nonce = registry.challenge("dev-1", now=now)
        assert len(nonce) >= 20
        assert registry.challenge("dev-1", now=now) != nonce
        with pytest.raises(QuoteError) as other:
            registry.spend("dev-2", nonce, now=now)
        assert other.value.reason is Reason.NONCE_UNKNOWN
        assert "issued to 'dev-1'" in other.value.problem
        with pytest.raises(QuoteError) as never:
            registry.spend("dev-1", b"\x01" * 32, now=now)
        assert never.value.reason is Reason.NONCE_UNKNOWN
        registry.spend("dev-1", nonce, now=now + NONCE_TTL - timedelta(seconds=1))
        with pytest.raises(QuoteError) as again:
            registry.spend("dev-1", nonce, now=now)
        assert again.value.reason is Reason.NONCE_REUSED
        late = registry.challenge("dev-1", now=now)
    # A fresh process (no cache) refuses the spent nonce too, and the expired one.
    with Registry(store_spec.open()) as fresh:
        with pytest.raises(QuoteError) as reused:
            fresh.spend("dev-1", nonce, now=now)
        assert reused.value.reason is Reason.NONCE_REUSED
        with pytest.raises(QuoteError) as expired:
            fresh.spend("dev-1", late, now=now + NONCE_TTL)
        assert expired.value.reason is Reason.NONCE_EXPIRED


def test_the_clock_of_an_ak_never_goes_backwards(store_spec: StoreSpec) -> None:
    with Registry(store_spec.open()) as registry:
        registry.observe_clock("d", AK1, ClockInfo(1000, 5, 2, True))
        for behind, words in [
            (ClockInfo(999, 5, 2, True), "clock 999 ms is behind 1000"),
            (ClockInfo(2000, 4, 9, True), "resetCount 4 is behind 5"),
            (ClockInfo(2000, 5, 1, True), "restartCount 1 is behind 2"),
        ]:
            with pytest.raises(QuoteError, match=words) as caught:
                registry.observe_clock("d", AK1, behind)
            assert caught.value.reason is Reason.CLOCK_ROLLBACK
        registry.observe_clock("d", AK1, ClockInfo(1000, 5, 2, True))  # the same instant
        registry.observe_clock("d", AK1, ClockInfo(1500, 6, 0, True))  # a reset: restart 0
        registry.observe_clock("d", AK2, ClockInfo(1, 0, 0, True))  # another AK: its own


_SPENDER = textwrap.dedent(
    """
    import json, sys
    import pybb.attestation._registry as registry_module
    from blackboard import Level
    from pybb.attestation._quote import QuoteError
    from pybb.attestation._registry import NONCE_USES, Registry
    store, nonces, board = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    if board == "control":  # the negative control: spending is not a unique level
        registry_module.Level = lambda name, unique=False: Level(
            name, unique=False if name == NONCE_USES else unique
        )
    spent = []
    with Registry(store, board) as registry:
        for nonce in nonces:
            try:
                registry.spend("dev-1", bytes.fromhex(nonce))
            except QuoteError as exc:
                assert exc.reason.value == "nonce_reused", exc
            else:
                spent.append(nonce)
    print(json.dumps(spent))
    """
)


def _lenient_level(name: str, unique: bool | str = False) -> Level:
    """The negative control's levels: spending a nonce is not a unique level."""
    return Level(name, unique=False if name == NONCE_USES else unique)


def _spend_in_processes(
    url: str, board: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], list[str]]:
    """Issue 40 nonces on ``board``; 4 processes each try to spend all of them."""
    with monkeypatch.context() as patch:
        if board == "control":
            patch.setattr(registry_module, "Level", _lenient_level)
        with Registry(url, board) as registry:
            nonces = [registry.challenge("dev-1").hex() for _ in range(40)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", _SPENDER, url, json.dumps(nonces), board]
    workers = [subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True) for _ in range(4)]
    spent: list[str] = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        spent += json.loads(out)
    return nonces, spent


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_nonce_is_spent_exactly_once_across_processes(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storekit import build

    spec = build(kind, tmp_path)
    try:
        assert spec.url is not None
        nonces, spent = _spend_in_processes(spec.url, "attest-registry", monkeypatch)
        assert sorted(spent) == sorted(nonces)  # every nonce once, none twice
        # The negative control: without the unique level every process spends every one.
        nonces, spent = _spend_in_processes(spec.url, "control", monkeypatch)
        assert len(spent) == 4 * len(nonces)
    finally:
        spec.close_all()

"""A fleet generator with known ground truth, built from real event logs.

The package bundles six real TCG event logs from tpm2-tools' test data (BSD-3-Clause,
see ``data/LICENSE-tpm2-tools``). Each becomes a device class (:func:`builtin_classes`):
its replay is the reference, its measured events the manifest, and its policy allows
two sanctioned updates of each updatable boot component (firmware blobs, drivers, boot
applications, CRTM version, POST code) and denies one revoked version of the first
two. :func:`generate_fleet` then makes each device from its class's log by one known
mutation, so where each device should land is known:

============================  =================================================
kind                          what was done, and where it should land
============================  =================================================
``clean``                     nothing: passed (verification tier)
``sanctioned_update``         a component replaced by an allowed update: repaired
``tampered_component``        a component's digest replaced by an unknown one (or
                              by a denied one): escalated, ``tampered_component``
                              (``denied_component``) by the attribution tier; the
                              component is one whose digest is of code, not of its
                              event data
``log_quote_mismatch``        a log event edited under a clean quote (caught by the
                              verification tier), or a quoted PCR forged under a
                              clean log (caught by attribution)
``secure_boot_off``           the SecureBoot variable measured as 0 (classes that
                              require Secure Boot): escalated by attribution
``forged_secure_boot``        measured as 0, then its data edited back to 1 with the
                              digests untouched (the quote is honest): escalated,
                              ``event_data_mismatch``
``corrupt_log``               truncated, emptied, an absurd eventSize or PCR
                              index, an unknown algorithm id: escalated, naming
                              the event number and byte offset
``replayed_nonce``            a clean device's quote over a nonce an earlier
                              attestation spent: escalated, ``nonce_reused``
``bad_signature``             a clean device's quote signed by another key than
                              its enrolled AK: escalated, ``bad_signature``
``unknown_ak``                a clean device whose AK was never enrolled:
                              escalated, ``unknown_ak``
============================  =================================================

Every device's quote is signed: a ``TPMS_ATTEST`` over its quoted PCR values (every
bank) and its nonce, signed ECDSA P-256/SHA-256 by the device's own AK, and the fleet
carries the ledger of enrolled AKs and issued and spent nonces it is checked against
(:class:`~pybb.attestation._signed.QuoteLedger`) before the tree sees the device.

Everything is a function of the seed: the same ``(n, seed)`` gives the same fleet,
byte for byte (the AKs are derived from it, ECDSA signing is deterministic, RFC 6979),
and each device is built only when the run reaches it.
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from pybb.attestation._eventdata import check_event
from pybb.attestation._eventlog import Event, EventLog, LogFormat, parse_event_log
from pybb.attestation._evidence import Evidence
from pybb.attestation._fleet import Fleet, _fingerprint
from pybb.attestation._policy import BANK_SIZES, DeviceClass
from pybb.attestation._quote import AttestationKey
from pybb.attestation._replay import PcrValues, Replayer, replay
from pybb.attestation._report import DeviceOutcome, GroundTruth, Reason
from pybb.attestation._signed import QuoteLedger, SignedQuote
from pybb.attestation._slots import Slot
from pybb.attestation._tcg import EventType, hash_constructor
from pybb.attestation._tpm import (
    ALG_ECDSA,
    ClockInfo,
    PcrSelection,
    TpmsAttest,
    TpmtSignature,
    encode_tpms_attest,
    encode_tpmt_signature,
    pcr_digest,
)

__all__ = ["DEFAULT_MIX", "TRUTH_KINDS", "builtin_classes", "builtin_logs", "generate_fleet"]

TRUTH_KINDS = (
    "clean",
    "sanctioned_update",
    "tampered_component",
    "log_quote_mismatch",
    "secure_boot_off",
    "corrupt_log",
    "replayed_nonce",
    "bad_signature",
    "unknown_ak",
    "forged_secure_boot",
)
"""The ground-truth kinds the generator makes."""

QUOTE_KINDS = ("replayed_nonce", "bad_signature", "unknown_ak")
"""The kinds whose only flaw is the signed quote (the log and PCRs are clean)."""

DEFAULT_MIX: Mapping[str, float] = MappingProxyType(
    {
        "clean": 0.25,
        "sanctioned_update": 0.12,
        "tampered_component": 0.12,
        "log_quote_mismatch": 0.08,
        "secure_boot_off": 0.08,
        "corrupt_log": 0.08,
        "forged_secure_boot": 0.06,
        "replayed_nonce": 0.07,
        "bad_signature": 0.07,
        "unknown_ak": 0.07,
    }
)
"""The default share of each kind."""

_BUILTIN = {
    "rhel9-shim": "event-moklisttrusted.bin",
    "postcode": "event-postcode.bin",
    "gce-ubuntu": "event-gce-ubuntu-2104-log.bin",
    "fedora37-sdboot": "event-sd-boot-fedora37.bin",
    "uefi-sha1": "event-uefi-sha1-log.bin",
    "arch-linux": "event-arch-linux.bin",
}
_UPDATABLE = frozenset(
    int(t)
    for t in (
        EventType.EV_EFI_BOOT_SERVICES_APPLICATION,
        EventType.EV_EFI_BOOT_SERVICES_DRIVER,
        EventType.EV_EFI_RUNTIME_SERVICES_DRIVER,
        EventType.EV_EFI_PLATFORM_FIRMWARE_BLOB,
        EventType.EV_EFI_PLATFORM_FIRMWARE_BLOB2,
        EventType.EV_POST_CODE,
        EventType.EV_S_CRTM_CONTENTS,
    )
)
"""Events whose digest is of code the log does not carry: a new digest alone is an update.

(EV_S_CRTM_VERSION is not among them: its digest is the hash of its data, so a new
version changes the data, which a digest-only mutation cannot make true.)"""
_UPDATES = 2
_REVOKED = 2
_CORRUPTIONS = ("truncated", "empty", "event_size", "pcr_index", "algorithm")


@cache
def builtin_logs() -> Mapping[str, bytes]:
    """The bundled real event logs, by the class name the generator gives them."""
    data = resources.files("pybb.attestation").joinpath("data")
    return MappingProxyType({name: data.joinpath(f).read_bytes() for name, f in _BUILTIN.items()})


def builtin_classes() -> dict[str, DeviceClass]:
    """The device classes enrolled from the bundled logs, with the generator's policy."""
    return {name: base.device_class for name, base in _bases().items()}


def _payload_digests(banks: tuple[str, ...], payload: str) -> dict[str, bytes]:
    """The digests, in every bank, of a stand-in component image named ``payload``."""
    digests = {}
    for bank in banks:
        hasher = hash_constructor(bank)
        assert hasher is not None
        digests[bank] = hasher(payload.encode()).digest()
    return digests


@dataclass(frozen=True)
class _Base:
    """One class's golden log and what the generator needs to mutate it."""

    name: str
    data: bytes
    log: EventLog
    golden: PcrValues
    device_class: DeviceClass
    updatable: tuple[Event, ...]
    measured: tuple[Event, ...]
    secure_boot: Event | None

    def update(self, event: Event, k: int) -> dict[str, bytes]:
        return _payload_digests(self.log.banks, f"{self.name}/event-{event.index}/update-{k}")

    def revoked(self, event: Event, k: int) -> dict[str, bytes]:
        return _payload_digests(self.log.banks, f"{self.name}/event-{event.index}/revoked-{k}")


@cache
def _bases() -> Mapping[str, _Base]:
    return MappingProxyType({name: _enroll(name, data) for name, data in builtin_logs().items()})


def _enroll(name: str, data: bytes) -> _Base:
    log = parse_event_log(data)
    plain = DeviceClass.from_log(name, log)
    covered = set(plain.policy.pcrs)
    measured = tuple(e for e in log.events if e.measured and e.pcr_index in covered)
    updatable = tuple(e for e in measured if e.event_type in _UPDATABLE) or measured[:2]
    sb_event = next(
        (
            e
            for e in measured
            if e.event_type == EventType.EV_EFI_VARIABLE_DRIVER_CONFIG
            and e.label.startswith("SecureBoot ")
        ),
        None,
    )
    base = _Base(name, data, log, replay(log), plain, updatable, measured, sb_event)
    bank = plain.policy.bank
    allowed: dict[Slot, set[bytes]] = {}
    for event in updatable:
        slot = Slot(event.pcr_index, event.type_name, event.label)  # sanctioned there only
        for k in range(_UPDATES):
            allowed.setdefault(slot, set()).add(base.update(event, k)[bank])
    denied = {base.revoked(e, 0)[bank] for e in updatable[:_REVOKED]}
    device_class = DeviceClass.from_log(name, log, allowed=allowed, denied=denied)
    return replace(base, device_class=device_class)


@dataclass(frozen=True, slots=True)
class _Spec:
    device: str
    base: str
    kind: str


def generate_fleet(
    n: int, *, seed: int = 0, mix: Mapping[str, float] | None = None, name: str | None = None
) -> Fleet:
    """A fleet of ``n`` devices made from the bundled real logs, with ground truth.

    Args:
        n: How many devices.
        seed: Everything follows from it: the same ``n`` and seed give the same fleet.
        mix: The share of each kind (see :data:`TRUTH_KINDS`); default :data:`DEFAULT_MIX`.
        name: The fleet's name (default ``demo-<n>-seed-<seed>``).

    Raises:
        ValueError: ``n`` is negative or ``mix`` names an unknown kind.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    shares = dict(DEFAULT_MIX if mix is None else mix)
    unknown = set(shares) - set(TRUTH_KINDS)
    if unknown or not any(v > 0 for v in shares.values()):
        raise ValueError(
            f"mix must give positive shares to kinds among {TRUTH_KINDS}, got {shares!r}"
        )
    bases = _bases()
    specs = _specs(n, seed, shares, bases)
    by_device = {spec.device: spec for spec in specs}
    built: dict[str, Evidence] = {}

    def make(device: str) -> tuple[Evidence, GroundTruth]:
        spec = by_device[device]
        evidence, truth = _make(spec, seed, bases[spec.base])
        if len(built) > 1024:  # the run reads each device about twice, close together
            built.clear()
        built[device] = evidence
        lazy.remember(device, truth)
        return evidence, truth

    def load(device: str) -> Evidence:
        found = built.get(device)
        return make(device)[0] if found is None else found

    lazy = _LazyTruth(by_device, lambda device: make(device)[1])
    classes = {name: base.device_class for name, base in bases.items()}
    mix_text = ",".join(f"{k}={shares[k]}" for k in sorted(shares))
    return Fleet(
        name or f"demo-{n}-seed-{seed}",
        classes,
        tuple(by_device),
        load,
        lazy,
        _fingerprint(classes, tuple(by_device), f"generated/{n}/{seed}/{mix_text}/signed"),
        lambda device: by_device[device].base,
        _ledger(by_device, seed),
    )


# -- signed quotes -----------------------------------------------------------------------------

_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _derived(*parts: object) -> bytes:
    return hashlib.sha256("/".join(map(str, parts)).encode()).digest()


@cache
def _ak(seed: int, device: str, owner: str = "ak") -> ec.EllipticCurvePrivateKey:
    """The device's AK (or, ``owner="attacker"``, someone else's key), from the seed."""
    secret = int.from_bytes(_derived(seed, device, owner), "big") % (_P256_ORDER - 1) + 1
    return ec.derive_private_key(secret, ec.SECP256R1())


def _nonce(seed: int, device: str) -> bytes:
    return _derived(seed, device, "nonce")


def _sign(seed: int, spec: _Spec, quote: PcrValues) -> SignedQuote:
    """The quote the device's TPM returns: TPMS_ATTEST over ``quote``, signed ECDSA-SHA256."""
    selection = tuple(PcrSelection(bank, tuple(sorted(pcrs))) for bank, pcrs in quote.items())
    digest = pcr_digest(selection, quote, "sha256")
    assert digest is not None
    clock = ClockInfo(
        1_000_000 + int.from_bytes(_derived(seed, spec.device)[:3], "big"), 7, 0, True
    )
    attest = TpmsAttest(
        b"\x00\x0b" + _derived(seed, spec.device, "name"),
        _nonce(seed, spec.device),
        clock,
        0x2019102300163636,
        selection,
        digest,
    )
    message = encode_tpms_attest(attest)
    owner = "attacker" if spec.kind == "bad_signature" else "ak"
    der = _ak(seed, spec.device, owner).sign(
        message, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
    )
    r, s = decode_dss_signature(der)
    return SignedQuote(message, encode_tpmt_signature(TpmtSignature(ALG_ECDSA, "sha256", r=r, s=s)))


def _ledger(specs: Mapping[str, _Spec], seed: int) -> QuoteLedger:
    """The registry snapshot the generated quotes are checked against."""

    def ak_of(device: str) -> AttestationKey | None:
        spec = specs.get(device)
        if spec is None or spec.kind == "unknown_ak":
            return None
        return AttestationKey(_ak(seed, device).public_key())

    def nonce_state(device: str, nonce: bytes) -> str:
        spec = specs.get(device)
        if spec is None or nonce != _nonce(seed, device):
            return "unknown"
        return "spent" if spec.kind == "replayed_nonce" else "issued"

    def materialize(devices: Iterable[str]) -> dict[str, Any]:
        chosen = [d for d in devices if d in specs]
        aks = {d: key.pem for d in chosen if (key := ak_of(d)) is not None}
        nonces = {d: _nonce(seed, d).hex() for d in chosen}
        spent = sorted(nonces[d] for d in chosen if specs[d].kind == "replayed_nonce")
        return {"aks": aks, "nonces": nonces, "spent": spent}

    return QuoteLedger(ak_of, nonce_state, materialize)


class _LazyTruth(Mapping[str, GroundTruth]):
    """Ground truth built on first read (a device's truth needs its mutation)."""

    def __init__(self, specs: Mapping[str, _Spec], build: Callable[[str], GroundTruth]) -> None:
        self._specs = specs
        self._build = build
        self._known: dict[str, GroundTruth] = {}

    def __getitem__(self, device: str) -> GroundTruth:
        if device not in self._specs:
            raise KeyError(device)
        found = self._known.get(device)
        if found is None:
            found = self._known[device] = self._build(device)
        return found

    def remember(self, device: str, truth: GroundTruth) -> None:
        self._known[device] = truth

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def _specs(
    n: int, seed: int, shares: Mapping[str, float], bases: Mapping[str, _Base]
) -> list[_Spec]:
    rng = random.Random(seed)
    names = sorted(bases)
    secure = [name for name in names if bases[name].device_class.policy.secure_boot_required]
    needs_secure = ("secure_boot_off", "forged_secure_boot")
    kinds = [k for k in TRUTH_KINDS if shares.get(k, 0) > 0 and (k not in needs_secure or secure)]
    weights = [shares[k] for k in kinds]
    width = max(5, len(str(max(n - 1, 0))))
    specs = []
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        base = rng.choice(secure if kind in needs_secure else names)
        specs.append(_Spec(f"dev-{i:0{width}d}", base, kind))
    return specs


# -- making one device -------------------------------------------------------------------------


def _make(spec: _Spec, seed: int, base: _Base) -> tuple[Evidence, GroundTruth]:
    rng = random.Random(f"{seed}/{spec.device}/{spec.kind}")
    maker = _MAKERS[spec.kind]
    log, quote, truth = maker(base, rng)
    return Evidence(spec.device, base.name, log, quote, signed=_sign(seed, spec, quote)), truth


_Made = tuple[bytes, PcrValues, GroundTruth]


def _clean(base: _Base, rng: random.Random) -> _Made:
    return base.data, base.golden, GroundTruth("clean", DeviceOutcome.PASSED)


def _sanctioned(base: _Base, rng: random.Random) -> _Made:
    event = rng.choice(base.updatable)
    k = rng.randrange(_UPDATES)
    log, quote = _with_digests(base, event, base.update(event, k))
    detail = f"event {event.index} ({event.type_name}, PCR {event.pcr_index}) -> update {k}"
    truth = GroundTruth(
        "sanctioned_update", DeviceOutcome.REPAIRED, Reason.SANCTIONED_UPDATE, detail
    )
    return log, quote, truth


def _tampered(base: _Base, rng: random.Random) -> _Made:
    if rng.random() < 0.2:
        event = rng.choice(base.updatable[:_REVOKED])
        digests = base.revoked(event, 0)
        reason, what = Reason.DENIED_COMPONENT, "a revoked (denied) version"
    else:
        # A replaced component is code (an image, a firmware volume) whose digest is not
        # of the event data; forging the digest of a variable or a command is a lie about
        # the data instead, which forged_secure_boot plays.
        anything = [
            e
            for e in base.measured
            if e is not base.secure_boot and e.event_type != EventType.EV_SEPARATOR
        ]
        event = rng.choice([e for e in anything if not check_event(e).verified] or anything)
        digests = {bank: rng.randbytes(len(d)) for bank, d in event.digests.items()}
        reason, what = Reason.TAMPERED_COMPONENT, "an unknown digest"
        if check_event(event).verified:  # the digest no longer hashes its data: a lie
            reason = Reason.EVENT_DATA_MISMATCH
    log, quote = _with_digests(base, event, digests)
    detail = f"event {event.index} ({event.type_name}, PCR {event.pcr_index}) -> {what}"
    return log, quote, GroundTruth("tampered_component", DeviceOutcome.ESCALATED, reason, detail)


def _mismatch(base: _Base, rng: random.Random) -> _Made:
    event = rng.choice(base.measured)
    reason = Reason.LOG_QUOTE_MISMATCH
    if rng.random() < 0.5:
        digests = {bank: rng.randbytes(len(d)) for bank, d in event.digests.items()}
        log, _ = _with_digests(base, event, digests, quote=False)
        detail = f"event {event.index} (PCR {event.pcr_index}) edited in the log; quote clean"
        return (
            log,
            base.golden,
            GroundTruth("log_quote_mismatch", DeviceOutcome.ESCALATED, reason, detail),
        )
    pcr = event.pcr_index
    quote = {
        bank: {**values, pcr: rng.randbytes(len(values[pcr]))} if pcr in values else values
        for bank, values in base.golden.items()
    }
    detail = f"quoted PCR {pcr} forged; log clean"
    return (
        base.data,
        quote,
        GroundTruth("log_quote_mismatch", DeviceOutcome.ESCALATED, reason, detail),
    )


def _secure_boot_off(base: _Base, rng: random.Random) -> _Made:
    patched, quote, event = _measured_off(base)
    detail = f"SecureBoot variable (event {event.index}) measured as 0"
    truth = GroundTruth("secure_boot_off", DeviceOutcome.ESCALATED, Reason.SECURE_BOOT_OFF, detail)
    return patched, quote, truth


def _measured_off(base: _Base) -> tuple[bytes, PcrValues, Event]:
    """The log of the golden machine booted with Secure Boot off, and its quote."""
    event = base.secure_boot
    assert event is not None
    data = event.data[:-1] + b"\x00"
    digests = {}
    for bank in event.digests:
        hasher = hash_constructor(bank)
        assert hasher is not None
        digests[bank] = hasher(data).digest()
    log = bytearray(base.data)
    data_at = _data_offset(base.log, event)
    log[data_at + len(data) - 1] = 0
    patched, quote = _with_digests(base, replace(event, data=data), digests, data=bytes(log))
    return patched, quote, event


def _forged_secure_boot(base: _Base, rng: random.Random) -> _Made:
    # The machine booted with Secure Boot off (its TPM extended the digest of a 0);
    # the log it sends says 1 over that digest. Only the event data betrays it.
    patched, quote, event = _measured_off(base)
    log = bytearray(patched)
    log[_data_offset(base.log, event) + len(event.data) - 1] = 1
    detail = f"SecureBoot variable (event {event.index}) measured as 0, its data forged to 1"
    truth = GroundTruth(
        "forged_secure_boot", DeviceOutcome.ESCALATED, Reason.EVENT_DATA_MISMATCH, detail
    )
    return bytes(log), quote, truth


def _corrupt(base: _Base, rng: random.Random) -> _Made:
    choices = [
        c for c in _CORRUPTIONS if c != "algorithm" or base.log.format is LogFormat.CRYPTO_AGILE
    ]
    how = rng.choice(choices)
    first = 1 if base.log.format is LogFormat.CRYPTO_AGILE else 0
    event = rng.choice(base.log.events[first:])
    log = bytearray(base.data)
    if how == "empty":
        log = bytearray()
    elif how == "truncated":
        end = _event_end(base.log, event)
        del log[rng.randrange(event.offset + 1, end) :]
    elif how == "event_size":
        struct.pack_into("<I", log, _data_offset(base.log, event) - 4, 0xFFFFFF00)
    elif how == "pcr_index":
        struct.pack_into("<I", log, event.offset, 0x100 + rng.randrange(0x10000))
    else:
        struct.pack_into("<H", log, event.offset + 12, 0x00FF)
    quote = base.golden
    if rng.random() < 0.5:
        pcr = rng.choice(base.device_class.policy.pcrs)
        quote = {b: {**v, pcr: rng.randbytes(BANK_SIZES[b])} for b, v in quote.items()}
    detail = f"{how} at event {event.index} (byte offset {event.offset})"
    truth = GroundTruth("corrupt_log", DeviceOutcome.ESCALATED, Reason.CORRUPT_LOG, detail)
    return bytes(log), quote, truth


def _quote_flaw(kind: str) -> Callable[[_Base, random.Random], _Made]:
    reason = {
        "replayed_nonce": Reason.NONCE_REUSED,
        "bad_signature": Reason.BAD_SIGNATURE,
        "unknown_ak": Reason.UNKNOWN_AK,
    }[kind]
    detail = {
        "replayed_nonce": "a clean quote over a nonce an earlier attestation spent",
        "bad_signature": "a clean quote signed by another key than the enrolled AK",
        "unknown_ak": "a clean quote from an AK that was never enrolled",
    }[kind]

    def make(base: _Base, rng: random.Random) -> _Made:
        return base.data, base.golden, GroundTruth(kind, DeviceOutcome.ESCALATED, reason, detail)

    return make


_MAKERS = {
    "clean": _clean,
    "sanctioned_update": _sanctioned,
    "tampered_component": _tampered,
    "log_quote_mismatch": _mismatch,
    "secure_boot_off": _secure_boot_off,
    "corrupt_log": _corrupt,
    **{kind: _quote_flaw(kind) for kind in QUOTE_KINDS},
    "forged_secure_boot": _forged_secure_boot,
}


# -- editing a log's bytes ----------------------------------------------------------------------


def _digest_offsets(log: EventLog, event: Event) -> dict[str, int]:
    """Where each of an event's digests lies in the log."""
    if log.format is LogFormat.SHA1:
        return {"sha1": event.offset + 8}
    offsets = {}
    position = event.offset + 12
    for bank, digest in event.digests.items():
        offsets[bank] = position + 2
        position += 2 + len(digest)
    return offsets


def _data_offset(log: EventLog, event: Event) -> int:
    if log.format is LogFormat.SHA1:
        return event.offset + 32
    return event.offset + 12 + sum(2 + len(d) for d in event.digests.values()) + 4


def _event_end(log: EventLog, event: Event) -> int:
    return _data_offset(log, event) + len(event.data)


def _with_digests(
    base: _Base,
    event: Event,
    digests: Mapping[str, bytes],
    *,
    quote: bool = True,
    data: bytes | None = None,
) -> tuple[bytes, PcrValues]:
    """The log with ``event``'s digests replaced, and the quote that log replays to."""
    log = bytearray(base.data if data is None else data)
    for bank, offset in _digest_offsets(base.log, event).items():
        log[offset : offset + len(digests[bank])] = digests[bank]
    if not quote:
        return bytes(log), base.golden
    changed = replace(event, digests=MappingProxyType(dict(digests)))
    return bytes(log), _requote(base, changed)


def _requote(base: _Base, changed: Event) -> PcrValues:
    """The golden quote with ``changed.pcr_index`` replayed with ``changed`` swapped in."""
    pcr = changed.pcr_index
    replayer = Replayer(base.log.algorithms)
    for event in base.log.events:
        if event.pcr_index == pcr:
            replayer.feed(changed if event.index == changed.index else event)
    values = replayer.pcrs()
    return {
        bank: {**golden, pcr: values[bank][pcr]} if bank in values else golden
        for bank, golden in base.golden.items()
    }

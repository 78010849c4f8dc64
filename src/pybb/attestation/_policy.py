"""Device classes: reference values (golden PCRs), a reference manifest and a policy.

A class is usually enrolled from the event log of a known-good machine
(:meth:`DeviceClass.from_log`): its replay gives the reference values, its measured
events the manifest of expected boot components, and its Secure Boot state the default
of ``secure_boot_required``. Sanctioned updates extend :attr:`Policy.allowed`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pybb.attestation._eventlog import (
    MAX_PCR_INDEX,
    BootComponent,
    EventLogSource,
    load_event_log,
)
from pybb.attestation._fleet_errors import PolicyError
from pybb.attestation._jsonfile import (
    NAME,
    ErrorFactory,
    Fields,
    parse_json,
    read_capped,
    show,
)
from pybb.attestation._replay import replay
from pybb.attestation._slots import Allowlist, Slot
from pybb.attestation._tcg import KNOWN_ALGORITHMS

__all__ = ["BANK_SIZES", "MAX_CLASS_FILE_SIZE", "DeviceClass", "Policy", "load_class"]

BANK_SIZES: Mapping[str, int] = MappingProxyType(
    {alg.name: alg.digest_size for alg in KNOWN_ALGORITHMS.values()}
)
"""Digest size per bank name."""

MAX_CLASS_FILE_SIZE = 16 * 1024 * 1024
"""The largest device-class file read."""

_MAX_DIGESTS = 100_000
_MAX_SLOTS = 10_000
_MAX_COMPONENTS = 100_000
_DIGEST_SIZES = frozenset(BANK_SIZES.values())


def _policy_error(path: str | None, prefix: str) -> ErrorFactory:
    def build(problem: str, field_name: str | None) -> PolicyError:
        where = ".".join(part for part in (prefix, field_name) if part)
        return PolicyError(problem, path=path, field=where or None)

    return build


@dataclass(frozen=True, slots=True)
class Policy:
    """What a device class allows.

    Attributes:
        bank: The PCR bank the policy, the reference values and the manifest use.
        pcrs: The PCRs the policy covers, ascending: one entry component each.
        allowed: The digests allowed beyond the manifest's (sanctioned updates), each
            bound to its :class:`Slot` (PCR, event type, label). Pass a mapping whose
            keys are slots, slot keys (``"0:EV_EFI_PLATFORM_FIRMWARE_BLOB"``) or bare PCR
            indices (an entry written before slots: see :mod:`._slots`); it is kept
            as an :class:`Allowlist`.
        denied: Digests that must never be measured (in any bank, in any place).
        secure_boot_required: Whether the log must measure Secure Boot as enabled.
        denied_at: Digests refused in one place, each named by its :class:`Slot`
            (``"4:EV_EFI_BOOT_SERVICES_APPLICATION"``: a revoked boot loader). The
            denial binds the PCR, which the quote covers; the event type and label
            say where the digest was found and are named in the finding, but a log
            cannot slip past a denial by retyping its event (what the quote does not
            cover decides nothing), so they do not narrow it.

    Raises:
        PolicyError: A value that cannot be used (unknown bank, PCR out of range,
            digest of the wrong size).
    """

    bank: str
    pcrs: tuple[int, ...]
    allowed: Allowlist = field(default_factory=Allowlist)
    denied: frozenset[bytes] = frozenset()
    secure_boot_required: bool = False
    denied_at: Allowlist = field(default_factory=Allowlist)

    def __post_init__(self) -> None:
        size = BANK_SIZES.get(self.bank) if isinstance(self.bank, str) else None
        if size is None:
            raise PolicyError(
                f"bank {show(self.bank)} is unknown; use one of {', '.join(BANK_SIZES)}",
                field="policy.bank",
            )
        object.__setattr__(self, "pcrs", _pcrs(self.pcrs))
        object.__setattr__(self, "allowed", _slotted(self.allowed, {size}, "allow"))
        object.__setattr__(self, "denied", frozenset(_digests(self.denied, _DIGEST_SIZES)))
        object.__setattr__(self, "denied_at", _slotted(self.denied_at, _DIGEST_SIZES, "deny_at"))
        if not isinstance(self.secure_boot_required, bool):
            raise PolicyError("must be true or false", field="policy.secure_boot_required")

    @property
    def digest_size(self) -> int:
        """The digest size of :attr:`bank`."""
        return BANK_SIZES[self.bank]

    def allows(self, pcr: int, digest: bytes) -> bool:
        """Whether ``digest`` is allowed somewhere in ``pcr`` (judging uses the slots)."""
        return digest in self.allowed.in_pcr(pcr)

    def with_allowed(self, slot: Slot | int, digest: bytes) -> Policy:
        """This policy with ``digest`` allowed in ``slot`` too (a bare PCR: see :mod:`._slots`)."""
        allowed = self.allowed.with_digest(Slot.of(slot), digest)
        return replace(self, allowed=allowed)

    def denies(self, pcr: int, digest: bytes) -> bool:
        """Whether ``digest`` is refused when measured into ``pcr``."""
        return digest in self.denied or digest in self.denied_at.in_pcr(pcr)

    def to_json(self) -> dict[str, Any]:
        """The policy's JSON object, digests sorted."""
        return {
            "bank": self.bank,
            "pcrs": list(self.pcrs),
            "allow": self.allowed.to_json(),
            "deny": sorted(d.hex() for d in self.denied),
            "secure_boot_required": self.secure_boot_required,
            # Only when there are any, so class files written before keep their bytes.
            **({"deny_at": self.denied_at.to_json()} if self.denied_at else {}),
        }

    @classmethod
    def from_json(cls, data: object, *, path: str | None = None) -> Policy:
        """Read and check a policy object (the ``policy`` field of a class file).

        Raises:
            PolicyError: Naming the file and field at fault.
        """
        fields = Fields(_policy_error(path, "policy"))
        optional = ("allow", "deny", "deny_at", "secure_boot_required")
        obj = fields.obj(data, None, ("bank", "pcrs"), optional)
        bank = fields.string(obj["bank"], "bank", limit=64)
        size = BANK_SIZES.get(bank)
        if size is None:
            fields.fail("bank", f"{show(bank)} is unknown; use one of {', '.join(BANK_SIZES)}")
        pcrs = fields.array(obj["pcrs"], "pcrs", limit=MAX_PCR_INDEX + 1)
        covered = [fields.integer(p, f"pcrs.{i}", 0, MAX_PCR_INDEX) for i, p in enumerate(pcrs)]
        if not covered or len(set(covered)) != len(covered):
            fields.fail("pcrs", "must list each covered PCR once, at least one")
        allowed = _slots_of(
            fields, obj.get("allow", {}), "allow", lambda f, v, where: f.digest(v, where, size)
        )
        deny = fields.array(obj.get("deny", []), "deny", limit=_MAX_DIGESTS)
        denied = frozenset(_any_digest(fields, v, f"deny.{i}") for i, v in enumerate(deny))
        denied_at = _slots_of(fields, obj.get("deny_at", {}), "deny_at", _any_digest)
        required = fields.boolean(obj.get("secure_boot_required", False), "secure_boot_required")
        return cls(bank, tuple(covered), allowed, denied, required, denied_at)


def _slots_of(
    fields: Fields, value: object, name: str, digest: Callable[[Fields, object, str], bytes]
) -> Allowlist:
    """A ``{slot key: [hex digest, ...]}`` object of a class file as digests per slot."""
    entries = fields.mapping(value, name, limit=_MAX_SLOTS)
    found: dict[Slot, frozenset[bytes]] = {}
    for key, values in entries.items():
        try:
            slot = Slot.from_key(key)
        except ValueError as exc:
            fields.fail(f"{name}.{key[:80]}", str(exc))
        items = fields.array(values, f"{name}.{key}", limit=_MAX_DIGESTS)
        found[slot] = found.get(slot, frozenset()) | frozenset(
            digest(fields, v, f"{name}.{key}.{i}") for i, v in enumerate(items)
        )
    return Allowlist(found)


def _slotted(value: Any, sizes: Iterable[int], name: str) -> Allowlist:
    """``value`` (digests per slot, PCR or slot key) checked, as an :class:`Allowlist`."""
    found: dict[Slot, frozenset[bytes]] = {}
    for key, digests in dict(value).items():
        try:
            slot = Slot.of(key)
        except ValueError as exc:
            raise PolicyError(str(exc), field=f"policy.{name}") from None
        found[slot] = frozenset(_digests(digests, set(sizes), f"policy.{name}.{slot.key}"))
    return Allowlist(found)


def _allowlist(entries: Mapping[Any, Iterable[bytes]]) -> Allowlist:
    try:
        return Allowlist({key: frozenset(digests) for key, digests in entries.items()})
    except ValueError as exc:
        raise PolicyError(str(exc), field="policy.allow") from None


def _any_digest(fields: Fields, value: object, name: str) -> bytes:
    text = fields.string(value, name, limit=1024)
    if len(text) // 2 not in _DIGEST_SIZES or len(text) % 2:
        fields.fail(name, f"{show(text)} is not a digest of a known bank")
    return fields.digest(text, name, len(text) // 2)


def _pcrs(pcrs: Iterable[object], name: str = "policy.pcrs") -> tuple[int, ...]:
    try:
        values = tuple(pcrs)
    except TypeError:
        raise PolicyError(f"{show(pcrs)} is not a list of PCR indices", field=name) from None
    for pcr in values:
        if isinstance(pcr, bool) or not isinstance(pcr, int) or not 0 <= pcr <= MAX_PCR_INDEX:
            raise PolicyError(f"{show(pcr)} is not a PCR index 0..{MAX_PCR_INDEX}", field=name)
    if not values:
        raise PolicyError("covers no PCR; list at least one", field=name)
    return tuple(sorted({int(pcr) for pcr in values}))  # type: ignore[call-overload]


def _digests(
    values: Iterable[object], sizes: set[int] | frozenset[int], name: str = ""
) -> set[bytes]:
    found: set[bytes] = set()
    for value in values:
        if not isinstance(value, bytes) or len(value) not in sizes:
            raise PolicyError(
                f"{show(value)} is not a digest of {sorted(sizes)} bytes",
                field=name or "policy.deny",
            )
        found.add(value)
    return found


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A kind of device: its reference values, reference manifest and policy.

    Attributes:
        name: The class name evidence refers to.
        policy: What the class allows.
        reference: The golden PCR values in ``policy.bank``, one per covered PCR.
        manifest: The expected boot components (``policy.bank`` digests), in log order.

    Raises:
        PolicyError: A name, reference value or component that cannot be used.
    """

    name: str
    policy: Policy
    reference: Mapping[int, bytes]
    manifest: tuple[BootComponent, ...] = ()
    _by_pcr: Mapping[int, tuple[BootComponent, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise PolicyError(f"{show(self.name)} is not a class name", field="name")
        if not isinstance(self.policy, Policy):
            raise PolicyError(f"must be a Policy, not {show(self.policy)}", field="policy")
        size = self.policy.digest_size
        reference: dict[int, bytes] = {}
        for pcr in self.policy.pcrs:
            value = self.reference.get(pcr)
            if not isinstance(value, bytes) or len(value) != size:
                raise PolicyError(
                    f"needs a {size}-byte {self.policy.bank} value for covered PCR {pcr}, "
                    f"has {show(value)}",
                    field=f"reference.{pcr}",
                )
            reference[pcr] = value
        object.__setattr__(self, "reference", MappingProxyType(reference))
        object.__setattr__(self, "manifest", tuple(self.manifest))
        by_pcr: dict[int, list[BootComponent]] = {}
        for index, component in enumerate(self.manifest):
            digest = component.digests.get(self.policy.bank)
            if not isinstance(digest, bytes) or len(digest) != size:
                raise PolicyError(
                    f"component {show(component.label)} has no {self.policy.bank} digest",
                    field=f"manifest.{index}",
                )
            by_pcr.setdefault(component.pcr_index, []).append(component)
        object.__setattr__(
            self, "_by_pcr", MappingProxyType({p: tuple(c) for p, c in by_pcr.items()})
        )

    def components(self, pcr: int) -> tuple[BootComponent, ...]:
        """The manifest's components of ``pcr``, in log order."""
        return self._by_pcr.get(pcr, ())

    @classmethod
    def from_log(
        cls,
        name: str,
        log: EventLogSource,
        *,
        bank: str | None = None,
        pcrs: Iterable[int] | None = None,
        allowed: Mapping[Any, Iterable[bytes]] | None = None,
        denied: Iterable[bytes] = (),
        secure_boot_required: bool | None = None,
    ) -> DeviceClass:
        """Enroll a class from the event log of a known-good machine.

        Args:
            name: The class name.
            log: The golden machine's event log (path, bytes or parsed).
            bank: The bank to use (default: ``sha256`` if the log has it, else its first).
            pcrs: The PCRs to cover (default: every PCR the log extends in ``bank``).
            allowed: Digests allowed beyond the log's, per :class:`Slot` (or slot key,
                or bare PCR index: any event type that PCR's manifest holds).
            denied: Digests never allowed.
            secure_boot_required: Default: whether the golden log measured Secure Boot on.

        Raises:
            EventLogError: The log cannot be read.
            PolicyError: The log does not carry ``bank``, or a value cannot be used.
        """
        parsed = load_event_log(log)
        values = replay(parsed)
        chosen = bank or ("sha256" if "sha256" in values else next(iter(values), "sha256"))
        if chosen not in values:
            raise PolicyError(
                f"the golden log carries no {chosen} values (it has {', '.join(values)})",
                field="policy.bank",
            )
        covered = tuple(sorted(values[chosen] if pcrs is None else set(pcrs)))
        zero = bytes(BANK_SIZES[chosen])
        policy = Policy(
            chosen,
            covered,
            _allowlist(allowed or {}),
            frozenset(denied),
            parsed.secure_boot is True if secure_boot_required is None else secure_boot_required,
        )
        manifest = tuple(
            BootComponent(
                c.pcr_index, c.type_name, c.label, {chosen: c.digests[chosen]}, c.event_index
            )
            for c in parsed.boot_components()
            if c.pcr_index in covered and chosen in c.digests
        )
        reference = {p: values[chosen].get(p, zero) for p in covered}
        return cls(name, policy, reference, manifest)

    def with_policy(self, policy: Policy) -> DeviceClass:
        """This class under another policy (same bank and PCRs)."""
        return DeviceClass(self.name, policy, self.reference, self.manifest)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the class's canonical JSON."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The class file's JSON object."""
        bank = self.policy.bank
        return {
            "name": self.name,
            "policy": self.policy.to_json(),
            "reference": {str(p): v.hex() for p, v in self.reference.items()},
            "manifest": [
                {
                    "event": c.event_index,
                    "pcr": c.pcr_index,
                    "type": c.type_name,
                    "label": c.label,
                    "digest": c.digests[bank].hex(),
                }
                for c in self.manifest
            ],
        }

    @classmethod
    def from_json(cls, data: object, *, path: str | None = None) -> DeviceClass:
        """Read and check a class object.

        Raises:
            PolicyError: Naming the file and field at fault.
        """
        fields = Fields(_policy_error(path, ""))
        obj = fields.obj(data, None, ("name", "policy", "reference"), ("manifest",))
        name = fields.name(obj["name"], "name")
        policy = Policy.from_json(obj["policy"], path=path)
        size = policy.digest_size
        ref = fields.mapping(obj["reference"], "reference", limit=MAX_PCR_INDEX + 1)
        reference = {
            fields.pcr(k, f"reference.{k}", MAX_PCR_INDEX): fields.digest(v, f"reference.{k}", size)
            for k, v in ref.items()
        }
        for pcr in policy.pcrs:
            if pcr not in reference:
                fields.fail(f"reference.{pcr}", f"is missing; covered PCR {pcr} needs a value")
        items = fields.array(obj.get("manifest", []), "manifest", limit=_MAX_COMPONENTS)
        manifest = tuple(
            _component(fields, item, f"manifest.{i}", policy.bank, size)
            for i, item in enumerate(items)
        )
        try:
            return cls(name, policy, reference, manifest)
        except PolicyError as exc:
            raise PolicyError(exc.problem, path=path, field=exc.field) from None


def _component(fields: Fields, item: object, name: str, bank: str, size: int) -> BootComponent:
    obj = fields.obj(item, name, ("pcr", "type", "label", "digest"), ("event",))
    return BootComponent(
        fields.integer(obj["pcr"], f"{name}.pcr", 0, MAX_PCR_INDEX),
        fields.string(obj["type"], f"{name}.type", limit=64),
        fields.string(obj["label"], f"{name}.label", limit=MAX_CLASS_FILE_SIZE),
        MappingProxyType({bank: fields.digest(obj["digest"], f"{name}.digest", size)}),
        fields.integer(obj.get("event", 0), f"{name}.event", 0, 2**31),
    )


def load_class(path: Path, *, root: Path | None = None) -> DeviceClass:
    """Read and check a device-class file.

    Raises:
        PolicyError: Naming the file and field at fault.
    """
    shown = str(path.relative_to(root)) if root is not None else str(path)

    def error(problem: str, field_name: str | None) -> PolicyError:
        return PolicyError(problem, path=shown, field=field_name)

    return DeviceClass.from_json(
        parse_json(read_capped(path, MAX_CLASS_FILE_SIZE, error), error), path=shown
    )

"""Fleets: device classes, the devices to attest, and (when known) their ground truth.

A fleet folder on disk::

    fleet/
      classes/<class>.json     a DeviceClass each (reference values, manifest, policy)
      devices/<device>.json    an Evidence file each; the file name is the device id
      logs/...                 event logs the evidence files name (any layout inside)
      truth.json               optional: {device: {"kind", "outcome", "reason", "detail"}}
      registry.json            optional: the AKs, issued and spent nonces the devices'
                               signed quotes are checked against (``QuoteLedger``)

:func:`load_fleet` reads the classes and the truth at once (a bad one refuses the whole
fleet: :class:`PolicyError` / :class:`FleetError`) and each device's evidence only when
the run reaches it (a bad one is that device's :class:`EvidenceError`: it is escalated
and the rest of the fleet runs on).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pybb.attestation._evidence import (
    EVENT_LOG_CAP,
    MAX_EVIDENCE_FILE_SIZE,
    Evidence,
    load_evidence,
)
from pybb.attestation._fleet_errors import EvidenceError, FleetError, PolicyError
from pybb.attestation._jsonfile import NAME, Fields, parse_json, read_capped, relative_to_root, show
from pybb.attestation._policy import DeviceClass, load_class
from pybb.attestation._report import DeviceOutcome, GroundTruth, Reason
from pybb.attestation._signed import QuoteLedger

__all__ = ["Fleet", "load_fleet", "save_fleet"]

_MAX_TRUTH_FILE_SIZE = 64 * 1024 * 1024

Loader = Callable[[str], Evidence]
"""Loads one device's evidence by its id; raises :class:`EvidenceError`."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """The devices to attest, their classes, and what is known about them.

    Build one with :func:`load_fleet` (a folder), :func:`generate_fleet` (from the
    bundled real logs, with ground truth) or :meth:`Fleet.of` (evidence in memory).

    Attributes:
        name: A short name (used in the default board id).
        classes: The device classes by name.
        devices: The device ids (entry keys), in the order they are attested.
        loader: Loads one device's evidence; raises :class:`EvidenceError`.
        truth: Ground truth by device, when known.
        fingerprint: Identifies the fleet's content; a board holds one fleet.
        classifier: Tells a device's class name cheaply (without its log), if it can.
        ledger: When set, every device's signed quote is checked against it on load
            (a failing one is that device's :class:`QuoteError`).
        reread: When set, ``reread(device, nonce)`` reads the device's evidence from its
            source again, for re-measuring (an EVIDENCE_DIR: a new quote is verified, and
            its nonce spent, only now). Whether the source holds new evidence (with
            ``nonce``, a quote over it); if so, :meth:`load` gives it from then on.
    """

    name: str
    classes: Mapping[str, DeviceClass]
    devices: tuple[str, ...]
    loader: Loader = field(repr=False, compare=False)
    truth: Mapping[str, GroundTruth] = field(default_factory=dict, repr=False)
    fingerprint: str = ""
    classifier: Callable[[str], str | None] | None = field(default=None, repr=False, compare=False)
    ledger: QuoteLedger | None = field(default=None, repr=False, compare=False)
    reread: Callable[[str, bytes | None], bool] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise FleetError(f"{show(self.name)} is not a fleet name", field="name")
        object.__setattr__(self, "classes", MappingProxyType(dict(self.classes)))
        object.__setattr__(self, "devices", tuple(self.devices))
        if len(set(self.devices)) != len(self.devices):
            raise FleetError("lists a device twice; device ids must be unique", field="devices")
        if not isinstance(self.truth, Mapping):
            raise FleetError(f"truth must be a mapping, not {show(self.truth)}", field="truth")
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", _fingerprint(self.classes, self.devices, ""))

    def load(self, device: str, *, verify_quote: bool = True) -> Evidence:
        """Load and check one device's evidence (and its signed quote, with a ledger).

        Raises:
            EvidenceError: The evidence cannot be used: unreadable or malformed, for
                another device, or naming a class the fleet does not have; or a
                ``QuoteError``: its signed quote was refused (``verify_quote``).
        """
        evidence = self.loader(device)
        if evidence.device != device:
            raise EvidenceError(
                f"names device {show(evidence.device)}, but it is the evidence of {device!r}; "
                "name the file after the device it holds",
                path=evidence.source,
                field="device",
                device=device,
            )
        if evidence.device_class not in self.classes:
            raise EvidenceError(
                f"{show(evidence.device_class)} is not a class of this fleet "
                f"(it has {', '.join(sorted(self.classes)) or 'none'})",
                path=evidence.source,
                field="class",
                device=device,
            )
        if verify_quote and self.ledger is not None:
            self.ledger.check(device, evidence.signed, evidence.quote)
        return evidence

    def device_class(self, device: str) -> str | None:
        """The class name of ``device``, or ``None`` if its evidence cannot say."""
        if self.classifier is not None:
            return self.classifier(device)
        try:
            return self.load(device).device_class
        except EvidenceError:
            return None

    def allowlist(self) -> dict[str, dict[str, list[str]]]:
        """Every class's allowlist as JSON: ``{class: {slot key: [hex digest, ...]}}``."""
        return {name: cls.policy.allowed.to_json() for name, cls in sorted(self.classes.items())}

    @classmethod
    def of(
        cls,
        classes: Iterable[DeviceClass],
        evidence: Iterable[Evidence],
        *,
        truth: Mapping[str, GroundTruth] | None = None,
        name: str = "fleet",
    ) -> Fleet:
        """A fleet of evidence held in memory."""
        by_name = _by_name(classes)
        devices = {e.device: e for e in evidence}
        content = "".join(
            f"{e.device}/{e.device_class}/{hashlib.sha256(e.log).hexdigest()}/{_quote_text(e)}"
            for e in devices.values()
        )

        def load(device: str) -> Evidence:
            return devices[device]

        def classify(device: str) -> str | None:
            return devices[device].device_class

        return cls(
            name,
            by_name,
            tuple(devices),
            load,
            truth or {},
            _fingerprint(by_name, tuple(devices), content),
            classify,
        )


def _quote_text(evidence: Evidence) -> str:
    return json.dumps(evidence.to_json("-")["quote"], sort_keys=True)


def _by_name(classes: Iterable[DeviceClass]) -> dict[str, DeviceClass]:
    by_name: dict[str, DeviceClass] = {}
    for device_class in classes:
        if device_class.name in by_name:
            raise PolicyError(f"two classes are named {device_class.name!r}", field="name")
        by_name[device_class.name] = device_class
    return by_name


def _fingerprint(classes: Mapping[str, DeviceClass], devices: tuple[str, ...], extra: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(classes):
        digest.update(f"{name}:{classes[name].fingerprint}\n".encode())
    digest.update("\n".join(devices).encode())
    digest.update(extra.encode())
    return digest.hexdigest()


# -- folders ---------------------------------------------------------------------------------


def load_fleet(
    folder: str | Path,
    *,
    max_evidence_size: int = MAX_EVIDENCE_FILE_SIZE,
    max_log_size: int = EVENT_LOG_CAP,
) -> Fleet:
    """Open a fleet folder: its classes and truth now, each device's evidence when needed.

    Args:
        folder: The fleet folder.
        max_evidence_size: The largest ``devices/*.json`` read, in bytes.
        max_log_size: The largest event log file read, in bytes.

    Each file's size is checked with ``stat`` before it is read; a device whose file is
    over its cap is escalated ``bad_evidence`` naming the file and the cap, unread.

    Raises:
        FleetError: The folder, or its ``truth.json``, cannot be used.
        PolicyError: A class file cannot be used.
    """
    root = Path(folder)
    for name, cap in (("max_evidence_size", max_evidence_size), ("max_log_size", max_log_size)):
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise FleetError(f"{name}={cap!r} is not a positive number of bytes", field=name)
    if not root.is_dir():
        raise FleetError(f"{show(str(root))} is not a folder", hint="give a fleet folder")
    classes = _by_name(
        load_class(path, root=root) for path in sorted((root / "classes").glob("*.json"))
    )
    if not classes:
        raise FleetError("it has no classes/*.json", path=str(root), hint="add a device class file")
    files = {_device_key(path.name): path for path in sorted((root / "devices").glob("*.json"))}
    truth = _load_truth(root, files)

    def load(device: str) -> Evidence:
        path = files[device]
        shown = path.relative_to(root).as_posix()
        if not NAME.fullmatch(path.stem):
            raise EvidenceError(
                f"the file name {show(path.name)} is not '<device id>.json'", path=shown
            )
        if relative_to_root(root, shown) is None:
            raise EvidenceError("it is a link leading out of the fleet folder", path=shown)
        return load_evidence(path, root=root, max_size=max_evidence_size, log_cap=max_log_size)

    def classify(device: str) -> str | None:
        try:
            data = parse_json(read_capped(files[device], max_evidence_size, _ignore), _ignore)
        except EvidenceError:
            return None
        value = data.get("class") if isinstance(data, dict) else None
        return value if isinstance(value, str) and value in classes else None

    name = re.sub(r"[^A-Za-z0-9._-]", "-", root.resolve().name)[:64].lstrip("._-") or "fleet"
    ledger, ledger_text = _load_ledger(root)
    return Fleet(
        name,
        classes,
        tuple(files),
        load,
        truth,
        _fingerprint(classes, tuple(files), ledger_text),
        classify,
        ledger,
    )


def _load_ledger(root: Path) -> tuple[QuoteLedger | None, str]:
    path = root / "registry.json"
    if not path.exists():
        return None, ""

    def error(problem: str, field_name: str | None) -> FleetError:
        return FleetError(problem, path="registry.json", field=field_name)

    data = read_capped(path, _MAX_TRUTH_FILE_SIZE, error)
    try:
        ledger = QuoteLedger.from_json(parse_json(data, error))
    except ValueError as exc:
        raise error(str(exc), None) from None
    return ledger, hashlib.sha256(data).hexdigest()


def _ignore(problem: str, field_name: str | None) -> EvidenceError:
    return EvidenceError(problem, field=field_name)


def _device_key(file_name: str) -> str:
    """The entry key of an evidence file: its stem, or a safe stand-in for a bad name."""
    stem = file_name[: -len(".json")]
    if NAME.fullmatch(stem):
        return stem
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:40]
    tag = hashlib.sha256(file_name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"file:{safe}~{tag}"


def _load_truth(root: Path, files: Mapping[str, Path]) -> dict[str, GroundTruth]:
    path = root / "truth.json"
    if not path.exists():
        return {}

    def error(problem: str, field_name: str | None) -> FleetError:
        return FleetError(problem, path="truth.json", field=field_name)

    fields = Fields(error)
    data = fields.obj(parse_json(read_capped(path, _MAX_TRUTH_FILE_SIZE, error), error), None)
    truth: dict[str, GroundTruth] = {}
    for device, value in data.items():
        obj = fields.obj(value, device, ("kind", "outcome"), ("reason", "detail"))
        try:
            outcome = DeviceOutcome(obj["outcome"])
            reason = None if obj.get("reason") is None else Reason(obj["reason"])
        except ValueError as exc:
            fields.fail(device, str(exc))
        kind = fields.string(obj["kind"], f"{device}.kind", limit=64)
        detail = fields.string(obj.get("detail", ""), f"{device}.detail")
        if device in files:
            truth[device] = GroundTruth(kind, outcome, reason, detail)
    return truth


def save_fleet(fleet: Fleet, folder: str | Path) -> Path:
    """Write ``fleet`` as a fleet folder (logs shared between identical devices).

    Devices whose evidence cannot be loaded are left out.

    Returns:
        The folder.
    """
    root = Path(folder)
    for sub in ("classes", "devices", "logs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name, device_class in fleet.classes.items():
        _write_json(root / "classes" / f"{name}.json", device_class.to_json())
    truth: dict[str, Any] = {}
    for device in fleet.devices:
        try:
            evidence = fleet.load(device, verify_quote=False)  # a refused quote is kept
        except EvidenceError:
            continue
        log_name = f"logs/{hashlib.sha256(evidence.log).hexdigest()[:20]}.bin"
        log_path = root / log_name
        if not log_path.exists():
            log_path.write_bytes(evidence.log)
        _write_json(root / "devices" / f"{device}.json", evidence.to_json(log_name))
        if device in fleet.truth:
            truth[device] = fleet.truth[device].to_json()
    if truth:
        _write_json(root / "truth.json", truth)
    if fleet.ledger is not None:
        _write_json(root / "registry.json", fleet.ledger.materialize(fleet.devices))
    return root


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

"""Reports to test ``--html``/``--csv``/``--jsonl`` with: a real supervised run, a hostile one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pybb.attestation import (
    DeviceOutcome,
    DeviceResult,
    Finding,
    FleetReport,
    GroundTruth,
    Reason,
    Tier,
    TierReport,
    generate_fleet,
)
from pybb.cli._attest_report import report_data
from pybb.human import answer
from pybb.supervision.attestation import SupervisedAttestation, attestation_settings

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
"""Text an agent, a log or a fleet's author could supply; nothing of it may run or load."""
HOSTILE_NOTE = '"><svg onload="window.__pwned=3"></svg><a href="javascript:alert(1)">x</a>'


def supervised_report(folder: Path, devices: int = 120, asks: int = 8) -> dict[str, Any]:
    """The JSON report of a real supervised demo run in which three people answered."""
    fleet = generate_fleet(devices, seed=0)
    store = f"sqlite:///{folder / 'supervised.db'}"
    settings = attestation_settings(asks=asks)
    with SupervisedAttestation(fleet, store=store, settings=settings) as session:
        session.attest()
        control = session.attestation.blackboard.model.control
        for n, ask in enumerate(session.run.open_asks()[:5]):
            person = ("human:alice", "human:bob", "human:carol")[n % 3]
            note = HOSTILE_NOTE if n == 0 else ("re-imaged" if n == 1 else "")
            answer(control, person, ask.ask_id, ask.options[n % 2].id, note)
        session.run.poll()
        return report_data(
            store, session.board_id, session.attestation.report(), session.attestation.blackboard
        )


def hostile_report() -> dict[str, Any]:
    """A report whose every device-supplied field carries HTML, as a run on any board could."""
    finding = Finding(
        Reason.TAMPERED_COMPONENT,
        f"a component differs {HOSTILE}",
        pcr=4,
        event=7,
        event_type=f"EV_{HOSTILE}",
        description=f"\\EFI\\BOOT\\{HOSTILE}.efi",
        label=HOSTILE,
        bank="sha256",
        expected="aa" * 32,
        found=HOSTILE,
    )
    results = []
    for n in range(3):
        name = f"dev-{n}-{HOSTILE}"
        device_class = f"class-{HOSTILE}"
        report = TierReport.of(name, Tier.ATTRIBUTION, device_class, [finding])
        results.append(
            DeviceResult(
                name,
                DeviceOutcome.ESCALATED,
                Tier.ATTRIBUTION,
                Reason.TAMPERED_COMPONENT,
                device_class,
                report,
                GroundTruth(HOSTILE, DeviceOutcome.ESCALATED, Reason.TAMPERED_COMPONENT, HOSTILE),
            )
        )
    results.append(DeviceResult("=cmd|' /C calc'!A0", DeviceOutcome.PASSED, Tier.VERIFICATION))
    data = report_data(f"sqlite:///{HOSTILE}", HOSTILE, FleetReport(HOSTILE, tuple(results)))
    # A board's human loop as hostile as its devices: who, what, notes, reasons.
    data["human_loop"] = True
    data["budget"] = {"limit": 1, "spent": 1, "asked": 1, "denied": 1, "by_decision": {HOSTILE: 2}}
    when = "2026-12-01T12:00:00+00:00"
    data["devices"][0]["budget_decision"] = "asked"
    data["devices"][0]["human"] = {
        "budget_decision": "asked",
        "reason": HOSTILE,
        "decided_at": when,
        "ask_id": HOSTILE,
        "asked_at": when,
        "ask_status": HOSTILE,
        "closed_at": when,
        "closed_reason": HOSTILE,
        "decision": {
            "by": HOSTILE,
            "decision": HOSTILE,
            "at": when,
            "note": HOSTILE_NOTE,
            "via": HOSTILE,
            "applied": True,
        },
    }
    data["devices"][1]["budget_decision"] = "denied"
    data["devices"][1]["human"] = {
        "budget_decision": HOSTILE,
        "reason": HOSTILE,
        "decided_at": when,
        "denied": {"limit": HOSTILE, "spent": HOSTILE, "ceiling": HOSTILE, "scope": HOSTILE},
        "ask_id": None,
        "decision": None,
    }
    return data

"""The decision tree: every ground-truth kind lands where it should, each tier as specified."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from attest_support import (
    FEDORA,
    MULTI,
    SHIM,
    attest,
    device,
    event,
    golden,
    secure_boot_off,
    with_digests,
)

from blackboard import Rejected
from pybb import Chain, Stage
from pybb.attestation import (
    ALLOWLIST,
    TRUTH_KINDS,
    Attestation,
    DeviceClass,
    DeviceOutcome,
    Fleet,
    FleetError,
    Reason,
    Tier,
    TierReport,
    generate_fleet,
    read_allowlist,
    replay,
)
from pybb.attestation._generate import QUOTE_KINDS
from pybb.human import Ask, Option

UPDATE = b"firmware volume 1.2.4"


def fedora_class(**options: object) -> DeviceClass:
    allowed = {0: [hashlib.sha256(UPDATE).digest()]}
    return DeviceClass.from_log("fedora", golden(FEDORA), allowed=allowed, **options)  # type: ignore[arg-type]


def test_a_generated_fleet_of_1000_lands_where_its_ground_truth_says() -> None:
    fleet = generate_fleet(1000, seed=2026)
    with Attestation(fleet) as attestation:
        report = attestation.run()
    assert report.counts()["pending"] == 0
    wrong = [(r.device, r.truth, r.outcome, r.reason) for r in report.devices if not r.correct]
    assert wrong == []
    assert report.accuracy == 1.0
    by_kind = report.accuracy_by_kind()
    assert set(by_kind) == set(TRUTH_KINDS)
    assert all(row["devices"] >= 40 for row in by_kind.values()), by_kind
    assert Reason.TIER_ERROR.value not in report.escalations()
    # both tiers are exercised: a lying log under a clean quote is caught on_pass, a
    # forged quote over a clean log on_fail; a corrupt log on either path
    decided = Counter((r.truth.kind, r.tier) for r in report.devices if r.truth is not None)
    for kind in ("log_quote_mismatch", "corrupt_log"):
        assert decided[(kind, Tier.VERIFICATION)] > 0 and decided[(kind, Tier.ATTRIBUTION)] > 0
    assert decided[("clean", Tier.VERIFICATION)] == by_kind["clean"]["devices"]
    assert (
        decided[("sanctioned_update", Tier.ATTRIBUTION)] == by_kind["sanctioned_update"]["devices"]
    )


def test_the_same_seed_makes_the_same_fleet_and_another_seed_another() -> None:
    first, again, other = (generate_fleet(40, seed=s) for s in (5, 5, 6))
    assert first.fingerprint == again.fingerprint != other.fingerprint
    for name in first.devices:
        a, b = first.load(name, verify_quote=False), again.load(name, verify_quote=False)
        assert (a.log, a.quote, a.device_class, a.signed) == (
            b.log,
            b.quote,
            b.device_class,
            b.signed,
        )
        assert first.truth[name] == again.truth[name]
    assert [first.truth[d].kind for d in first.devices] != [
        other.truth[d].kind for d in other.devices
    ]


def test_each_device_is_a_component_wise_entry_with_an_outcome_routed_route() -> None:
    fleet = generate_fleet(12, seed=3)
    with Attestation(fleet) as attestation:
        for name in fleet.devices:
            if fleet.truth[name].kind in QUOTE_KINDS:  # refused before the tree
                assert attestation.entry(name).conditions == {"evidence": "evidence_loaded"}
                continue
            evidence = fleet.load(name)
            policy = fleet.classes[evidence.device_class].policy
            entry = attestation.entry(name)
            assert entry.conditions == {f"pcr{p}": "quote_matches_reference" for p in policy.pcrs}
            quote = evidence.quote[policy.bank]
            assert entry.measurement["pcr0"]["quote"] == quote[0].hex()
            route = attestation.controller.route_of(name)
            assert route is not None
            assert route.on_pass == (attestation.verification,)
            assert route.on_fail == (attestation.attribution,)


def test_on_pass_a_log_that_does_not_match_its_quote_escalates_with_the_verification_report() -> (
    None
):
    blob = event(FEDORA, 2)
    lying = with_digests(golden(FEDORA), blob, b"implant")
    report, attestation = attest(
        [fedora_class()],
        [
            device("liar", "fedora", lying, quote=replay(golden(FEDORA))),
            device("ok", "fedora", golden(FEDORA)),
        ],
    )
    assert [r.outcome for r in report.devices] == [DeviceOutcome.ESCALATED, DeviceOutcome.PASSED]
    escalation = attestation.blackboard.get_escalation("liar")
    assert escalation is not None
    assert escalation.report.chain is Chain.ON_PASS
    assert escalation.report.source == "verification"
    carried = TierReport.from_json(escalation.report.tier_report)
    assert carried.tier is Tier.VERIFICATION and carried.reason is Reason.LOG_QUOTE_MISMATCH
    named = carried.findings[0]
    assert (named.pcr, named.event, named.event_type) == (0, 2, "EV_EFI_PLATFORM_FIRMWARE_BLOB")
    assert named.expected == blob.digests["sha256"].hex()
    assert named.found == hashlib.sha256(b"implant").hexdigest()
    assert "firmware blob" in (named.description or "")
    text = carried.text()
    for words in ("liar", "verification tier", "PCR 0", "event 2", "EV_EFI_PLATFORM_FIRMWARE_BLOB"):
        assert words in text
    assert named.expected in text and named.found in text


def test_on_pass_secure_boot_off_is_caught_when_the_cheap_check_cannot_see_it() -> None:
    flipped, variable = secure_boot_off(golden(SHIM))
    strict = DeviceClass.from_log("strict", golden(SHIM), pcrs=range(7), secure_boot_required=True)
    report, attestation = attest([strict], [device("sb-off", "strict", flipped)])
    (result,) = report.devices
    assert (result.outcome, result.reason, result.tier) == (
        DeviceOutcome.ESCALATED,
        Reason.SECURE_BOOT_OFF,
        Tier.VERIFICATION,
    )
    finding = result.report.findings[0] if result.report else None
    assert finding is not None and finding.event == variable.index and finding.pcr == 7
    assert "SecureBoot = 0" in (finding.description or "")
    entry = attestation.blackboard.get_entry("sb-off")
    assert entry.stage is Stage.ESCALATED and entry.chain is Chain.ON_PASS


def test_on_pass_the_denylist_catches_a_revoked_component_in_the_reference() -> None:
    blob = event(FEDORA, 2)
    revoked = fedora_class(denied=[blob.digests["sha256"]])
    report, _ = attest([revoked], [device("old", "fedora", golden(FEDORA))])
    (result,) = report.devices
    assert (result.reason, result.tier) == (Reason.DENIED_COMPONENT, Tier.VERIFICATION)
    assert result.report is not None and result.report.findings[0].event == 2


def test_on_fail_a_sanctioned_update_is_repaired_and_the_reference_updated() -> None:
    blob = event(FEDORA, 2)
    updated = with_digests(golden(FEDORA), blob, UPDATE)
    report, attestation = attest([fedora_class()], [device("updated", "fedora", updated)])
    (result,) = report.devices
    assert (result.outcome, result.reason, result.tier) == (
        DeviceOutcome.REPAIRED,
        Reason.SANCTIONED_UPDATE,
        Tier.ATTRIBUTION,
    )
    entry = attestation.blackboard.get_entry("updated")
    assert entry.good_standing and entry.chain is Chain.ON_FAIL
    pcr0 = entry.measurement["pcr0"]
    assert pcr0["reference"] == pcr0["quote"] == replay(updated)["sha256"][0].hex()
    assert entry.original_measurement["pcr0"]["reference"] != pcr0["reference"]
    (sanctioned,) = pcr0["sanctioned"]
    assert (sanctioned["event"], sanctioned["reason"]) == (2, "sanctioned_update")
    assert sanctioned["found"] == hashlib.sha256(UPDATE).hexdigest()
    assert result.report is not None and "repaired, 1 sanctioned update" in result.report.title


def test_on_fail_tampering_escalates_with_the_event_named() -> None:
    # a boot application: its digest is of the image, not of the event data (a tampered
    # separator, event 17, is now an event_data_mismatch: see test_eventdata.py)
    target = event(MULTI, 38)
    multi = DeviceClass.from_log("multi", golden(MULTI))
    tampered = with_digests(golden(MULTI), target, b"bootkit")
    report, attestation = attest([multi], [device("t", "multi", tampered)])
    (result,) = report.devices
    assert (result.reason, result.tier) == (Reason.TAMPERED_COMPONENT, Tier.ATTRIBUTION)
    escalation = attestation.blackboard.get_escalation("t")
    assert escalation is not None and escalation.report.source == "attribution"
    assert escalation.report.chain is Chain.ON_FAIL
    carried = TierReport.from_json(escalation.report.tier_report)
    (finding,) = carried.findings
    assert (finding.event, finding.pcr, finding.event_type) == (
        target.index,
        target.pcr_index,
        target.type_name,
    )
    assert finding.expected == target.digests["sha256"].hex()
    assert finding.found == hashlib.sha256(b"bootkit").hexdigest()
    assert carried.allowlist_candidates() == (
        {
            "class": "multi",
            "pcr": target.pcr_index,
            "event_type": target.type_name,
            "label": target.label,  # accepting it sanctions the digest in this slot only
            "bank": "sha256",
            "digest": finding.found,
        },
    )


@pytest.mark.parametrize("missing", ["one-pcr", "whole-bank"])
def test_missing_quote_values_escalate_naming_what_is_missing(missing: str) -> None:
    quote = replay(golden(FEDORA))
    if missing == "one-pcr":
        quote["sha256"] = {p: v for p, v in quote["sha256"].items() if p != 4}
    else:
        quote = {}
    report, _ = attest([fedora_class()], [device("m", "fedora", golden(FEDORA), quote=quote)])
    (result,) = report.devices
    assert (result.reason, result.tier) == (Reason.MISSING_QUOTE, Tier.ATTRIBUTION)
    assert result.report is not None
    finding = result.report.findings[0]
    assert finding.pcr == (4 if missing == "one-pcr" else None) and finding.bank == "sha256"


def test_an_accepted_digest_extends_the_allowlist_on_the_board_for_the_next_devices(
    tmp_path: object,
) -> None:
    blob = event(FEDORA, 2)
    release = with_digests(golden(FEDORA), blob, b"firmware volume 1.3.0")
    store = f"sqlite:///{tmp_path}/a.db"
    devices = [device(f"d{i}", "fedora", release) for i in range(3)]
    fleet = Fleet.of([fedora_class()], devices, name="rollout")
    with Attestation(fleet, store=store, chunk_size=1) as attestation:
        seen: list[DeviceOutcome] = []

        def accept_after_first(done: int, total: int) -> None:
            if done == 1:
                seen.append(attestation.result("d0").outcome)
                report = attestation.result("d0").report
                assert report is not None
                (candidate,) = report.allowlist_candidates()
                digest = candidate["digest"]
                attestation.accept_digest(
                    "fedora",
                    candidate["pcr"],
                    digest,
                    by="human:alice",
                    event_type=candidate["event_type"],
                    label=candidate["label"],
                )

        report = attestation.run(accept_after_first)
    assert seen == [DeviceOutcome.ESCALATED]
    assert [r.outcome for r in report.devices] == [
        DeviceOutcome.ESCALATED,
        DeviceOutcome.REPAIRED,
        DeviceOutcome.REPAIRED,
    ]
    with Attestation(fleet, store=store) as reopened:
        allowed = read_allowlist(reopened.blackboard)["fedora"][0]
        assert hashlib.sha256(b"firmware volume 1.3.0").digest() in allowed
        assert reopened.run().to_json() == report.to_json()


def test_the_board_refuses_a_malformed_allowlist_and_any_change_of_fleet() -> None:
    fleet = Fleet.of([fedora_class()], [device("a", "fedora", golden(FEDORA))])
    with Attestation(fleet) as attestation:
        control = attestation.blackboard.model.control
        malformed: list[object] = [
            {"fedora": {"0": ["xyz"]}},
            {"fedora": {"99": []}},
            ["x"],
            {"bad name": {}},
        ]
        for junk in malformed:
            result = control.set_premise("human:mallory", ALLOWLIST, junk, expected_version=1)
            assert isinstance(result, Rejected), junk
        result = control.set_premise("human:mallory", "attestation.fleet", {}, expected_version=1)
        assert isinstance(result, Rejected)
        with pytest.raises(FleetError, match="refused"):
            attestation.accept_digest("fedora", 0, "zz" * 32, by="human:alice")


def test_a_board_attests_one_fleet(tmp_path: object) -> None:
    store = f"sqlite:///{tmp_path}/b.db"
    with Attestation(generate_fleet(5, seed=1), store=store, board_id="fleet"):
        pass
    with pytest.raises(FleetError, match="already attests fleet"):
        Attestation(generate_fleet(6, seed=1), store=store, board_id="fleet")


def test_every_escalation_can_become_a_persons_ask() -> None:
    fleet = generate_fleet(150, seed=11)
    with Attestation(fleet) as attestation:
        report = attestation.run()
        escalated = [r for r in report.devices if r.outcome is DeviceOutcome.ESCALATED]
        reasons = {r.reason for r in escalated}
        assert len(reasons) >= 5
        for result in escalated:
            escalation = attestation.blackboard.get_escalation(result.device)
            assert escalation is not None
            data = escalation.report.tier_report
            tier = TierReport.from_json(data)
            ask = Ask(
                ask_id=f"attest.{result.device}",
                entry=result.device,
                subject=result.device,
                title=data["title"],
                report=tier.text(),
                options=tuple(Option.from_json(o) for o in data["options"]),
                confidence=0.9,
                scope="fleet",
                report_data=data,
            )
            assert ask.recommended.id in ("quarantine", "remeasure")
            if result.reason is Reason.TAMPERED_COMPONENT:
                assert ask.option("accept-digest") is not None

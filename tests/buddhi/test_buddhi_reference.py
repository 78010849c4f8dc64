"""The reference pack, and check_store: it passes the memory store and catches broken ones."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from buddhi_support import policy

from buddhi import (
    Admission,
    AdmissionRequest,
    Clock,
    ExclusionCause,
    Exclusions,
    Item,
    RouterPick,
    Scope,
    ScopeCounter,
    ScopePath,
    Spend,
    Store,
    Tier,
    assess_admission,
)
from buddhi.errors import AdmissionRefused, DeliveryError, ExclusionError, PolicyError, StoreError
from buddhi.reference import (
    DEFAULT_POLICY,
    CollectingTransport,
    MemoryStore,
    Policy,
    ReferencePack,
    build_seams,
)
from buddhi.testing import FakeClock, check_store


def test_the_memory_store_passes_the_conformance_check() -> None:
    assert check_store(MemoryStore) == (
        "scopes",
        "counters",
        "ceilings",
        "bar",
        "lattice",
        "windows",
        "concurrency",
        "close",
    )


class _Broken(MemoryStore):
    """A memory store with one deliberate fault, for check_store to catch."""


class RetractsPermanent(_Broken):
    """Retracts a cause from whichever tier holds it, bypassing the lattice's rule."""

    def retract(self, source: str, cause: ExclusionCause) -> Exclusions:
        with self._lock:
            now = self._exclusions_of(source)
            updated = Exclusions(source, now.permanent - {cause.name}, now.transient - {cause.name})
            self._exclusions[source] = updated
            return updated


class IgnoresWindows(_Broken):
    def counter(self, path: ScopePath) -> ScopeCounter:
        counter = super().counter(path)
        return ScopeCounter(counter.scope, counter.total, counter.total, counter.own, None)


class Racy(_Broken):
    """Reads the counters, pauses, then writes: overshoots under contention."""

    def admit(self, request: AdmissionRequest) -> Admission:
        chain = [self.counter(request.scope[:n]) for n in range(1, len(request.scope) + 1)]
        verdict = assess_admission(request, chain, self.exclusions(request.source))
        if isinstance(verdict, AdmissionRefused):
            raise verdict
        time.sleep(0.002)
        with self._lock:
            for n, counter in enumerate(chain):
                self._counters[counter.scope.path] = counter.charged(own=n == len(chain) - 1)
        return verdict


@pytest.mark.parametrize(
    ("broken", "check"),
    [
        (RetractsPermanent, "lattice"),
        (IgnoresWindows, "windows"),
        (Racy, "concurrency"),
    ],
)
def test_check_store_catches_a_broken_store(broken: type[Store], check: str) -> None:
    def factory(clock: Clock) -> Store:
        return broken(clock)  # type: ignore[call-arg]

    with pytest.raises(AssertionError, match=rf"check_store\[{check}\]"):
        check_store(factory)


def test_check_store_catches_a_store_that_does_not_accrue_up_the_path() -> None:
    class Flat(MemoryStore):
        def admit(self, request: AdmissionRequest) -> Admission:
            with self._lock:
                counter = self._read(request.scope)
                verdict = assess_admission(request, [counter], Exclusions(request.source))
                if isinstance(verdict, AdmissionRefused):
                    raise verdict
                self._counters[request.scope] = counter.charged(own=True)
                return verdict

    with pytest.raises(AssertionError, match=r"check_store\[counters\]"):
        check_store(Flat)


def test_the_memory_store_refuses_work_once_closed() -> None:
    store = MemoryStore()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.scopes()
    with MemoryStore() as scoped:
        scoped.open_scope(Scope(("g",), 1))
    with pytest.raises(StoreError):
        scoped.counter(("g",))


def test_exclusions_join_in_a_lattice_and_never_cross_tiers() -> None:
    clear = Exclusions("s")
    assert clear.level is None and not clear.excluded
    muted = clear.adding(ExclusionCause("muted", Tier.TRANSIENT))
    assert muted.level is Tier.TRANSIENT
    revoked = muted.adding(ExclusionCause("revoked", Tier.PERMANENT))
    assert revoked.level is Tier.PERMANENT
    assert revoked.retracting(ExclusionCause("muted", Tier.TRANSIENT)).level is Tier.PERMANENT
    with pytest.raises(ExclusionError, match="never cross"):
        revoked.adding(ExclusionCause("muted", Tier.PERMANENT))
    with pytest.raises(ExclusionError, match="cannot be retracted"):
        revoked.retracting(ExclusionCause("revoked", Tier.TRANSIENT))


def test_the_policy_from_plain_data() -> None:
    data = {
        "confidence_threshold": 0.7,
        "question": "{source} asks about {item_id}",
        "options": ["Yes", "No"],
        "recommended": "No",
        "trigger_words": ["urgent"],
    }
    pack = ReferencePack(Policy.from_mapping(data))
    assert pack.confidence_threshold == 0.7
    ask = pack.build_ask(
        Item("i", "s", confidence=0.2), Spend("m", "low", 1, RouterPick("m", "low"))
    )
    assert ask.question == "s asks about i"
    assert [(o.label, o.recommended) for o in ask.options] == [("Yes", False), ("No", True)]
    assert ask.confidence == pytest.approx(0.8)
    assert dict(pack.exclusion_causes)["revoked"].tier is Tier.PERMANENT


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("confidence_threshold", r"missing \['confidence_threshold'\]"),
        ("question", r"missing \['question'\]"),
        ("options", r"missing \['options'\]"),
    ],
)
def test_a_policy_missing_a_threshold_or_phrasing_is_named(missing: str, message: str) -> None:
    data = {
        "confidence_threshold": 0.7,
        "question": "Q?",
        "options": ("Yes", "No"),
        "recommended": "No",
    }
    del data[missing]
    with pytest.raises(PolicyError, match=message):
        Policy.from_mapping(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"confidence_threshold": 2}, "confidence_threshold must be a number"),
        ({"confidence_threshold": "high"}, "confidence_threshold must be a number"),
        ({"question": ""}, "question phrasing must be a non-empty str"),
        ({"question": "About {item}"}, r"unknown placeholders \['item'\]"),
        ({"question": "About {"}, "not a valid template"),
        ({"options": ("Only",), "recommended": "Only"}, "offer 2 to 4 distinct options"),
        ({"options": ("A", "B", "C", "D", "E"), "recommended": "A"}, "offer 2 to 4"),
        ({"recommended": "Nope"}, "'Nope' is not one of"),
        ({"details": ("one",)}, "one detail per option"),
        ({"iteration_budget": -1}, "iteration_budget must be a whole number"),
        ({"efforts": {"low": 1}}, "efforts must be a EffortScale"),
    ],
)
def test_a_bad_policy_is_refused_with_what_to_fix(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy(**changes)


def test_from_mapping_refuses_unknown_keys() -> None:
    data = {"confidence_threshold": 0.7, "question": "Q", "options": ("A", "B"), "recommended": "A"}
    with pytest.raises(PolicyError, match=r"unknown keys \['threshold'\]"):
        Policy.from_mapping({**data, "threshold": 0.5})


def test_the_collecting_transport_is_thread_safe_and_closes() -> None:
    transport = CollectingTransport()
    seams = build_seams(ceiling=1000)
    ask = ReferencePack().build_ask(Item("i", "s"), Spend("m", "low", 1, RouterPick("m", "low")))

    def deliver_100() -> None:
        for _ in range(100):
            transport.deliver(ask)

    threads = [threading.Thread(target=deliver_100) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(transport.asks) == 800
    with transport:
        pass
    with pytest.raises(DeliveryError, match="closed"):
        transport.deliver(ask)
    assert seams.policy is not None and DEFAULT_POLICY.recommended == "Investigate by hand"


def test_the_fake_clock_only_moves_forward() -> None:
    from datetime import timedelta

    clock = FakeClock()
    start = clock.now()
    assert clock.advance(timedelta(seconds=5)) == start + timedelta(seconds=5)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(timedelta(seconds=-1))

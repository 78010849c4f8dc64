"""RA-10 ``malformed_inputs_1000``: hostile proposals against the kernel's write path.

1,000 proposals from a seeded generator: wrong types, missing fields (content without
what the application's rule requires), undeclared regions with SQL metacharacters, NUL
and Unicode confusables, the wrong region kind, non-JSON content (sets, bytes, NaN,
Infinity, tuples, non-string keys that would serialise as duplicate JSON keys,
recursive and depth-10,000 values, lone surrogates, integers beyond what JSON text can
carry), bad or huge ``expected_version`` values, bad or reused idempotency keys,
writers that are not registered or not permitted, duplicates on a unique level, and
writes to a closed run. Pass: every one is refused with a documented ``BlackboardError``
subclass or a ``Rejected``/``Conflict`` whose message names the offending field or
value; no other exception; board digest, head and the SQLite schema unchanged; p99
latency of a refusal at most 50 ms.

The kernel takes Python objects, not JSON text, so "duplicate JSON keys" cannot arrive
as such; their analogue is a dict whose keys differ in Python but collide once written
as JSON (``{1: "a", "1": "b"}``), which the kernel must refuse.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest

from blackboard import (
    Accept,
    Agent,
    BlackboardError,
    BoardReader,
    Conflict,
    ContentError,
    IdempotencyKeyError,
    Level,
    Model,
    ModelError,
    Premise,
    ProposedContribution,
    ProposedPremiseWrite,
    ProposedWrite,
    RegionKindError,
    Reject,
    Rejected,
    RejectionCause,
    UndeclaredRegionError,
    WriterError,
    Written,
    create_model,
)
from storekit import StoreSpec, sized

CASES = sized(1_000, 100_000)

# -- the model under attack ------------------------------------------------------------


def _rule(proposed: ProposedWrite, reader: BoardReader) -> Accept | Reject:
    """The application's schema: findings carry a list of findings; the window is an int."""
    if isinstance(proposed, ProposedContribution) and proposed.level == "findings":
        content = proposed.content
        if not isinstance(content, dict) or not isinstance(content.get("findings"), list):
            return Reject("a contribution to findings needs a 'findings' list")
    if (
        isinstance(proposed, ProposedPremiseWrite)
        and proposed.premise == "window"
        and (isinstance(proposed.value, bool) or not isinstance(proposed.value, int))
    ):
        return Reject("the window premise takes an int value")
    return Accept()


def _open(store: Any, board: str, *, strict: bool = True) -> Model:
    return create_model(
        [
            Level("findings"),
            Level("notes"),
            Level("ids", unique="id"),
            Premise("window"),
            Premise("guarded", guarded=True),
        ],
        premises={"window": 5, "guarded": "g"},
        agents=[
            Agent("scout", writes_to=["findings", "ids"]),
            Agent("clerk", writes_to=["notes", "guarded"]),
        ],
        admission_rule=_rule if strict else None,
        store=store,
        board_id=board,
        agents_only=strict,
    )


# -- the hostile corpus ------------------------------------------------------------------

SQL = ["x'); DROP TABLE bb_records;--", '"', ";", "\x00", "findings\x00", "' OR 1=1 --", "%"]
CONFUSABLE = ["fіndings", "ｆindings", "findings\u200b", "Findings", "findings ", "ﬁndings"]
NAMES = [*SQL, *CONFUSABLE, "", "a" * 10_000, "\ud800", "notes/../findings"]
NOT_STR = [None, 1, 1.5, b"findings", ["findings"], ("findings",), {"findings": 1}, True]
AGENT_LOOKALIKES = ["scоut", "ѕcout", "scout\u200b", "SCOUT", "scout ", "scout\x00", *SQL[:4]]


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _recursive() -> Any:
    value: list[Any] = []
    value.append(value)
    return value


NOT_JSON: list[Callable[[], Any]] = [
    lambda: {"findings": [float("nan")]},
    lambda: {"findings": [float("inf")]},
    lambda: float("-inf"),
    lambda: {"findings": {1, 2}},
    lambda: {"findings": [b"bytes"]},
    lambda: {"findings": (1, 2)},
    lambda: {1: "a", "1": "b"},  # would serialise as {"1": "a", "1": "b"}
    lambda: {True: 1, "true": 2},
    lambda: {None: 1},
    lambda: {"findings": [object()]},
    lambda: {"findings": [1j]},
    lambda: _recursive(),
    lambda: {"findings": _deep(10_000)},
    lambda: {"findings": ["\ud800"]},
    lambda: {"findings\udcff": []},
    lambda: {"findings": [10**5000]},
]
MISSING = [{}, {"finding": ["x"]}, {"findings": "x"}, [], "findings", None, 0, {"findings": None}]
BAD_VERSIONS = [0, -1, -(2**63), 2**62, 2**100, 1.0, "1", None, True, float("nan"), [1]]
BAD_KEYS = ["", 5, "k" * 257, b"k", ["k"], "\udcff"]


@dataclass(frozen=True)
class Case:
    """One hostile call, what it must come back as, and the words its message must hold."""

    category: str
    call: Callable[[Model, Model], Any]
    expect: type[BaseException] | RejectionCause | type[Conflict]
    names: tuple[str, ...]


def _case(rng: random.Random) -> Case:
    category = rng.choice(CATEGORIES)
    pick = rng.choice
    bad: Any  # a hostile value: outside the parameter's type on purpose
    if category == "writer-type":
        bad = pick([*NOT_STR, "", "@board", "@x", "\ud800"])
        return Case(
            category, lambda m, c: m.control.write(bad, "notes", "n"), WriterError, ("writer",)
        )
    if category == "writer-unregistered":
        bad = pick(AGENT_LOOKALIKES)
        return Case(
            category,
            lambda m, c: m.control.write(bad, "notes", "n"),
            RejectionCause.NOT_PERMITTED,
            (repr(bad)[:20],),
        )
    if category == "level-name":
        bad = pick([*NAMES, *NOT_STR])
        return Case(
            category,
            lambda m, c: m.control.write("scout", bad, {"findings": []}),
            UndeclaredRegionError,
            ("region",),
        )
    if category == "premise-name":
        bad = pick([*NAMES, *NOT_STR])
        return Case(
            category,
            lambda m, c: m.control.set_premise("clerk", bad, 1, expected_version=1),
            UndeclaredRegionError,
            ("region",),
        )
    if category == "region-kind":
        if rng.random() < 0.5:
            return Case(
                category,
                lambda m, c: m.control.write("clerk", "window", 6),
                RegionKindError,
                ("window",),
            )
        return Case(
            category,
            lambda m, c: m.control.set_premise("scout", "findings", 1, expected_version=1),
            RegionKindError,
            ("findings",),
        )
    if category == "content-not-json":
        make = pick(NOT_JSON)
        return Case(
            category,
            lambda m, c: m.control.write("scout", "findings", make()),
            ContentError,
            ("content",),
        )
    if category == "premise-value-not-json":
        make = pick(NOT_JSON)
        return Case(
            category,
            lambda m, c: m.control.set_premise("clerk", "guarded", make(), expected_version=1),
            ContentError,
            ("value",),
        )
    if category == "missing-fields":
        bad = pick(MISSING)
        return Case(
            category,
            lambda m, c: m.control.write("scout", "findings", bad),
            RejectionCause.ADMISSION,
            ("findings",),
        )
    if category == "premise-schema":
        bad = pick(["wide", 1.5, None, True, [5], {"v": 5}])
        return Case(
            category,
            lambda m, c: m.control.set_premise("clerk", "window", bad, expected_version=1),
            RejectionCause.ADMISSION,
            ("window",),
        )
    if category == "expected-version":
        bad = pick(BAD_VERSIONS)
        return Case(
            category,
            lambda m, c: m.control.set_premise("clerk", "window", 6, expected_version=bad),
            ContentError,
            ("expected_version",),
        )
    if category == "stale-version":
        bad = pick([2, 3, 999, 2**61, 2**62 - 1])
        return Case(
            category,
            lambda m, c: m.control.set_premise("clerk", "window", 6, expected_version=bad),
            Conflict,
            (),
        )
    if category == "idempotency-key":
        bad = pick(BAD_KEYS)
        return Case(
            category,
            lambda m, c: m.control.write("clerk", "notes", "n", idempotency_key=bad),
            ContentError,
            ("idempotency_key",),
        )
    if category == "key-reused":
        return Case(
            category,
            lambda m, c: m.control.write(
                "clerk", "notes", f"other {rng.random()}", idempotency_key="used"
            ),
            IdempotencyKeyError,
            ("'used'",),
        )
    if category == "not-permitted":
        call = pick(
            [
                lambda m, c: m.control.write("clerk", "findings", {"findings": []}),
                lambda m, c: m.control.write("scout", "notes", "n"),
                lambda m, c: m.control.set_premise("scout", "guarded", "h", expected_version=1),
            ]
        )
        return Case(category, call, RejectionCause.NOT_PERMITTED, ("may not write",))
    if category == "unique":
        if rng.random() < 0.5:
            return Case(
                category,
                lambda m, c: m.control.write("scout", "ids", {"id": 1}),
                RejectionCause.DUPLICATE,
                ("unique",),
            )
        bad = pick([{"x": 1}, [1], "id", None])
        return Case(
            category, lambda m, c: m.control.write("scout", "ids", bad), ContentError, ("'id'",)
        )
    if category == "batch-keys":
        proposals = [ProposedContribution("clerk", "notes", "n")] * 2
        return Case(
            category,
            lambda m, c: m.control.write_all(proposals, idempotency_keys=["a"]),
            ContentError,
            ("idempotency_keys",),
        )
    assert category == "closed-run"
    call = pick(
        [
            lambda m, c: c.control.write("clerk", "notes", "n"),
            lambda m, c: c.control.write("scout", "findings", {"findings": ["x"]}),
            lambda m, c: c.control.set_premise("clerk", "window", 6, expected_version=1),
            lambda m, c: c.control.grant("clerk", "findings"),
        ]
    )
    return Case(category, call, RejectionCause.RUN_CLOSED, ("run closed",))


CATEGORIES = [
    "writer-type", "writer-unregistered", "level-name", "premise-name", "region-kind",
    "content-not-json", "premise-value-not-json", "missing-fields", "premise-schema",
    "expected-version", "stale-version", "idempotency-key", "key-reused", "not-permitted",
    "unique", "batch-keys", "closed-run",
]  # fmt: skip


def _verdict(case: Case, outcome: Any) -> str | None:
    """None when the outcome is the documented refusal, else what is wrong with it."""
    if isinstance(outcome, BaseException):
        if not isinstance(outcome, BlackboardError):
            return f"untyped {type(outcome).__name__}: {outcome}"
        message = str(outcome)
        if not (isinstance(case.expect, type) and isinstance(outcome, case.expect)):
            return f"{type(outcome).__name__} where {case.expect} was due: {message}"
    elif isinstance(outcome, Rejected):
        message = outcome.reason
        if outcome.cause is not case.expect:
            return f"{outcome.cause} where {case.expect} was due: {message}"
    elif isinstance(outcome, Conflict):
        message = ""
        if case.expect is not Conflict:
            return f"Conflict where {case.expect} was due"
    else:
        return f"admitted: {outcome!r}"
    if case.names and not any(n in message for n in case.names):
        return f"message names none of {case.names}: {message[:200]}"
    return None


def _schema(spec: StoreSpec) -> list[tuple[Any, ...]]:
    if spec.kind != "sqlite":
        return []
    assert spec.url is not None
    with closing(sqlite3.connect(spec.url.removeprefix("sqlite:///"))) as conn:
        return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


@dataclass
class Attack:
    problems: list[str]
    latencies: list[float]
    seen: Counter[str]


def attack(model: Model, closed: Model, cases: int, seed: int) -> Attack:
    """Throw ``cases`` hostile proposals; every one that is not refused as due is a problem."""
    rng = random.Random(seed)
    result = Attack([], [], Counter())
    head = model.reader.head()
    for number in range(cases):
        case = _case(rng)
        result.seen[case.category] += 1
        started = time.perf_counter()
        try:
            outcome = case.call(model, closed)
        except Exception as exc:
            outcome = exc
        result.latencies.append(time.perf_counter() - started)
        wrong = _verdict(case, outcome)
        if wrong is not None:
            result.problems.append(f"#{number} {case.category}: {wrong}")
        if model.reader.head() != head:
            result.problems.append(f"#{number} {case.category}: the head moved")
            head = model.reader.head()
    return result


def _targets(spec: StoreSpec, strict: bool) -> tuple[Model, Model]:
    store = spec.open()
    model, closed = _open(store, "target", strict=strict), _open(store, "closed", strict=strict)
    first = model.control.write("clerk", "notes", "first", idempotency_key="used")
    assert isinstance(first, Written)
    assert isinstance(model.control.write("scout", "ids", {"id": 1}), Written)
    closed.control.abort("closed before the attack")
    return model, closed


def test_a_thousand_hostile_proposals_are_refused_and_change_nothing(
    local_store_spec: StoreSpec,
) -> None:
    model, closed = _targets(local_store_spec, strict=True)
    digests = (model.reader.digest(), closed.reader.digest())
    schema = _schema(local_store_spec)
    result = attack(model, closed, CASES, seed=10)
    assert result.problems == []
    assert (model.reader.digest(), closed.reader.digest()) == digests
    assert _schema(local_store_spec) == schema
    assert set(result.seen) == set(CATEGORIES)
    latencies = result.latencies
    p99 = statistics.quantiles(latencies, n=100)[98]
    print(
        f"RA-10 {local_store_spec.kind}: {CASES}/{CASES} refused; latency p50 "
        f"{statistics.median(latencies) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms, "
        f"max {max(latencies) * 1e3:.1f} ms"
    )
    assert p99 <= 0.050


def test_negative_control_a_permissive_model_is_caught(local_store_spec: StoreSpec) -> None:
    """No rule, unregistered writers allowed: the same attack and verdicts must object."""
    model, closed = _targets(local_store_spec, strict=False)
    problems = attack(model, closed, 300, seed=10).problems
    assert any("missing-fields: admitted" in p for p in problems)
    assert any("writer-unregistered: admitted" in p for p in problems)
    assert any("the head moved" in p for p in problems)


# -- hostile but valid: what is allowed must come back exactly as it went in -------------


def test_hostile_but_valid_names_and_values_round_trip(local_store_spec: StoreSpec) -> None:
    names = ["x'); DROP TABLE bb_records;--", '"', ";", "a\x00b", "fіndings", "findings"]
    values = [
        "x'); DROP TABLE bb_boards;--",
        "nul \x00 inside",
        {"findings": ["ﬁ", "\u202egnp.exe", "\U0001f600"], "'": '"'},
        -0.0,
        1e308,
        10**4000,
        _deep(199),
        {"k" * 1000: "v" * 100_000},
    ]
    spec = local_store_spec
    model = create_model([Level(n) for n in names], store=spec.open(), board_id="valid")
    schema = _schema(spec)
    written = []
    for index, value in enumerate(values):
        level, writer = names[index % len(names)], names[(index + 1) % len(names)]
        result = model.control.write(writer, level, value)
        assert isinstance(result, Written), result
        written.append((result.sequence, writer, level, value))
    reopened = create_model([Level(n) for n in names], store=spec.open(), board_id="valid")
    for sequence, writer, level, value in written:
        record = reopened.reader.log(sequence - 1, sequence)[0]
        assert (record.writer, record.region, record.content) == (writer, level, value)
    assert _schema(spec) == schema


def test_a_ten_megabyte_contribution_is_refused_and_the_cap_is_configurable(
    local_store_spec: StoreSpec,
) -> None:
    model = create_model([Level("big")], store=local_store_spec.open(), board_id="big")
    content = {"blob": "é" * 5_000_000}  # 10 MB of UTF-8
    started = time.perf_counter()
    with pytest.raises(ContentError, match=r"10,000,011 bytes of JSON, over this board's cap"):
        model.control.write("w", "big", content)
    assert model.reader.head() == 0
    assert time.perf_counter() - started < 10
    roomy = create_model(
        [Level("big")], store=local_store_spec.open(), board_id="roomy", max_content_bytes=11 << 20
    )
    assert isinstance(roomy.control.write("w", "big", content), Written)
    assert roomy.reader.read_level("big")[0].content == content
    with pytest.raises(ModelError, match="max_content_bytes"):
        create_model([Level("big")], max_content_bytes=0)


# -- gaps this test found, since closed in the kernel ------------------------------------


@pytest.mark.parametrize("item", [{"writer": "w", "level": "notes"}, None, "notes"])
def test_write_all_refuses_an_item_that_is_not_a_proposal(item: Any) -> None:
    model = create_model([Level("notes")])
    with pytest.raises(BlackboardError):
        model.control.write_all([item])


def test_reader_refuses_a_position_that_is_not_an_int(local_store_spec: StoreSpec) -> None:
    model = create_model([Level("notes")], store=local_store_spec.open(), board_id="r")
    model.control.write("w", "notes", "n")
    with pytest.raises(BlackboardError):
        model.reader.log(since="x")  # type: ignore[arg-type]

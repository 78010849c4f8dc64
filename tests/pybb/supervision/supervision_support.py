"""What the supervision tests share: a tier that reports, a pack that reads reports, checkers.

Not a conftest.py (nested conftest files shadow each other under pytest's default import
mode); test modules import from it by name.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from blackboard import BoardReader, RecordKind
from blackboard.stores import Store as BoardBackend
from buddhi import Ask as BuddhiAsk
from buddhi import AskOption, BudgetTree, GraduatedBar, Item, Spend
from buddhi.board import ADMISSIONS_LEVEL, BUDGET_PREMISE
from buddhi.reference import DEFAULT_POLICY, ReferencePack
from pybb import AttemptError, Blackboard, BlackboardEntry, Controller, KnowledgeSource
from pybb.human import ANSWERS, ASK_CLOSURES, ASKS
from pybb.supervision import (
    SUPERVISION,
    SupervisedRun,
    SupervisionSettings,
    supervised_blackboard,
)

BOARD = "sup"

# The bar a budget test wants: an ask with confidence 1.0 passes it until the scope is full,
# so the ceiling alone decides (floor + rise must exceed 1).
FLAT_BAR = GraduatedBar(floor=0.0, rise=1.000001)
POLICY = dataclasses.replace(DEFAULT_POLICY, bar=FLAT_BAR)


class Reporter(KnowledgeSource):
    """A tier that fails every attempt with the report its entry's measurement carries."""

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        measurement = blackboard.get_entry(key).measurement
        raise AttemptError(f"{self.name} cannot repair {key}", measurement.get("report"))


class ReportPack(ReferencePack):
    """The reference pack, steered by the tier report's ``mode``.

    ``noise`` is not worth acting on; ``bad-ask`` gets a malformed ask (one option).
    """

    def __init__(self) -> None:
        super().__init__(POLICY)

    def worth_acting(self, item: Item) -> bool:
        return _mode(item) != "noise"

    def build_ask(self, item: Item, spend: Spend) -> BuddhiAsk:
        if _mode(item) == "bad-ask":
            return BuddhiAsk(item.id, "Which one?", (AskOption("only", recommended=True),), 0.9)
        return super().build_ask(item, spend)


def _mode(item: Item) -> str | None:
    tier = item.payload.report.tier_report  # type: ignore[attr-defined]
    return tier.get("mode") if isinstance(tier, Mapping) else None


def settings(ceiling: int = 10, **changes: Any) -> SupervisionSettings:
    return SupervisionSettings(
        policy=ReportPack(), budget=BudgetTree.single_pool(ceiling), **changes
    )


def entry(report: Any = None) -> BlackboardEntry:
    return BlackboardEntry(predicate="ok", measurement={"v": -1, "report": report})


def ok(measurement: Any) -> bool:
    return bool(measurement.get("v", 0) > 0)


def prepare(controller: Controller, *, attempts: int = 1) -> Controller:
    """Register the predicate and route every entry to the reporting tier."""
    controller.register_predicate("ok", ok)
    controller.route_predicate("ok", on_fail=[Reporter("tier", max_attempts=attempts)])
    return controller


def open_run(
    store: str | BoardBackend | None,
    settings_: SupervisionSettings | None = None,
    *,
    attempts: int = 1,
    **kw: Any,
) -> SupervisedRun:
    run = SupervisedRun.open(store, BOARD, settings_ or settings(), **kw)
    prepare(run.controller, attempts=attempts)
    return run


def plain_controller(store: str | BoardBackend | None) -> Controller:
    """A controller on a supervised board with no supervisor listening."""
    return prepare(Controller(supervised_blackboard(store, BOARD)))


def write(board: Blackboard, entries: Mapping[str, Any]) -> None:
    board.write_entries({key: entry(report) for key, report in entries.items()})


# -- checkers -------------------------------------------------------------------------------


def level(reader: BoardReader, name: str) -> list[Any]:
    return [c.content for c in reader.read_level(name)]


def decisions(reader: BoardReader) -> dict[str, dict[str, Any]]:
    """Entry key to its decision record (a key appearing twice is returned as a list)."""
    found: dict[str, Any] = {}
    for record in level(reader, SUPERVISION):
        if record["kind"] == "decision":
            found.setdefault(record["key"], []).append(record)
    return {key: rows[0] if len(rows) == 1 else rows for key, rows in found.items()}


def budget_problems(reader: BoardReader, ceiling: int, escalated: int) -> list[str]:
    """Why the board breaks "k asks delivered, the rest denied with their reason"."""
    problems = []
    asks = level(reader, ASKS)
    rows = [r for r in level(reader, SUPERVISION) if r["kind"] == "decision"]
    by_disposition = Counter(r["disposition"] for r in rows)
    if len(asks) != min(ceiling, escalated):
        problems.append(f"{len(asks)} asks on the board, expected {min(ceiling, escalated)}")
    if by_disposition["ESCALATED"] != len(asks):
        problems.append(f"{by_disposition['ESCALATED']} ESCALATED but {len(asks)} asks")
    if by_disposition["DENIED"] != max(0, escalated - ceiling):
        problems.append(f"{by_disposition['DENIED']} DENIED, expected {escalated - ceiling}")
    for row in rows:
        denied = row["details"].get("denied")
        if row["disposition"] == "DENIED" and (
            not denied or denied.get("scope") != "global" or denied.get("limit") != "ceiling"
        ):
            problems.append(f"denial without its scope and bar: {row}")
    spent = reader.read_premise(BUDGET_PREMISE).value["global"]["spent"]
    if spent != len(asks):
        problems.append(f"the budget charged {spent} for {len(asks)} asks")
    return problems


def charges(reader: BoardReader) -> Counter[str]:
    """How often each item was admitted by the budget (its audit trail)."""
    return Counter(
        r["request"]["item_id"]
        for r in level(reader, ADMISSIONS_LEVEL)
        if r.get("kind") == "admission" and r.get("decision") == "admitted"
    )


def open_ask_history(reader: BoardReader) -> tuple[int, list[tuple[int, int]]]:
    """Replay asks, answers and closures in board order: the most asks open at once, and
    for each supervision decision (sequence, asks open just before it)."""
    open_now: set[str | None] = set()  # ask ids, as the records hold them
    most, at_decisions = 0, []
    for record in reader.log():
        if record.kind is not RecordKind.LEVEL or not isinstance(record.content, dict):
            continue
        ask_id = record.content.get("ask_id")
        if record.region == ASKS:
            open_now.add(ask_id)
        elif record.region in (ANSWERS, ASK_CLOSURES):
            open_now.discard(ask_id)
        elif record.region == SUPERVISION and record.content.get("kind") == "decision":
            at_decisions.append((record.sequence, len(open_now)))
        most = max(most, len(open_now))
    return most, at_decisions


def keys(prefix: str, n: int) -> Iterable[str]:
    return (f"{prefix}{i:04d}" for i in range(n))


# -- attestation fleets ---------------------------------------------------------------------


def twin_fleet(*, between: int = 0, name: str = "twins") -> tuple[Any, str, str]:
    """A fleet whose devices ``first`` and ``twin`` boot the same unknown digest.

    ``between`` clean devices are attested between them. Returns the fleet and the two
    device ids.
    """
    from pybb.attestation import Fleet, Reason, generate_fleet

    tampered = generate_fleet(12, seed=3, mix={"tampered_component": 1.0})
    device = next(
        d for d in tampered.devices if tampered.truth[d].reason is Reason.TAMPERED_COMPONENT
    )
    first = dataclasses.replace(tampered.load(device), device="first")
    twin = dataclasses.replace(first, device="twin")
    clean = generate_fleet(between, seed=1, mix={"clean": 1.0})
    middle = [
        dataclasses.replace(clean.load(d), device=f"clean-{i}") for i, d in enumerate(clean.devices)
    ]
    fleet = Fleet.of(tampered.classes.values(), [first, *middle, twin], name=name)
    return fleet, "first", "twin"

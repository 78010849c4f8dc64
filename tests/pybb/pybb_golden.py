"""RA-09's recorded runs: a scenario as JSON, how to run it, and what to record of the run.

A scenario names its predicates and sources from a fixed menu (so a fixture is data, not
code), its entries, routes and the scripted resolutions. ``replay(scenario)`` runs it
through the current code on a fresh memory board with a fake clock, and returns the
board digest and the sequence of the controller's decisions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from blackboard import Written
from pybb import (
    AttemptError,
    Blackboard,
    BlackboardEntry,
    Controller,
    KnowledgeSource,
    RetryPolicy,
)
from pybb.testing import FakeClock

SCHEMA = 2
"""The fixture format; a fixture of another schema needs a migration before it replays.

1: every first verdict and every restore a record of its own. 2 (docs/adr/0026): a new
entry's first verdict is in its dispatch, a failure handoff's restore in the handoff;
fixtures keep the board's log, so the next change of format can migrate them too."""

PREDICATES: dict[str, Callable[[Any], bool]] = {
    "lt3": lambda m: m < 3,
    "gt0": lambda m: m > 0,
    "eq0": lambda m: m == 0,
    "even": lambda m: m % 2 == 0,
}

SCALAR_KINDS = ("add", "set", "half", "raise", "confirm", "report", "noop")
COMPONENT_KINDS = ("add", "set", "half", "raise", "rogue", "noop")


class MenuSource(KnowledgeSource):
    """A source whose behaviour is one of the menu's kinds, with one argument."""

    def __init__(self, spec: dict[str, Any]) -> None:
        retry = spec.get("retry")
        super().__init__(
            spec["name"],
            spec["max_attempts"],
            component=spec.get("component"),
            retry=None if retry is None else RetryPolicy(timedelta(seconds=retry[0]), retry[1]),
        )
        self.kind: str = spec["kind"]
        self.arg: Any = spec.get("arg")  # the kind's one argument, as the scenario's JSON has it

    def execute(self, blackboard: Blackboard, key: str) -> Any:
        measurement = blackboard.get_entry(key).measurement
        value = measurement[self.component] if self.component else measurement
        kind, arg = self.kind, self.arg
        if kind in ("raise", "confirm") and (kind == "raise" or value in arg):
            raise AttemptError(f"{self.name} refuses {value}", report={"value": value})
        if kind == "report":
            blackboard.report(key, {"saw": value})
        if kind == "rogue":
            blackboard.write_component(key, arg, 0)
        if kind in ("confirm", "report", "rogue", "noop"):
            return None
        compute: dict[str, Callable[[], Any]] = {
            "add": lambda: value + arg,
            "set": lambda: arg,
            "half": lambda: value // 2,
        }
        new = compute[kind]()
        if self.component:
            blackboard.write_component(key, self.component, new)
            return None
        return new


def build(scenario: dict[str, Any], *, write: bool = True) -> tuple[Blackboard, Controller]:
    """A fresh memory board and controller for ``scenario``, its entries written if ``write``."""
    board = Blackboard(board_id="golden")
    controller = Controller(board, max_cycles=scenario["max_cycles"], clock=FakeClock())
    for name in PREDICATES:
        controller.register_predicate(name, PREDICATES[name])
    sources = {spec["name"]: MenuSource(spec) for spec in scenario["sources"]}
    for source in sources.values():
        controller.add_ks(source)

    def chains(route: dict[str, list[str]]) -> dict[str, list[KnowledgeSource]]:
        return {side: [sources[n] for n in route.get(side, [])] for side in ("on_pass", "on_fail")}

    for predicate, route in scenario["predicate_routes"].items():
        controller.route_predicate(predicate, **chains(route))
    for key, route in scenario["routes"].items():
        controller.route(key, **chains(route))
    if not write:
        return board, controller
    with board.batch():
        for spec in scenario["entries"]:
            entry = BlackboardEntry(
                predicate=spec.get("predicate"),
                conditions=spec.get("conditions"),
                measurement=spec["measurement"],
            )
            board.write_entry(spec["key"], entry, segment=spec.get("segment", "certify"))
    return board, controller


def replay(
    scenario: dict[str, Any],
    controller_class: type[Controller] = Controller,
    *,
    built: tuple[Blackboard, Controller] | None = None,
) -> dict[str, Any]:
    """Run a scenario; return its digest, decisions and summary.

    ``built``: the board and controller to run it on (default: ``build(scenario)``), e.g.
    a board ``write_log`` made from part of an earlier run's log, to run it on from there.
    """
    board, controller = build(scenario) if built is None else built
    controller.__class__ = controller_class
    summaries = [controller.run()]
    for answer in scenario["resolutions"]:
        escalated = sorted(board.escalate, key=lambda k: _escalation_seq(board, k))
        if answer["nth"] < len(escalated):
            controller.resolve(
                escalated[answer["nth"]],
                answer["decision"],
                by=answer["by"],
                at=datetime.fromisoformat(answer["at"]),
                measurement=answer.get("measurement"),
            )
        summaries.append(controller.run())
    last = summaries[-1]
    return {
        "digest": board.digest(),
        "decisions": decisions(board),
        "log": board_log(board),
        "summary": {
            "halted": last.halted.value,
            "cycles": last.cycles,
            "good": last.good,
            "escalated": last.escalated,
            "resolved": last.resolved,
        },
    }


def _escalation_seq(board: Blackboard, key: str) -> int:
    escalation = board.get_escalation(key)
    return 0 if escalation is None else escalation.sequence


def decisions(board: Blackboard) -> list[list[Any]]:
    """Every record as ``[seq, kind, writer, key, decision]``, the decision in a few words."""
    return [
        [event.sequence, event.kind, event.writer, event.key, _decision(event.kind, event.data)]
        for event in board.get_history()
    ]


def _decision(kind: str, data: Any) -> str:
    if kind == "verdict":
        return _verdict(data)
    if kind == "dispatch":
        chain = f"{data['chain']}:{','.join(data['sources'])}"
        return f"{_verdict(data)};{chain}" if "good_standing" in data else chain
    if kind == "attempt":
        return f"{data['status']}:{data.get('error', '')}"
    if kind == "handoff":
        handoff = f"{data['reason']}:{data['to']}"
        restored = data.get("restore")
        return f"{_restored(restored)};{handoff}" if restored else handoff
    if kind == "restore":
        return _restored(data)
    if kind == "escalation":
        return f"{data['reason']}:{data['source']}"
    if kind == "resolution":
        return str(data["decision"])
    return ""


def _verdict(data: Any) -> str:
    return "good" if data["good_standing"] else "bad"


def _restored(data: Any) -> str:
    return str(data.get("component") or "whole")


# -- the board's log, and its migration ---------------------------------------------------------

LogRecord = list[Any]
"""``[sequence, kind, region, writer, content, version, idempotency_key]`` of one record."""


def fixture_text(fixture: dict[str, Any]) -> str:
    """A fixture as its file holds it: one line per decision and per log record."""
    lines = ["{"]
    for index, name in enumerate(sorted(fixture)):
        value = fixture[name]
        comma = "," if index < len(fixture) - 1 else ""
        if name in ("decisions", "log"):
            rows = [json.dumps(row, sort_keys=True) for row in value]
            lines.append(f' "{name}": [')
            lines.extend(f"  {row}{',' if i < len(rows) - 1 else ''}" for i, row in enumerate(rows))
            lines.append(f" ]{comma}")
        else:
            lines.append(f' "{name}": {json.dumps(value, sort_keys=True)}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def board_log(board: Blackboard) -> list[LogRecord]:
    """Every record of the board, as a fixture keeps it."""
    return [
        [r.sequence, r.kind.value, r.region, r.writer, r.content, r.version, r.idempotency_key]
        for r in board.model.reader.log()
    ]


def write_log(log: list[LogRecord], scenario: dict[str, Any]) -> tuple[Blackboard, Controller]:
    """A fresh board holding exactly ``log``, with the controller ``scenario`` builds for it.

    The records go through the kernel's own write path (its sequence, its idempotency
    keys, pybb's admission rule), not round it; the board's own opening records it
    writes itself.
    """
    board, controller = build(scenario, write=False)
    control = board.model.control
    for sequence, kind, region, writer, content, version, once in log:
        if writer == "@board":
            continue
        if kind == "premise":
            written = control.set_premise(
                writer, region, content, expected_version=version - 1, idempotency_key=once
            )
        else:
            written = control.write(writer, region, content, idempotency_key=once)
        assert isinstance(written, Written), (sequence, written)
        assert written.sequence == sequence, (sequence, written.sequence)
    return board, controller


def migrate_log(log: list[LogRecord]) -> list[LogRecord]:
    """A schema-1 board log as schema 2 writes it (docs/adr/0026); a schema-2 log unchanged.

    A new entry's first verdict goes into its dispatch, which takes the verdict's place
    in the log, with the ``empty_chain`` escalation that followed it; a failure
    handoff takes the restore just before it. Every other record keeps its order.
    """
    records = [list(record) for record in log]
    folded: list[LogRecord | None] = list(records)
    moves: dict[int, list[LogRecord]] = {}  # a first verdict's index -> what takes its place
    dispatched: set[str] = set()
    firsts: dict[str, int] = {}  # record key -> index of its first, undispatched verdict
    for index, record in enumerate(records):
        region, writer, content = record[2:5]
        key = content.get("key") if isinstance(content, dict) else None
        if writer != "controller" or key is None:
            continue
        if region == "pybb.verdicts" and key not in dispatched:
            firsts.setdefault(key, index)
        elif region == "pybb.dispatches":
            dispatched.add(key)
            first = firsts.pop(key, None)
            if first is None or "good_standing" in content:
                continue
            verdict = records[first][4]
            moved = [[*record[:4], {**verdict, **content}, *record[5:]]]
            after = records[index + 1] if index + 1 < len(records) else None
            if (
                after is not None
                and after[2] == "pybb.escalations"
                and after[4].get("key") == key
                and after[4].get("reason") == "empty_chain"
            ):
                moved.append(after)
                folded[index + 1] = None
            folded[first] = folded[index] = None
            moves[first] = moved
        elif region == "pybb.handoffs" and "restore" not in content and index:
            before = records[index - 1]
            if (
                before[2] == "pybb.restores"
                and before[3] == "controller"
                and before[4].get("key") == key
            ):
                restored = {k: v for k, v in before[4].items() if k != "key"}
                folded[index - 1] = None
                folded[index] = [*record[:4], {**content, "restore": restored}, *record[5:]]
    migrated: list[LogRecord] = []
    for index, kept in enumerate(folded):
        if index in moves:
            migrated.extend(moves[index])
        elif kept is not None:
            migrated.append(kept)
    return [[sequence, *record[1:]] for sequence, record in enumerate(migrated, start=1)]


# -- generating scenarios ---------------------------------------------------------------------


def scenario(seed: int) -> dict[str, Any]:
    """A random but reproducible scenario."""
    rng = random.Random(seed)
    scalar_sources = [_source(rng, f"s{i}", None, SCALAR_KINDS) for i in range(rng.randint(1, 4))]
    component_sources = [
        _source(rng, f"c{i}", rng.choice("xy"), COMPONENT_KINDS) for i in range(rng.randint(0, 3))
    ]
    entries: list[dict[str, Any]] = []
    routes: dict[str, dict[str, list[str]]] = {}
    for i in range(rng.randint(2, 10)):
        key = f"e{i}"
        if component_sources and rng.random() < 0.3:
            conditions = {"x": rng.choice(list(PREDICATES)), "y": rng.choice(list(PREDICATES))}
            measurement = {"x": rng.randint(-4, 9), "y": rng.randint(-4, 9)}
            entries.append({"key": key, "conditions": conditions, "measurement": measurement})
            chain = rng.sample(component_sources, rng.randint(1, len(component_sources)))
            routes[key] = {"on_fail": [s["name"] for s in chain]}
        else:
            spec = {
                "key": key,
                "predicate": rng.choice(list(PREDICATES)),
                "measurement": rng.randint(-4, 12),
            }
            if rng.random() < 0.05:
                spec["segment"] = "escalate"
            entries.append(spec)
    predicate_routes = {}
    for predicate in PREDICATES:
        if rng.random() < 0.8:
            on_fail = rng.sample(scalar_sources, rng.randint(0, len(scalar_sources)))
            on_pass = rng.sample(scalar_sources, rng.randint(0, 1)) if rng.random() < 0.4 else []
            predicate_routes[predicate] = {
                "on_fail": [s["name"] for s in on_fail],
                "on_pass": [s["name"] for s in on_pass],
            }
    resolutions = []
    for nth in range(rng.randint(0, 2)):
        at = datetime(2026, 4, 1, tzinfo=UTC) + timedelta(hours=nth)
        answer = {
            "nth": 0,
            "decision": rng.choice(["accept", "set 0", "dismiss"]),
            "by": "human:eve",
        }
        answer["at"] = at.isoformat()
        if answer["decision"] == "set 0":
            answer["measurement"] = 0
        resolutions.append(answer)
    return {
        "sources": scalar_sources + component_sources,
        "routes": routes,
        "predicate_routes": predicate_routes,
        "entries": entries,
        "resolutions": [r for r in resolutions if not _pair_answer(r, entries)],
        "max_cycles": rng.choice([3, 50]),
    }


def _pair_answer(answer: dict[str, Any], entries: list[dict[str, Any]]) -> bool:
    # a scalar answer cannot resolve a pair; keep answers without a measurement for pairs
    return "measurement" in answer and any("conditions" in e for e in entries)


def _source(
    rng: random.Random, name: str, component: str | None, kinds: tuple[str, ...]
) -> dict[str, Any]:
    kind = rng.choice(kinds)
    spec: dict[str, Any] = {"name": name, "kind": kind, "max_attempts": rng.randint(1, 3)}
    if component is not None:
        spec["component"] = component
    if kind == "add":
        spec["arg"] = rng.choice([-3, -1, 1, 2])
    elif kind == "set":
        spec["arg"] = rng.randint(-2, 4)
    elif kind == "confirm":
        spec["arg"] = rng.sample(range(-4, 13), 4)
    elif kind == "rogue":
        spec["arg"] = "y" if component == "x" else "x"
    if rng.random() < 0.2:
        spec["retry"] = [rng.randint(1, 3), rng.choice([1.0, 2.0])]
    return spec

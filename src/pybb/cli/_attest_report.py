"""``pybb attest``'s reports: the JSON's human-loop keys, ``--html``, ``--csv`` and ``--jsonl``.

Every report is made from one JSON object (:func:`report_data`), so the page, the CSV
and the JSON say the same thing. The page is one self-contained file: inline CSS,
inline script, inline SVG charts drawn by ``pygal`` (see docs/adr/0017-report-charts.md);
a Content-Security-Policy meta tag forbids every request and every script but its own,
so a device name that slipped through escaping could still not run or fetch anything.
Everything a device, a fleet folder or a person supplied (device and class names,
event descriptions, notes) is escaped where it is placed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pybb.attestation import DeviceOutcome, FleetReport
from pybb.cli._attest_shared import atomic_write

__all__ = [
    "CSV_COLUMNS",
    "render_html",
    "report_data",
    "write_csv",
    "write_html",
    "write_jsonl",
    "write_outputs",
]

CSV_COLUMNS = (
    "device",
    "class",
    "outcome",
    "tier",
    "reason",
    "truth",
    "correct",
    "budget_decision",
    "ask_id",
    "decided_by",
    "decision",
    "decided_at",
    "via",
    "note",
)
"""The columns of ``--csv``, in order."""

_OUTCOME_COLOURS = {
    "passed": "#2e7d32",
    "repaired": "#1565c0",
    "escalated": "#c62828",
    "resolved": "#6a1b9a",
    "pending": "#757575",
}


# -- the data -------------------------------------------------------------------------------------


def report_data(
    store: str, board_id: str, report: FleetReport, blackboard: Any = None
) -> dict[str, Any]:
    """The JSON report: the fleet report, plus who decided what and the budget's decision.

    Args:
        store: The store's URL, as given.
        board_id: The board.
        report: The fleet report.
        blackboard: The run's blackboard when it holds the human loop (``--inbox``);
            ``None``: no human loop ran, and the new keys say so with ``null``.
    """
    data: dict[str, Any] = {"store": store, "board_id": board_id, **report.to_json()}
    records: Mapping[str, Any] = {}
    budget: Any = None
    if blackboard is not None:
        # Loaded only for a run with the human loop: the plain run loads no buddhi.
        from pybb.supervision import budget_summary, human_record

        records = human_record(blackboard)
        summary = budget_summary(blackboard, records)
        budget = None if summary is None else summary.to_json()
    data["human_loop"] = budget is not None
    data["budget"] = budget
    for device in data["devices"]:
        record = records.get(device["device"])
        device["budget_decision"] = None if record is None else record.budget_decision
        device["human"] = None if record is None else record.to_json()
    return data


def write_outputs(
    data: Mapping[str, Any],
    *,
    html_path: Path | None = None,
    csv_path: Path | None = None,
    jsonl_path: Path | None = None,
) -> list[Path]:
    """Write the reports asked for; return the paths written.

    Raises:
        OSError: A file could not be written (an older one is left whole).
    """
    written = []
    if html_path is not None:
        write_html(data, html_path)
        written.append(html_path)
    if csv_path is not None:
        write_csv(data, csv_path)
        written.append(csv_path)
    if jsonl_path is not None:
        write_jsonl(data, jsonl_path)
        written.append(jsonl_path)
    return written


def write_html(data: Mapping[str, Any], path: Path) -> None:
    """Write the self-contained HTML page of the report."""
    atomic_write(path, render_html(data))


def write_csv(data: Mapping[str, Any], path: Path) -> None:
    """Write one CSV row per device (:data:`CSV_COLUMNS`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for device in data["devices"]:
        writer.writerow([_cell(value) for value in _row(device)])
    atomic_write(path, buffer.getvalue())


def write_jsonl(data: Mapping[str, Any], path: Path) -> None:
    """Write one JSON object per device and line (the JSON report's ``devices[]``)."""
    lines = (json.dumps(device, separators=(",", ":")) for device in data["devices"])
    atomic_write(path, "".join(f"{line}\n" for line in lines))


def _row(device: Mapping[str, Any]) -> list[Any]:
    human = device.get("human") or {}
    decision = human.get("decision") or {}
    truth = device.get("truth") or {}
    return [
        device["device"],
        device.get("class"),
        device["outcome"],
        device.get("tier"),
        device.get("reason"),
        truth.get("kind"),
        device.get("correct"),
        device.get("budget_decision"),
        human.get("ask_id"),
        decision.get("by"),
        decision.get("decision"),
        decision.get("at"),
        decision.get("via"),
        decision.get("note"),
    ]


def _cell(value: Any) -> str:
    """A CSV cell; text a spreadsheet would run as a formula is quoted with ``'``."""
    if value is None:
        return ""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


# -- the page -------------------------------------------------------------------------------------


def render_html(data: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (no request leaves it)."""
    devices: Sequence[Mapping[str, Any]] = data["devices"]
    script = _SCRIPT
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; form-action 'none'; base-uri 'none'"
    )
    fleet = str(data.get("fleet", ""))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(policy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>pybb attest: {_e(fleet)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>Attestation report: fleet {_e(fleet)}</h1>",
        f'<p class="meta">board {_e(data.get("board_id"))} in {_e(data.get("store"))}; '
        f"{len(devices)} devices; written {_e(datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'))}"
        "</p></header>",
        '<nav><a href="#summary">Summary</a> <a href="#pictures">Pictures</a> '
        '<a href="#decided">Decided</a> <a href="#not-asked">Not asked</a> '
        '<a href="#devices">Devices</a> <a href="#findings">Findings</a></nav>',
        _summary_section(data),
        _pictures_section(data),
        _decided_section(data),
        _not_asked_section(data),
        _devices_section(devices),
        _findings_section(devices),
        f"<script>{script}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _summary_section(data: Mapping[str, Any]) -> str:
    devices: Sequence[Mapping[str, Any]] = data["devices"]
    counts: Mapping[str, int] = {k: v for k, v in data["summary"].items() if isinstance(v, int)}
    cards = "".join(
        f'<div class="card" style="border-color:{_OUTCOME_COLOURS.get(o, "#999")}">'
        f'<span class="n">{n}</span> {_e(o)}</div>'
        for o, n in counts.items()
    )
    rows: dict[tuple[str, str], Counter[str]] = {}
    for d in devices:
        rows.setdefault((d["outcome"], d.get("reason") or ""), Counter())[d.get("tier") or "-"] += 1
    order = [o.value for o in DeviceOutcome]
    body = "".join(
        f"<tr><td>{_e(outcome)}</td><td>{_e(reason)}</td>"
        f"<td>{_e(', '.join(f'{t} {c}' for t, c in sorted(tiers.items())))}</td>"
        f'<td class="num">{sum(tiers.values())}</td></tr>'
        for (outcome, reason), tiers in sorted(
            rows.items(), key=lambda r: (_index(order, r[0][0]), r[0][1])
        )
    )
    table = (
        "<table><thead><tr><th>outcome</th><th>reason</th><th>decided by tier</th>"
        f"<th>devices</th></tr></thead><tbody>{body}</tbody><tfoot><tr><td>total</td><td></td>"
        f'<td></td><td class="num">{len(devices)}</td></tr></tfoot></table>'
    )
    parts = [f'<section id="summary"><h2>Summary</h2><div class="cards">{cards}</div>', table]
    accuracy = data.get("accuracy")
    if isinstance(accuracy, Mapping):
        kinds = "".join(
            f"<tr><td>{_e(kind)}</td><td class='num'>{row['devices']}</td>"
            f"<td class='num'>{row['correct']}</td>"
            f"<td class='num'>{row['correct'] / max(row['devices'], 1):.1%}</td></tr>"
            for kind, row in accuracy.get("by_kind", {}).items()
        )
        parts.append(
            "<h3>Accuracy against ground truth</h3><table><thead><tr><th>ground truth</th>"
            "<th>devices</th><th>landed as expected</th><th>accuracy</th></tr></thead>"
            f"<tbody>{kinds}</tbody><tfoot><tr><td>total</td>"
            f"<td class='num'>{accuracy['known']}</td><td class='num'>{accuracy['correct']}</td>"
            f"<td class='num'>{accuracy['rate']:.1%}</td></tr></tfoot></table>"
        )
    parts.append(_budget(data))
    parts.append("</section>")
    return "\n".join(parts)


def _budget(data: Mapping[str, Any]) -> str:
    budget = data.get("budget")
    if not isinstance(budget, Mapping):
        return (
            '<p class="note" id="no-human-loop">No human loop ran: this fleet was attested '
            "without <code>--inbox</code>, so no person was asked and the budget decided "
            "nothing.</p>"
        )
    decided = ", ".join(f"{_e(k)} {v}" for k, v in budget.get("by_decision", {}).items())
    return (
        '<h3>Attention budget</h3><p id="budget">'
        f"limit {_e(_num(budget.get('limit')))} asks, spent {_e(_num(budget.get('spent')))}; "
        f"<b>{budget['asked']}</b> escalation(s) asked, <b>{budget['denied']}</b> denied by "
        f"the budget ({decided or 'none'}).</p>"
    )


# -- the pictures ---------------------------------------------------------------------------------


def _pictures_section(data: Mapping[str, Any]) -> str:
    devices: Sequence[Mapping[str, Any]] = data["devices"]
    parts = ['<section id="pictures"><h2>Pictures</h2><div class="charts">']
    parts.append(_figure("Outcome by class", _outcome_by_class(devices)))
    escalated = data["summary"].get("escalated_by_reason") or {}
    if escalated:
        parts.append(_figure("Escalations by reason", _by_reason(escalated)))
    parts.append("</div>")
    parts.append(_heat_map(devices))
    timeline = _timeline(devices)
    if timeline is not None:
        parts.append(_figure("Timeline of escalations, asks and answers", timeline, wide=True))
    parts.append("</section>")
    return "\n".join(parts)


def _figure(caption: str, svg: str, *, wide: bool = False) -> str:
    cls = "chart wide" if wide else "chart"
    return f'<figure class="{cls}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _pygal() -> Any:
    """pygal, without the import hook it installs for its map plugins.

    ``import pygal`` appends a finder to ``sys.meta_path`` that lacks ``find_spec``,
    so every later failed import in the process warns (``ImportWarning``); the report
    uses no map plugin, so the finder is taken out again.
    """
    import pygal

    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "PluginImportFixer"]
    return pygal


def _style(colours: Sequence[str] = tuple(_OUTCOME_COLOURS.values())) -> Any:
    _pygal()
    from pygal.style import Style

    return Style(
        background="white",
        plot_background="white",
        font_family="system-ui, sans-serif",
        colors=tuple(colours),
        title_font_size=14,
        legend_font_size=12,
        label_font_size=11,
    )


def _svg(chart: Any) -> str:
    """The chart as inline SVG without pygal's own script (its tooltips need a CDN)."""
    tree = chart.render_tree()
    for parent in list(tree.iter()):
        for child in list(parent):
            if not isinstance(child.tag, str) or child.tag.endswith("script"):
                parent.remove(child)  # comments (pygal's links) and the config script
    return ET.tostring(tree, encoding="unicode")


def _config() -> dict[str, Any]:
    return {
        "js": [],
        "disable_xml_declaration": True,
        "style": _style(),
        "width": 640,
        "height": 360,
        "legend_at_bottom": True,
        "truncate_label": 24,
        "truncate_legend": 24,
    }


def _outcome_by_class(devices: Sequence[Mapping[str, Any]]) -> str:
    pygal = _pygal()

    classes = sorted({_class(d) for d in devices})
    table = Counter((_class(d), d["outcome"]) for d in devices)
    present = [o for o in _OUTCOME_COLOURS if any(table[(c, o)] for c in classes)]
    tallest = max((sum(table[(c, o)] for o in present) for c in classes), default=0)
    chart = pygal.StackedBar(
        **{**_config(), "style": _style([_OUTCOME_COLOURS[o] for o in present])},
        x_label_rotation=20 if len(classes) > 4 else 0,
        y_labels=_ticks(tallest),
    )
    chart.title = "devices per class, by outcome"
    chart.x_labels = classes
    for outcome in present:  # the style's colours go by series position
        chart.add(outcome, [table[(c, outcome)] or None for c in classes])
    return _svg(chart)


def _ticks(top: int) -> list[int]:
    """Whole-number axis labels from 0 to at least ``top``, at most about ten of them."""
    step = 1
    while top / step > 10:
        step = step * 5 // 2 if str(step).startswith("2") else step * 2  # 1, 2, 5, 10, 20, …
    return list(range(0, top + step, step))


def _by_reason(escalated: Mapping[str, int]) -> str:
    pygal = _pygal()

    config = {**_config(), "style": _style(("#c62828",)), "show_legend": False}
    config["y_labels"] = _ticks(max(escalated.values()))
    chart = pygal.HorizontalBar(**config)
    chart.title = "escalated devices per reason"
    chart.x_labels = list(escalated)
    chart.add("escalated", list(escalated.values()))
    return _svg(chart)


def _failed_pcrs(device: Mapping[str, Any]) -> set[int]:
    report = device.get("report") or {}
    return {
        f["pcr"]
        for f in report.get("findings", ())
        if isinstance(f, Mapping)
        and f.get("reason") != "sanctioned_update"
        and isinstance(f.get("pcr"), int)
    }


def _heat_map(devices: Sequence[Mapping[str, Any]]) -> str:
    """Class × PCR: how many devices had an unexplained finding there (a coloured table).

    pygal has no heat map; a table with one shaded cell per class and PCR says the same
    and keeps every number readable (and selectable) by a person.
    """
    cells: Counter[tuple[str, int]] = Counter()
    for device in devices:
        for pcr in _failed_pcrs(device):
            cells[(_class(device), pcr)] += 1
    if not cells:
        return (
            '<h3>Failures by class and PCR</h3><p class="note">No device has an unexplained '
            "finding on a PCR.</p>"
        )
    classes = sorted({c for c, _ in cells})
    pcrs = sorted({p for _, p in cells})
    top = max(cells.values())
    head = "".join(f"<th>PCR {p}</th>" for p in pcrs)
    rows = []
    for name in classes:
        tds = []
        for pcr in pcrs:
            n = cells[(name, pcr)]
            alpha = 0.0 if n == 0 else 0.15 + 0.85 * n / top
            ink = "#fff" if alpha > 0.55 else "#222"
            title = f"{name}, PCR {pcr}: {n} device(s)"
            tds.append(
                f'<td class="num heat" title="{_e(title)}" '
                f'style="background:rgba(198,40,40,{alpha:.2f});color:{ink}">{n or ""}</td>'
            )
        rows.append(f"<tr><th scope='row'>{_e(name)}</th>{''.join(tds)}</tr>")
    return (
        "<h3>Failures by class and PCR</h3>"
        '<p class="note">Devices with an unexplained finding (not a sanctioned update) on '
        "each PCR; the darker, the more.</p>"
        f'<table class="heat-map" id="heat-map"><thead><tr><th>class</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


_TIMELINE_POINTS = 200


def _timeline(devices: Sequence[Mapping[str, Any]]) -> str | None:
    pygal = _pygal()

    series: dict[str, list[datetime]] = {"escalations decided": [], "asks": [], "decisions": []}
    for device in devices:
        human = device.get("human")
        if not isinstance(human, Mapping):
            continue
        for name, at in (
            ("escalations decided", human.get("decided_at")),
            ("asks", human.get("asked_at")),
            ("decisions", (human.get("decision") or {}).get("at")),
        ):
            when = _time(at)
            if when is not None:
                series[name].append(when)
    if not any(series.values()):
        return None
    start = min(t for times in series.values() for t in times)
    end = max(t for times in series.values() for t in times)
    unit, per = _unit((end - start).total_seconds())
    chart = pygal.XY(
        **{**_config(), "style": _style(("#c62828", "#1565c0", "#6a1b9a"))},
        show_dots=False,
        stroke_style={"width": 2},
        x_title=f"{unit} since the first escalation",
        value_formatter=lambda y: f"{y:.0f}",
        x_value_formatter=lambda x: f"{x:g}",
        y_title="escalations so far",
    )
    chart.width = 1000
    chart.title = "escalations decided; asks posted and decisions made (right axis)"
    for name, times in series.items():
        # Asks and decisions are a few where escalations are thousands: their own axis.
        label = name if name == "escalations decided" else f"{name} (right axis)"
        points = _steps(sorted(times), start, per) or [(0, 0)]
        chart.add(label, points, secondary=name != "escalations decided")
    return _svg(chart)


def _unit(span: float) -> tuple[str, float]:
    """The time unit a span of ``span`` seconds reads best in, and its length in seconds."""
    if span >= 3 * 3600:
        return "hours", 3600.0
    if span >= 3 * 60:
        return "minutes", 60.0
    return "seconds", 1.0


def _steps(times: list[datetime], start: datetime, per: float) -> list[tuple[float, int]]:
    """The cumulative count as a step line, thinned to at most ~200 points."""
    if not times:
        return []
    every = max(1, len(times) // _TIMELINE_POINTS)
    points: list[tuple[float, int]] = [(0.0, 0)]
    for n, at in enumerate(times, start=1):
        if n % every == 0 or n == len(times):
            x = round((at - start).total_seconds() / per, 3)
            points += [(x, points[-1][1]), (x, n)]
    return points


# -- the tables -----------------------------------------------------------------------------------


def _decided_section(data: Mapping[str, Any]) -> str:
    head = (
        '<section id="decided"><h2>Who decided what, and when</h2>'
        '<p class="note">Every escalation whose ask was answered, defaulted at its deadline, '
        "or resolved on the board otherwise.</p>"
    )
    rows = []
    for d in sorted(data["devices"], key=_decided_at):
        human = d.get("human")
        decision = (human or {}).get("decision")
        if not isinstance(decision, Mapping):
            continue
        applied = "" if decision.get("applied", True) else " (not applied yet)"
        rows.append(
            f"<tr><td>{_device_link(d)}</td><td>{_e(human.get('budget_decision'))}</td>"
            f"<td>{_e(decision.get('by'))}</td><td>{_e(decision.get('decision'))}{applied}</td>"
            f"<td>{_e(_when(decision.get('at')))}</td><td>{_e(decision.get('via'))}</td>"
            f"<td>{_e(decision.get('note'))}</td></tr>"
        )
    if not data.get("human_loop"):
        return head + '<p class="note">No human loop ran.</p></section>'
    if not rows:
        return head + '<p class="note">Nobody has decided an escalation yet.</p></section>'
    return (
        head + '<table id="decided-table"><thead><tr><th>device</th><th>budget</th><th>who</th>'
        "<th>what</th><th>when</th><th>how</th><th>note</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _decided_at(device: Mapping[str, Any]) -> str:
    """Sorts devices by when they were decided (ISO times in UTC sort as text)."""
    decision = (device.get("human") or {}).get("decision") or {}
    at = _time(decision.get("at"))
    return "" if at is None else at.astimezone(UTC).isoformat()


def _not_asked_section(data: Mapping[str, Any]) -> str:
    head = (
        '<section id="not-asked"><h2>Escalations the budget did not ask about</h2>'
        '<p class="note">Escalated devices no person was asked about: denied by the '
        "attention budget (which limit, how much spent), resolved before an ask, or left "
        "to the model.</p>"
    )
    if not data.get("human_loop"):
        return head + '<p class="note">No human loop ran.</p></section>'
    rows = []
    for d in data["devices"]:
        human = d.get("human")
        if not isinstance(human, Mapping) or human.get("ask_id"):
            continue
        denied = human.get("denied") or {}
        limit = ""
        if denied:
            limit = (
                f"{denied.get('limit')}: {_num(denied.get('spent'))} of "
                f"{_num(denied.get('ceiling'))} in {denied.get('scope')}"
            )
        rows.append(
            f"<tr><td>{_device_link(d)}</td><td>{_e(d.get('reason'))}</td>"
            f"<td>{_e(human.get('budget_decision'))}</td><td>{_e(limit)}</td>"
            f"<td>{_e(_when(human.get('decided_at')))}</td>"
            f"<td class='why'>{_e(human.get('reason'))}</td></tr>"
        )
    if not rows:
        return head + '<p class="note">The budget asked about every escalation.</p></section>'
    opened = " open" if len(rows) <= _OPEN_ROWS else ""
    return (
        head + f"<details{opened}><summary><b>{len(rows)}</b> escalation(s)</summary>"
        '<table id="not-asked-table"><thead><tr>'
        "<th>device</th><th>reason</th><th>budget</th><th>limit</th><th>when</th><th>why</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></details></section>"
    )


_OPEN_ROWS = 50
"""Up to this many rows, the not-asked table is shown unfolded."""


def _devices_section(devices: Sequence[Mapping[str, Any]]) -> str:
    outcomes = sorted(
        {d["outcome"] for d in devices}, key=lambda o: _index(list(_OUTCOME_COLOURS), o)
    )
    reasons = sorted({d.get("reason") or "" for d in devices} - {""})
    options = "".join(f'<option value="{_e(o)}">{_e(o)}</option>' for o in outcomes)
    reason_options = "".join(f'<option value="{_e(r)}">{_e(r)}</option>' for r in reasons)
    rows = []
    for d in devices:
        human = d.get("human") or {}
        decision = human.get("decision") or {}
        truth = d.get("truth") or {}
        correct = d.get("correct")
        mark = "" if correct is None else ("✓" if correct else "✗")
        who = decision.get("by") or ""
        what = decision.get("decision") or ""
        rows.append(
            f'<tr data-outcome="{_e(d["outcome"])}" data-reason="{_e(d.get("reason") or "")}">'
            f"<td>{_device_link(d)}</td><td>{_e(d.get('class'))}</td>"
            f'<td><span class="o o-{_e(d["outcome"])}">{_e(d["outcome"])}</span></td>'
            f"<td>{_e(d.get('tier'))}</td><td>{_e(d.get('reason'))}</td>"
            f"<td>{_e(d.get('budget_decision'))}</td><td>{_e(who)}</td><td>{_e(what)}</td>"
            f"<td>{_e(truth.get('kind'))} {mark}</td></tr>"
        )
    return (
        '<section id="devices"><h2>Devices</h2><div class="filters">'
        '<label>filter <input id="filter-text" type="search" placeholder="device, class, '
        'reason, person…" autocomplete="off"></label> '
        f'<label>outcome <select id="filter-outcome"><option value="">all</option>{options}'
        "</select></label> "
        f'<label>reason <select id="filter-reason"><option value="">all</option>{reason_options}'
        '</select></label> <span id="shown"></span></div>'
        '<table id="device-table"><thead><tr><th>device</th><th>class</th><th>outcome</th>'
        "<th>tier</th><th>reason</th><th>budget</th><th>decided by</th><th>decision</th>"
        f"<th>ground truth</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _findings_section(devices: Sequence[Mapping[str, Any]]) -> str:
    blocks = []
    for d in devices:
        report = d.get("report")
        if d["outcome"] not in ("escalated", "resolved") or not isinstance(report, Mapping):
            continue
        findings = "".join(_finding_row(f) for f in report.get("findings", ()))
        omitted = report.get("omitted") or 0
        more = f"<p>… and {int(omitted)} more finding(s)</p>" if omitted else ""
        blocks.append(
            f'<details class="finding" id="{_anchor(d["device"])}"><summary>'
            f"<b>{_e(d['device'])}</b> {_e(report.get('title'))} "
            f"<span class='tag'>{_e(report.get('tier'))} tier</span> "
            f"<span class='tag'>{_e(d.get('budget_decision') or 'no human loop')}</span>"
            f"</summary>{_human_lines(d.get('human'))}"
            "<table><thead><tr><th>reason</th><th>PCR</th><th>event</th><th>type</th>"
            "<th>measured</th><th>expected</th><th>found</th><th>message</th></tr></thead>"
            f"<tbody>{findings}</tbody></table>{more}"
            f"<pre>{_e(d.get('text'))}</pre></details>"
        )
    if not blocks:
        return (
            '<section id="findings"><h2>Findings</h2><p class="note">No escalations.</p></section>'
        )
    return (
        f'<section id="findings"><h2>Findings of every escalation ({len(blocks)})</h2>'
        f"{''.join(blocks)}</section>"
    )


def _finding_row(finding: Any) -> str:
    if not isinstance(finding, Mapping):
        return ""
    bank = f"{finding['bank']}: " if finding.get("bank") else ""
    expected = f"{bank}{finding['expected']}" if finding.get("expected") else ""
    found = f"{bank}{finding['found']}" if finding.get("found") else ""
    return (
        f"<tr><td>{_e(finding.get('reason'))}</td><td>{_e(finding.get('pcr'))}</td>"
        f"<td>{_e(finding.get('event'))}</td><td>{_e(finding.get('event_type'))}</td>"
        f"<td class='desc'>{_e(finding.get('description'))}</td>"
        f"<td class='hex'>{_e(expected)}</td><td class='hex'>{_e(found)}</td>"
        f"<td>{_e(finding.get('message'))}</td></tr>"
    )


def _human_lines(human: Any) -> str:
    if not isinstance(human, Mapping):
        return '<p class="note">No human loop ran.</p>'
    lines = [
        f"budget: <b>{_e(human.get('budget_decision'))}</b> "
        f"({_e(human.get('reason'))}; {_e(_when(human.get('decided_at')))})"
    ]
    if human.get("ask_id"):
        lines.append(
            f"ask {_e(human['ask_id'])} posted {_e(_when(human.get('asked_at')))}, "
            f"{_e(human.get('ask_status'))}"
        )
    if human.get("closed_at"):
        lines.append(f"closed {_e(_when(human['closed_at']))}: {_e(human.get('closed_reason'))}")
    decision = human.get("decision")
    if isinstance(decision, Mapping):
        note = f"; note: “{_e(decision['note'])}”" if decision.get("note") else ""
        lines.append(
            f"decided <b>{_e(decision.get('decision'))}</b> by <b>{_e(decision.get('by'))}</b> "
            f"{_e(_when(decision.get('at')))} (via {_e(decision.get('via'))}){note}"
        )
    return "<ul class='human'>" + "".join(f"<li>{line}</li>" for line in lines) + "</ul>"


# -- small helpers --------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """``value`` as HTML text or attribute value (``None`` is empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _class(device: Mapping[str, Any]) -> str:
    return str(device.get("class") or "(unknown class)")


def _anchor(device: str) -> str:
    """An element id for a device (hex, so no name can break out of the attribute)."""
    return "d-" + hashlib.sha256(device.encode()).hexdigest()[:16]


def _device_link(device: Mapping[str, Any]) -> str:
    name = _e(device["device"])
    if device.get("report") and device["outcome"] in ("escalated", "resolved"):
        return f'<a href="#{_anchor(device["device"])}">{name}</a>'
    return name


def _index(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _when(value: Any) -> str:
    at = _time(value)
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "?" if value is None else str(value)


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 40px;
color:#222}
h1{font-size:22px;margin:18px 0 4px}h2{margin-top:32px;border-bottom:1px solid #ddd}
.meta,.note{color:#555}nav a{margin-right:12px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
thead th{background:#f4f4f4}.num{text-align:right}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.card{border-left:6px solid #999;background:#fafafa;padding:6px 12px;min-width:110px}
.card .n{font-size:22px;font-weight:600;display:block}
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure.chart{margin:0;flex:1 1 480px;max-width:640px}
figure.chart.wide{max-width:1000px;flex-basis:100%}
figure svg{width:100%;height:auto}figcaption{color:#555;font-size:12px}
.heat{min-width:44px}.filters{margin:8px 0}.filters label{margin-right:12px}
#device-table tr.hidden{display:none}
.o{padding:0 6px;border-radius:3px;color:#fff}
.o-passed{background:#2e7d32}.o-repaired{background:#1565c0}.o-escalated{background:#c62828}
.o-resolved{background:#6a1b9a}.o-pending{background:#757575}
details.finding{border:1px solid #ddd;margin:6px 0;padding:4px 8px}
details.finding summary{cursor:pointer}.tag{background:#eee;padding:0 5px;border-radius:3px}
pre{white-space:pre-wrap;background:#f8f8f8;padding:6px;font-size:12px}
.hex,.desc{font-family:ui-monospace,monospace;font-size:11px;word-break:break-all;max-width:260px}
.why{max-width:420px}
"""

_SCRIPT = """
(function () {
  "use strict";
  var text = document.getElementById("filter-text");
  var outcome = document.getElementById("filter-outcome");
  var reason = document.getElementById("filter-reason");
  var shown = document.getElementById("shown");
  var rows = Array.prototype.slice.call(
    document.querySelectorAll("#device-table tbody tr"));
  function apply() {
    var words = text.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var count = 0;
    rows.forEach(function (row) {
      var hay = row.textContent.toLowerCase();
      var ok = (!outcome.value || row.dataset.outcome === outcome.value) &&
        (!reason.value || row.dataset.reason === reason.value) &&
        words.every(function (w) { return hay.indexOf(w) !== -1; });
      row.classList.toggle("hidden", !ok);
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " devices shown";
  }
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
  text.addEventListener("input", apply);
  outcome.addEventListener("change", apply);
  reason.addEventListener("change", apply);
  apply();
})();
"""

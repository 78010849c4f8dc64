"""``pybb attest --html``'s page in a real browser (Debian's Chromium, driven by Playwright).

Opened from a file:// URL as a person opens it. Every request the page makes is routed:
anything but file: and data: is aborted and recorded, and the test fails on it. Each page
must render (the summary, the charts, every device's row), log no console error, run
nothing a device or a person supplied (their text carries HTML that would set
``window.__pwned``), and its filter must work. A screenshot is kept under
test-artifacts/report/. The negative control renders the page without escaping and
shows that the same checks catch it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from report_support import hostile_report, supervised_report

from pybb.cli import _attest_report
from pybb.cli._attest_report import write_html

CHROMIUM = Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / "test-artifacts" / "report"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser

if not CHROMIUM.exists() and not IN_CI:
    pytest.skip(
        "Debian's chromium is not installed (/usr/bin/chromium); apt-get install chromium "
        "to run the browser tests (under CI=true they must run)",
        allow_module_level=True,
    )

sync_api = pytest.importorskip("playwright.sync_api")

INJECTED = """
() => {
  const found = [];
  const scripts = document.querySelectorAll("script");
  if (scripts.length !== 1) found.push(scripts.length + " <script> elements");
  for (const el of document.querySelectorAll("*")) {
    for (const name of el.getAttributeNames()) {
      if (name.toLowerCase().startsWith("on")) found.push(el.tagName + "[" + name + "]");
    }
    const href = (el.getAttribute("href") || "").trim().toLowerCase();
    if (href && !href.startsWith("#")) found.push(el.tagName + " href=" + href);
    if (el.hasAttribute("src")) found.push(el.tagName + " src");
    if (["IMG", "IFRAME", "OBJECT", "EMBED"].includes(el.tagName.toUpperCase()))
      found.push("<" + el.tagName + ">");
  }
  if (window.__pwned !== undefined) found.push("window.__pwned = " + window.__pwned);
  return found;
}
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("CI=true and /usr/bin/chromium is missing; .ci/run must install chromium")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@dataclass
class Opened:
    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def injected(self) -> list[str]:
        found: list[str] = self.page.evaluate(INJECTED)
        return found

    def assert_clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.foreign == [], self.foreign
        assert all(u.startswith(("file:", "data:")) for u in self.requests), self.requests
        assert self.injected() == []


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    contexts: list[Any] = []

    def open_(path: Path) -> Opened:
        context = browser.new_context(viewport={"width": 1280, "height": 1600})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)

        def route(route: Any) -> None:
            url = route.request.url
            if url.startswith(("file:", "data:")):
                route.continue_()
            else:
                opened.foreign.append(url)
                route.abort()

        context.route("**/*", route)
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("pageerror", lambda e: opened.errors.append(f"pageerror: {e}"))
        page.on(
            "console",
            lambda m: (
                opened.errors.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.goto(path.as_uri(), wait_until="load")
        return opened

    yield open_
    for context in contexts:
        context.close()


def _visible_rows(page: Any) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = page.evaluate(
        """() => Array.from(document.querySelectorAll('#device-table tbody tr'))
            .filter(r => r.offsetParent !== null)
            .map(r => ({device: r.cells[0].textContent, outcome: r.dataset.outcome,
                        reason: r.dataset.reason}))"""
    )
    return rows


def test_the_report_of_a_supervised_run_renders_offline_and_its_filter_works(
    tmp_path: Path, open_page: Any
) -> None:
    data = supervised_report(tmp_path)
    path = tmp_path / "report.html"
    write_html(data, path)
    opened = open_page(path)
    page = opened.page
    devices = data["devices"]
    assert page.title() == f"pybb attest: {data['fleet']}"
    assert page.locator("#device-table tbody tr").count() == len(devices)
    assert page.locator("figure svg").count() >= 3  # outcome by class, reasons, timeline
    assert page.locator("#heat-map tbody tr").count() >= 1
    decided = [d for d in devices if (d["human"] or {}).get("decision")]
    assert decided and page.locator("#decided-table tbody tr").count() == len(decided)
    denied = [d for d in devices if d["budget_decision"] == "denied"]
    assert denied and page.locator("#not-asked-table tbody tr").count() == len(denied)
    escalated = [d for d in devices if d["outcome"] in ("escalated", "resolved")]
    assert page.locator("details.finding").count() == len(escalated)
    assert "asked" in page.locator("#budget").inner_text()
    opened.assert_clean()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)

    # The filter: a device's name, then an outcome, then a reason.
    one = denied[0]["device"]
    page.fill("#filter-text", one)
    assert [r["device"] for r in _visible_rows(page)] == [one]
    assert page.locator("#shown").inner_text() == f"1 of {len(devices)} devices shown"
    page.fill("#filter-text", "")
    page.select_option("#filter-outcome", "passed")
    shown = _visible_rows(page)
    assert len(shown) == sum(d["outcome"] == "passed" for d in devices) and shown
    assert {r["outcome"] for r in shown} == {"passed"}
    page.select_option("#filter-outcome", "")
    reason = escalated[0]["reason"]
    page.select_option("#filter-reason", reason)
    assert {r["reason"] for r in _visible_rows(page)} == {reason}
    page.select_option("#filter-reason", "")
    page.fill("#filter-text", "human:alice")  # words match any column: who decided
    by_device = {d["device"]: d for d in devices}
    alice = [r["device"] for r in _visible_rows(page)]
    assert alice and all(
        by_device[name]["human"]["decision"]["by"] == "human:alice" for name in alice
    )
    # A device's link opens its findings.
    page.fill("#filter-text", "")
    link = page.locator("#decided-table a").first
    target = link.get_attribute("href")
    link.click()
    assert page.locator(f"details{target}").get_attribute("open") is not None
    opened.assert_clean()


def test_hostile_names_and_notes_render_as_text(tmp_path: Path, open_page: Any) -> None:
    path = tmp_path / "hostile.html"
    write_html(hostile_report(), path)
    opened = open_page(path)
    page = opened.page
    assert page.locator("#device-table tbody tr").count() == 4
    assert "<script>window.__pwned=1</script>" in page.locator("#device-table").inner_text()
    assert "onload" in page.locator("#decided-table").inner_text()  # the note, as text
    page.locator("details.finding summary").first.click()
    assert "<img src=x" in page.locator("details.finding").first.inner_text()
    opened.assert_clean()
    page.screenshot(path=str(ARTIFACTS / "hostile.png"), full_page=True)


def test_control_without_escaping_the_same_checks_catch_it(
    tmp_path: Path, open_page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_attest_report, "_e", lambda value: "" if value is None else str(value))
    path = tmp_path / "unescaped.html"
    write_html(hostile_report(), path)
    opened = open_page(path)
    injected = opened.injected()
    assert any("script" in found for found in injected), injected
    assert any("[onerror]" in found.lower() for found in injected), injected
    # The page's CSP still stops the injected script and handler from running.
    assert any("Content Security Policy" in e for e in opened.errors), opened.errors
    assert "window.__pwned" not in " ".join(injected)

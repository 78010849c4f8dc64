"""The inbox's list page with 1,000 open asks: its HTML size and its render time in Chromium.

Run: ``python bench/inbox_page.py [--asks N] [--repeat R] [--shared K]``. A SQLite run gets
N open asks shaped like an attestation run's (title, a report of about 1.5 KB, the tier
report with its findings); ``--shared K`` gives K of them one root cause (one group),
the rest each their own. The real inbox is served by uvicorn on loopback; Debian's
Chromium logs in and loads ``/`` R times. Every ask carries its deadline and default, and
is assigned (the signed-in person's own, their team's, another team's), and the board
keeps people and reassignments, so every card has its reassign form. Printed: the page's
HTML size, the server's time to render it, and Chromium's time from navigation to the
load event (best and median of R). Targets (issue 15): under 300 KB and under 1 s. A
benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from blackboard import Premise, create_model
from pybb.human import (
    HUMAN_REGIONS,
    PEOPLE_REGIONS,
    Ask,
    AssignmentPolicy,
    AssignRule,
    DeadlinePolicy,
    Option,
    Person,
    answer_rule,
    compose_rules,
    post_ask,
    set_person,
)
from pybb.inbox import InboxServer, TokenTable, create_app

# Every card as it is at its heaviest: a deadline and default, an assignee, a reassign form.
DEADLINES = DeadlinePolicy(default="quarantine")
ROUTES = AssignmentPolicy(
    rules=(
        AssignRule("human:bench", klass="rhel9-shim"),
        AssignRule("team:ops", klass="arch-linux"),
    ),
    default="team:triage",
)

CHROMIUM = "/usr/bin/chromium"
_REPORT = (
    "[attribution tier] Device {device} ({cls}): a boot component differs and its digest is "
    "not allowed.\n"
    + "\n".join(
        f"  PCR {pcr}: found {'ab' * 16}… expected {'cd' * 16}… (EV_EFI_BOOT_SERVICES_APPLICATION)"
        for pcr in range(4, 12)
    )
    + "\nThe component measured into PCR 4 is the shim; its digest is not on the class "
    "allowlist, nor on the list of sanctioned updates. " * 3
)


def make_ask(n: int, shared: bool, at: datetime) -> Ask:
    """One attestation-like ask; ``shared`` asks have one root cause."""
    device, cls = f"dev-{n:05d}", ("rhel9-shim", "arch-linux", "uefi-sha1")[n % 3]
    digest = ("0" * 64) if shared else f"{n:064x}"
    finding = {"pcr": 4, "found": digest, "reason": "tampered_component",
               "event_type": "EV_EFI_BOOT_SERVICES_APPLICATION", "label": "shim"}  # fmt: skip
    tier = {
        "reason": "tampered_component", "class": "rhel9-shim" if shared else cls,
        "device": device, "findings": [finding],
        "allowlist_candidates": [{"class": cls, "pcr": 4, "digest": digest,
                                  "event_type": finding["event_type"], "label": "shim"}],
    }  # fmt: skip
    return Ask(
        ask_id=f"esc-{n}-{device}",
        entry=device,
        subject=f"{device} ({cls})",
        title=f"Device {device} ({cls}): a boot component differs and its digest is not allowed",
        report=_REPORT.format(device=device, cls=cls),
        options=(
            Option(
                "accept-digest",
                "Accept the new digest into the allowlist",
                detail="the vendor shipped a new shim",
            ),
            Option(
                "quarantine",
                "Quarantine the device",
                recommended=True,
                detail="a component nobody allowed booted: treat it as tampered",
            ),
            Option("remeasure", "Re-measure the device"),
        ),
        confidence=0.9,
        scope="fleet",
        created_at=at - timedelta(minutes=n % 300),
        report_data={"escalation": f"esc-{n}", "entry": device, "tier_report": tier},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--shared", type=int, default=300)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        model = create_model(
            regions=[*HUMAN_REGIONS, *PEOPLE_REGIONS, Premise("budget")],
            premises={"budget": {"fleet": {"spent": args.asks, "ceiling": args.asks + 20}}},
            admission_rule=compose_rules(answer_rule),
            store=f"sqlite:///{Path(folder) / 'run.db'}",
            board_id="bench-inbox",
        )
        now = datetime.now(UTC)
        for who, team in (("bench", "ops"), ("bob", "ops"), ("carol", "triage")):
            set_person(model.control, Person(f"human:{who}", teams=(team,)), writer="admin")
        for n in range(args.asks):
            post_ask(model.control, DEADLINES.stamp(make_ask(n, n < args.shared, now)))
        tokens = TokenTable()
        token = tokens.issue("bench")
        server = InboxServer("127.0.0.1", 0, quiet=True)
        with server.running(create_app(model, tokens, assignment=ROUTES)) as served:
            url = served.rstrip("/")
            with httpx.Client(base_url=url) as client:
                client.post("/login", data={"token": token})
                sizes, server_ms = [], []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    page = client.get("/")
                    server_ms.append((time.perf_counter() - started) * 1000)
                    sizes.append(len(page.content))
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless"])
                context = browser.new_context(base_url=url)
                tab = context.new_page()
                tab.goto("/login")
                tab.fill("#token", token)
                tab.click("form[action='/login'] button")
                tab.wait_for_url(url + "/")
                render_ms = []
                for _ in range(args.repeat):
                    tab.goto("/", wait_until="load")
                    timing = tab.evaluate(
                        "() => { const t = performance.getEntriesByType('navigation')[0];"
                        " return t.loadEventEnd - t.startTime; }"
                    )
                    render_ms.append(float(timing))
                cards = tab.locator("article.ask").count()
                browser.close()
        model.close()
    print(f"open asks: {args.asks} ({args.shared} with one root cause); cards on page 1: {cards}")
    print(f"HTML of /: {max(sizes) / 1024:.1f} KB (target < 300 KB)")
    median = statistics.median(server_ms)
    print(f"server render of /: best {min(server_ms):.0f} ms, median {median:.0f} ms")
    print(
        f"Chromium navigation to load event: best {min(render_ms):.0f} ms, "
        f"median {statistics.median(render_ms):.0f} ms (target < 1000 ms)"
    )


if __name__ == "__main__":
    main()

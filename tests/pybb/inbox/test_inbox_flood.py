"""RA-16, the inbox flood: 1,000 requests on loopback against ``pybb inbox`` itself.

The command runs in its own process with its default limits. Four clients (two people)
send a mix of pages, fragments, API reads and answers as fast as they can; the run is
bounded by count and by a deadline and stops by itself. No response may be a server
error; answers beyond the default rate get 429 and the answers admitted per person stay
within the bucket (burst + rate x time, +5 %); each ask is answered at most once; the
latency percentiles and the server's RSS growth are recorded in
test-artifacts/inbox/flood.json.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from inbox_support import ARTIFACTS, hostile_ask, new_board, post_asks, run_command

from pybb.human import ANSWERS
from pybb.inbox import InboxSettings, RateLimit, TokenTable

CLIENTS = 4
RATE = InboxSettings().answer_rate  # the command's default
NIGHTLY = os.environ.get("PYBB_NIGHTLY") == "1"
FLOOD_REQUESTS = 10_000 if NIGHTLY else 1_000
DEADLINE_S = 300.0 if NIGHTLY else 60.0
ASKS = 60


def _flood(
    url: str, token: str, count: int, offset: int, out: list[tuple[str, int, float]]
) -> None:
    auth = {"authorization": f"Bearer {token}"}
    deadline = time.monotonic() + DEADLINE_S
    with httpx.Client(base_url=url, timeout=10) as client:
        start = time.perf_counter()
        response = client.post("/login", data={"token": token}, headers={"origin": url})
        out.append(("login", response.status_code, time.perf_counter() - start))
        for i in range(count - 1):
            if time.monotonic() > deadline:
                break
            kind, method, path, kwargs = _request(i, offset, auth)
            start = time.perf_counter()
            response = client.request(method, path, **kwargs)
            out.append((kind, response.status_code, time.perf_counter() - start))


def _request(i: int, offset: int, auth: dict[str, str]) -> tuple[str, str, str, dict[str, Any]]:
    ask = f"ask-{(i * 7 + offset) % ASKS}"
    choice = i % 10
    if choice in (5, 6, 7):
        body = {"option": ["accept", "quarantine", "remeasure"][i % 3]}
        return "answer", "POST", f"/api/asks/{ask}/answer", {"json": body, "headers": auth}
    reads = {
        0: ("page", "/", {}),
        1: ("api", "/api/asks", {"headers": auth}),
        2: ("api", "/api/timeline?limit=30", {"headers": auth}),
        3: ("api", "/api/budget", {"headers": auth}),
        4: ("fragment", "/fragments/live", {}),
        8: ("page", f"/asks/{ask}", {}),
        9: ("api", "/api/me", {"headers": auth}),
    }
    kind, path, kwargs = reads[choice]
    return kind, "GET", path, kwargs


def test_a_flood_of_inbox_requests(tmp_path: Path, record_property: Any) -> None:
    model = new_board(tmp_path / "flood.db")
    post_asks(model, [hostile_ask(n) for n in range(ASKS)])
    model.close()
    tokens = TokenTable(tmp_path / "tokens.json")
    people = [tokens.issue("alice"), tokens.issue("bob")]
    results: list[list[tuple[str, int, float]]] = [[] for _ in range(CLIENTS)]
    store = f"sqlite:///{tmp_path / 'flood.db'}"
    with run_command(
        "--store", store, "--board-id", "run-1", "--token-file", str(tokens.path)
    ) as served:
        rss_before = served.rss_kib()
        began = time.monotonic()
        threads = [
            threading.Thread(
                target=_flood,
                args=(served.url, people[n % 2], FLOOD_REQUESTS // CLIENTS, n * 13, results[n]),
            )
            for n in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=DEADLINE_S + 30)
        elapsed = time.monotonic() - began
        rss_after = served.rss_kib()
        assert not any(t.is_alive() for t in threads)
    assert served.process.returncode == 0, served.err
    model = new_board(tmp_path / "flood.db")
    answers = model.reader.read_level(ANSWERS)
    model.close()

    flat = [r for rs in results for r in rs]
    statuses = Counter(status for _, status, _ in flat)
    latencies = sorted(seconds for _, _, seconds in flat)
    p50 = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    answer_statuses = Counter(s for kind, s, _ in flat if kind == "answer")
    rss_growth_mib = round((rss_after - rss_before) / 1024, 1)
    figures = {
        "requests": len(flat),
        "seconds": round(elapsed, 2),
        "requests_per_second": round(len(flat) / elapsed, 1),
        "p50_ms": round(p50 * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2),
        "statuses": dict(sorted(statuses.items())),
        "answer_statuses": dict(sorted(answer_statuses.items())),
        "rss_growth_mib": rss_growth_mib,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "flood.json").write_text(json.dumps(figures, indent=1))
    for key, value in figures.items():
        record_property(key, value)
    print(figures)

    assert len(flat) == FLOOD_REQUESTS
    assert not [s for s in statuses if s >= 500], statuses
    assert set(statuses) <= {200, 201, 303, 404, 409, 429}, statuses
    assert answer_statuses[429] > 0, "the flood must have met the rate limit"
    admitted = sum(n for s, n in answer_statuses.items() if s != 429)
    allowed = len(people) * (RATE.burst + RATE.per_minute / 60 * elapsed) * 1.05
    assert admitted <= allowed, (admitted, allowed)
    assert len({c.content["ask_id"] for c in answers}) == len(answers)  # one answer per ask
    assert rss_growth_mib <= 100
    assert p99 < 2.0, figures
    assert "Traceback" not in served.err


@pytest.mark.parametrize("seconds", [0.0, 1.0, 30.0])
def test_the_rate_limiter_admits_burst_then_the_rate(seconds: float) -> None:
    from pybb.inbox._ratelimit import RateLimiter

    now = [0.0]
    limiter = RateLimiter(RateLimit(per_minute=60, burst=5), clock=lambda: now[0])
    admitted = sum(limiter.take("alice") == 0.0 for _ in range(20))
    assert admitted == 5
    now[0] += seconds
    later = sum(limiter.take("alice") == 0.0 for _ in range(20))
    assert later == min(5, int(seconds))
    assert limiter.take("bob") == 0.0  # each key has its own bucket
    assert limiter.take("alice") > 0.0

"""``pybb attest --inbox`` with notifications, run as an operator runs it (a subprocess).

End to end, the command and people file docs/human-loop.md shows: the demo fleet's asks
are assigned to team ops; alice (email, from the people file) is mailed through a local
aiosmtpd server over STARTTLS, bob (no channel of his own) is reached at
--notify-webhook's URL, a local HTTP receiver that checks the HMAC signature; the mailed
link signs alice in (after a scanner's GET).
Every malformed option is refused with exit 2 and one sentence naming it, before the
store is touched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shlex
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_support import Child, refused, run

sys.path.insert(0, str(Path(__file__).resolve().parent / "human"))

from notify_support import self_signed, smtp_server, webhook_receiver

SECRET = "a-webhook-secret-of-32-bytes...."
PAGE = Path(__file__).resolve().parents[2] / "docs" / "human-loop.md"


def _documented() -> tuple[str, list[str]]:
    """The people file and the ``pybb attest`` command docs/human-loop.md shows."""
    text = PAGE.read_text(encoding="utf-8")
    people = re.search(r"^```json people\.json\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    shell = re.search(r"^```sh\n(export PYBB_WEBHOOK_SECRET.*?)^```", text, re.DOTALL | re.M)
    assert people is not None and shell is not None, "the CLI section of human-loop.md moved"
    lines = shell.group(1).replace("\\\n", " ").splitlines()
    command = shlex.split(next(line for line in lines if line.startswith("pybb attest")))
    return people.group(1), command[1:]


def _awake(people: str) -> str:
    """The documented people file with its quiet hours moved to hours that are not now.

    The page's example is quiet 22:00-07:00 in Berlin; run then, alice is rightly not
    mailed, so the test moves the window (same shape) to start six hours from now.
    """
    data = json.loads(people)
    start = datetime.now(UTC) + timedelta(hours=6)
    for person in data["people"]:
        if "quiet" in person:
            end = start + timedelta(hours=2)
            person["quiet"] = {"start": f"{start:%H:%M}", "end": f"{end:%H:%M}", "tz": "UTC"}
    return json.dumps(data)


def _link(mail: Any) -> str:
    return next(str(line).strip() for line in mail.get_content().splitlines() if "/link/" in line)


def _follow(link: str) -> httpx.Response:
    """What a browser does: GET the landing page, press its button (a POST with its CSRF)."""
    with httpx.Client() as scanner:
        assert scanner.get(link).status_code == 200  # a mail scanner's GET uses nothing
    with httpx.Client() as browser:
        page = browser.get(link)
        assert page.status_code == 200 and "Sign in and answer" in page.text
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        origin = link.split("/link/", 1)[0]
        signed_in = browser.post(link, data={"csrf": csrf}, headers={"origin": origin})
        assert signed_in.status_code == 303, signed_in.text
        ask = browser.get(origin + signed_in.headers["location"])
        assert ask.status_code == 200 and "human:alice" in ask.text
        return ask


def test_the_documented_command_notifies_by_email_and_webhook_and_the_link_signs_in(
    tmp_path: Path,
) -> None:
    people, command = _documented()
    (tmp_path / "people.json").write_text(_awake(people), encoding="utf-8")
    cert, key = self_signed(tmp_path)
    with webhook_receiver() as hook, smtp_server(tls=(cert, key)) as box:
        # the documented command, with its example hosts swapped for the local ones
        swapped = {"https://hooks.example.org/pybb": hook.url,
                   "smtp.example.org:587": f"127.0.0.1:{box.port}"}  # fmt: skip
        args = [swapped.get(word, word) for word in command]
        args += ["--inbox-port", "0", "--store", f"sqlite:///{tmp_path / 'run.db'}",
                 "--no-progress"]  # fmt: skip
        env = {"PYBB_WEBHOOK_SECRET": SECRET, "SSL_CERT_FILE": str(cert)}
        child = Child(args, cwd=tmp_path, env=env)
        try:
            child.wait_for(r"\d+ ask\(s\) open", timeout=240)
            # Delivery runs beside the run (its own thread, with retries): wait for it to
            # arrive rather than expect it by the time the run says how many asks are open.
            deadline = time.monotonic() + 120
            while not (box.messages and hook.received) and time.monotonic() < deadline:
                assert child.process.poll() is None, child.lines[-20:]
                time.sleep(0.2)
            assert box.messages and hook.received, child.lines[-20:]
            for headers, body in hook.received:
                expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                assert headers["X-Pybb-Signature"] == expected
            assert {json.loads(body)["person"] for _, body in hook.received} == {"human:bob"}
            assert {m["To"] for m in box.messages} == {"alice@example.org"}
            _follow(_link(box.messages[0]))
            child.process.send_signal(signal.SIGINT)
            code, text = child.finish()
        finally:
            child.kill()
    assert code == 0, text[-3000:]
    assert "Traceback" not in text and SECRET not in text
    assert "notifying team:ops of each ask by email, webhook" in text


BAD = [
    (["--notify-webhook", "ftp://hooks.example.org"], "--notify-webhook", "not an http(s) URL"),
    (["--notify-smtp", "smtp.example.org"], "--notify-smtp", "is not HOST:PORT"),
    (["--notify-smtp", "mail:99999"], "--notify-smtp", "is not HOST:PORT"),
    (["--notify-smtp", "mail:25", "--notify-from", "nobody"], "--notify-from", "email address"),
    (["--webhook-secret-env", "my secret"], "--webhook-secret-env", "variable's name"),
    (["--assign-to", "team:"], "--assign-to", "neither human:NAME nor team:NAME"),
    (["--notify-webhook", "http://127.0.0.1:9/h"], "PYBB_WEBHOOK_SECRET is not set", "export"),
    (["--notify-smtp", "127.0.0.1:25"], "--notify-smtp needs --notify-from", "From address"),
    (["--people", "missing.json", "--notify-smtp", "127.0.0.1:25", "--notify-from", "a@b"],
     "--people 'missing.json': there is no such file", "JSON file"),
    (["--people", "people.json", "--notify-smtp", "127.0.0.1:25", "--notify-from", "a@b"],
     "person 1:", "address"),
    (["--people", "team.json", "--notify-smtp", "127.0.0.1:25", "--notify-from", "a@b",
      "--assign-to", "team:ops"], "gives human:carol a webhook channel", "--notify-webhook"),
    (["--notify-smtp", "127.0.0.1:25", "--notify-from", "a@b"], "no channel for human:operator",
     "--notify-webhook"),
    (["--notify-webhook", "http://127.0.0.1:9/h", "--link-secret-env", "PYBB_SHORT"],
     "--link-secret-env: the links' secret variable PYBB_SHORT is shorter than 16", "export"),
    (["--notify-webhook", "http://127.0.0.1:9/h", "--link-secret-env", "PYBB_NOT_SET"],
     "PYBB_NOT_SET is not set", "--link-secret-env"),
    (["--link-secret-env", "PYBB_SHORT"], "--link-secret-env signs the links", "--notify-smtp"),
]  # fmt: skip


@pytest.mark.parametrize(("more", "named", "how"), BAD)
def test_malformed_notification_options_are_refused_before_the_store_is_touched(
    tmp_path: Path, more: list[str], named: str, how: str
) -> None:
    bad = [{"who": "human:alice", "channels": [{"kind": "email", "address": "not-mail"}]}]
    (tmp_path / "people.json").write_text(json.dumps(bad))
    team = [{"who": "human:carol", "teams": ["ops"],
             "channels": [{"kind": "webhook", "address": "http://127.0.0.1:9/c"}]}]  # fmt: skip
    (tmp_path / "team.json").write_text(json.dumps(team))
    before = sorted(tmp_path.iterdir())
    store = f"sqlite:///{tmp_path / 'run.db'}"
    env = {"PYBB_WEBHOOK_SECRET": SECRET, "PYBB_SHORT": "too-short"}
    if "--link-secret-env" not in more:
        env.pop("PYBB_WEBHOOK_SECRET")  # one case asks for the missing webhook secret
    done = run("attest", "--demo", "5", "--inbox", "--store", store, *more, cwd=tmp_path, env=env)
    refused(done, named, how)
    assert sorted(tmp_path.iterdir()) == before  # no store was created


def test_notification_options_need_the_inbox(tmp_path: Path) -> None:
    env = {"PYBB_WEBHOOK_SECRET": SECRET}
    done = run("attest", "--demo", "5", "--notify-webhook", "http://127.0.0.1:9/h",
               cwd=tmp_path, env=env)  # fmt: skip
    refused(done, "need --inbox", "add --inbox")
    done = run("attest", "--demo", "5", "--inbox", "--submit",
               "--notify-webhook", "http://127.0.0.1:9/h", cwd=tmp_path, env=env)  # fmt: skip
    refused(done, "pybb attest --submit without them")
    assert list(tmp_path.iterdir()) == []


def test_a_named_link_secret_keeps_links_valid_across_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pybb.cli import build_parser
    from pybb.cli._attest_notify import notify_plan

    monkeypatch.setenv("PYBB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("PYBB_LINKS", "a-link-key-that-is-long-enough")
    argv = ["attest", "--demo", "5", "--inbox", "--notify-webhook", "http://127.0.0.1:9/h"]
    parser = build_parser()
    named = [notify_plan(parser.parse_args([*argv, "--link-secret-env", "PYBB_LINKS"]), "x")
             for _ in range(2)]  # fmt: skip
    fresh = [notify_plan(parser.parse_args(argv), "x") for _ in range(2)]
    assert all(plan is not None for plan in named + fresh)
    assert {plan.link_secret for plan in named if plan} == {b"a-link-key-that-is-long-enough"}
    assert len({plan.link_secret for plan in fresh if plan}) == 2  # a fresh key per run

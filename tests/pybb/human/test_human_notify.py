"""Notifications: webhook and email, signed single-use links, quiet hours, the budget's say."""

from __future__ import annotations

import hashlib
import hmac
import ssl
import threading
from collections.abc import Iterator
from datetime import time, timedelta
from pathlib import Path

import pytest
from notify_support import (
    HOOK_SECRET,
    SECRET,
    START,
    open_people_board,
    payloads,
    post,
    self_signed,
    smtp_server,
    webhook_receiver,
)

from blackboard import Model, Rejected, Written
from pybb.human import (
    Ask,
    AssignmentPolicy,
    AssignRule,
    Channel,
    DeadlinePolicy,
    EmailNotifier,
    LinkError,
    LinkProblem,
    Notification,
    NotificationDispatcher,
    Notifier,
    Person,
    QuietHours,
    WebhookNotifier,
    deliveries,
    redeem_link,
    set_person,
    sign_link,
    verify_link,
    webhook_signature,
)
from pybb.testing import FakeClock, RecordingNotifier, check_notifier

POLICY = DeadlinePolicy(after=timedelta(hours=2), remind=(timedelta(minutes=30),))
ALICE = "human:alice"


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Model]:
    model = open_people_board(tmp_path / "board.db")
    yield model
    model.close()


def dispatcher(
    board: Model, notifiers: dict[str, Notifier], **options: object
) -> NotificationDispatcher:
    return NotificationDispatcher(
        board.control,
        board.reader,
        notifiers,
        SECRET,
        "http://127.0.0.1:8765",
        **{"deadlines": POLICY, "assignment": AssignmentPolicy(default=ALICE), **options},  # type: ignore[arg-type]
    )


def webhook(sleeps: list[float] | None = None, **options: object) -> WebhookNotifier:
    record = sleeps if sleeps is not None else []
    return WebhookNotifier(HOOK_SECRET, sleep=record.append, **options)  # type: ignore[arg-type]


def test_a_webhook_gets_the_ask_signed_with_a_link_that_works_once(board: Model) -> None:
    with webhook_receiver() as hook:
        set_person(board.control, Person(ALICE, (Channel("webhook", hook.url),)), writer="admin")
        post(board, "a-1", POLICY)
        report = dispatcher(board, {"webhook": webhook()}).dispatch(START)
        assert [n.id for n in report.sent] == ["a-1/ask/human:alice"]
        ((headers, body),) = hook.received
        expected = "sha256=" + hmac.new(HOOK_SECRET, body, hashlib.sha256).hexdigest()
        assert headers["X-Pybb-Signature"] == expected == webhook_signature(body, HOOK_SECRET)
        assert headers["Content-Type"] == "application/json"
        (payload,) = payloads(hook)
        assert (payload["ask_id"], payload["person"], payload["kind"]) == ("a-1", ALICE, "ask")
        token = payload["link"].rsplit("/link/", 1)[1]
        link = verify_link(token, SECRET, now=START)
        assert (link.ask_id, link.person, link.expires) == (
            "a-1",
            ALICE,
            START + timedelta(hours=2),
        )
        # sent once: dispatching again (another process, a restart) sends nothing
        assert dispatcher(board, {"webhook": webhook()}).dispatch(START).sent == ()
        assert len(hook.received) == 1
        (row,) = deliveries(board.reader, "a-1")
        assert row["status"] == "sent" and row["attempts"][0]["status"] == 200


def test_a_reminder_goes_out_before_the_deadline_and_nothing_after(board: Model) -> None:
    clock = FakeClock(START)
    with webhook_receiver() as hook:
        set_person(board.control, Person(ALICE, (Channel("webhook", hook.url),)), writer="admin")
        post(board, "a-2", POLICY)
        notify = dispatcher(board, {"webhook": webhook()})
        notify.dispatch(clock.now())
        clock.advance(60 * 89)
        assert notify.dispatch(clock.now()).sent == ()  # 1 min before the reminder is due
        clock.advance(60)
        assert [n.kind for n in notify.dispatch(clock.now()).sent] == ["reminder-1"]
        clock.advance(3600)
        assert notify.dispatch(clock.now()).sent == ()  # past the deadline: the default applies
        assert [p["kind"] for p in payloads(hook)] == ["ask", "reminder-1"]


def test_webhook_retries_with_exponential_backoff_and_records_every_failure(board: Model) -> None:
    sleeps: list[float] = []
    with webhook_receiver([500, 503, 200]) as hook:
        set_person(board.control, Person(ALICE, (Channel("webhook", hook.url),)), writer="admin")
        post(board, "a-3", POLICY)
        report = dispatcher(
            board, {"webhook": webhook(sleeps, backoff=timedelta(seconds=0.5))}
        ).dispatch(START)
        assert len(report.sent) == 1 and len(hook.received) == 3
    assert sleeps == [0.5, 1.0]
    (row,) = deliveries(board.reader, "a-3")
    assert [a["status"] for a in row["attempts"]] == [500, 503, 200]
    assert row["attempts"][0]["error"] == "HTTP 500 Internal Server Error"


def test_a_webhook_that_keeps_failing_is_recorded_failed(board: Model) -> None:
    sleeps: list[float] = []
    with webhook_receiver([500, 500, 500, 500]) as hook:
        set_person(board.control, Person(ALICE, (Channel("webhook", hook.url),)), writer="admin")
        post(board, "a-4", POLICY)
        report = dispatcher(board, {"webhook": webhook(sleeps, retries=2)}).dispatch(START)
        assert len(report.failed) == 1 and len(hook.received) == 3
    (row,) = deliveries(board.reader, "a-4")
    assert row["status"] == "failed" and len(row["attempts"]) == 3
    assert row["reason"] == "HTTP 500 Internal Server Error"
    assert sleeps == [0.5, 1.0]


def test_a_client_error_is_not_retried_and_a_timeout_is(board: Model) -> None:
    with webhook_receiver([404]) as hook:
        delivery = webhook().send(_note(hook.url))
        assert not delivery.ok and [a.status for a in delivery.attempts] == [404]
    with webhook_receiver(delay=0.5) as slow:
        delivery = webhook(timeout=timedelta(seconds=0.1), retries=1).send(_note(slow.url))
        assert not delivery.ok and len(delivery.attempts) == 2
        assert all("timed out" in (a.error or "") for a in delivery.attempts), delivery
    closed = webhook(retries=0).send(_note("http://127.0.0.1:9/nothing-listens"))
    assert not closed.ok and "Connection refused" in (closed.error or "")


def _note(url: str) -> Notification:
    return Notification(
        "x/ask/human:alice", "x", ALICE, "ask", "s", "t", "http://l", START, Channel("webhook", url)
    )


def test_email_goes_through_a_local_smtp_server(board: Model) -> None:
    with smtp_server() as box:
        who = Person(ALICE, (Channel("email", "alice@example.org"),))
        set_person(board.control, who, writer="admin")
        ask = post(board, "a-5", POLICY)
        mail = EmailNotifier("127.0.0.1", box.port, sender="pybb@example.org")
        report = dispatcher(board, {"email": mail}).dispatch(START)
        assert len(report.sent) == 1
    (message,) = box.messages
    assert message["To"] == "alice@example.org" and message["From"] == "pybb@example.org"
    assert message["Subject"] == ask.title and message["X-Pybb-Ask"] == "a-5"
    body = message.get_content()
    link = next(line for line in body.splitlines() if "/link/" in line)
    assert verify_link(link.rsplit("/link/", 1)[1], SECRET, now=START).ask_id == "a-5"


def test_email_with_starttls(board: Model, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    with smtp_server(tls=(cert, key)) as box:
        plain = EmailNotifier("127.0.0.1", box.port, sender="pybb@example.org")
        refused = plain.send(_mail())
        assert not refused.ok  # the server requires STARTTLS: the failure is reported
        tls = EmailNotifier(
            "127.0.0.1", box.port, sender="pybb@example.org", starttls=True, ssl_context=trust
        )
        assert tls.send(_mail()).ok
    assert len(box.messages) == 1


def _mail() -> Notification:
    return Notification(
        "x/ask/human:alice", "x", ALICE, "ask", "subject", "text", "http://l", START,
        Channel("email", "alice@example.org"),
    )  # fmt: skip


def test_quiet_hours_defer_a_notification_to_their_end(board: Model) -> None:
    # 22:00-07:00 in Berlin (UTC+1 in March); the ask is posted at 22:30 Berlin time
    clock = FakeClock(START.replace(hour=21, minute=30))
    quiet = QuietHours(time(22, 0), time(7, 0), "Europe/Berlin")
    night_policy = DeadlinePolicy(after=timedelta(hours=24))
    with webhook_receiver() as hook:
        who = Person(ALICE, (Channel("webhook", hook.url),), quiet)
        set_person(board.control, who, writer="admin")
        post(board, "a-6", night_policy, created_at=clock.now())
        notify = dispatcher(board, {"webhook": webhook()}, deadlines=night_policy)
        report = notify.dispatch(clock.now())
        assert report.sent == () and hook.received == []
        ((deferred, until),) = report.deferred
        assert until == START.replace(day=2, hour=6, minute=0)  # 07:00 in Berlin
        clock.advance((until - clock.now()).total_seconds() - 1)
        assert notify.dispatch(clock.now()).sent == ()
        clock.advance(1)
        assert [n.id for n in notify.dispatch(clock.now()).sent] == [deferred.id]
        assert len(hook.received) == 1


def test_a_notification_the_budget_refuses_is_not_sent_and_is_recorded(board: Model) -> None:
    charged: list[str] = []

    def budget(notification: Notification, ask: Ask) -> str | None:
        charged.append(notification.id)
        return "scope 'fleet' has spent 2 of 2" if len(charged) > 1 else None

    with webhook_receiver() as hook:
        set_person(board.control, Person(ALICE, (Channel("webhook", hook.url),)), writer="admin")
        post(board, "a-7", POLICY)
        post(board, "a-8", POLICY)
        report = dispatcher(board, {"webhook": webhook()}, charge=budget).dispatch(START)
        assert [n.ask_id for n in report.sent] == ["a-7"]
        assert [(n.ask_id, why) for n, why in report.refused] == [
            ("a-8", "scope 'fleet' has spent 2 of 2")
        ]
        assert [p["ask_id"] for p in payloads(hook)] == ["a-7"]
    (row,) = deliveries(board.reader, "a-8")
    assert (row["status"], row["reason"]) == ("refused", "scope 'fleet' has spent 2 of 2")
    assert charged == ["a-7/ask/human:alice", "a-8/ask/human:alice"]


def test_a_team_s_members_are_each_notified(board: Model) -> None:
    with webhook_receiver() as hook:
        for name in ("alice", "bob", "carol"):
            teams = ("ops",) if name != "carol" else ()
            who = Person(f"human:{name}", (Channel("webhook", hook.url),), teams=teams)
            set_person(board.control, who, writer="admin")
        post(board, "a-9", POLICY)
        notify = dispatcher(board, {"webhook": webhook()})
        notify.assignment = AssignmentPolicy((AssignRule("team:ops"),))
        report = notify.dispatch(START)
    assert sorted(n.person for n in report.sent) == ["human:alice", "human:bob"]


def test_people_are_board_data_and_only_their_own(board: Model) -> None:
    me = Person(ALICE, (Channel("email", "a@example.org"),))
    assert isinstance(set_person(board.control, me, writer=ALICE), Written)
    other = Person("human:bob", (Channel("email", "b@example.org"),))
    refused = set_person(board.control, other, writer=ALICE)
    assert isinstance(refused, Rejected) and "only their own" in refused.reason
    with pytest.raises(ValueError, match="not an http"):
        Channel("webhook", "ftp://x")
    with pytest.raises(ValueError, match="IANA"):
        QuietHours(time(22), time(7), "Mars/Olympus")


def test_a_link_is_signed_expires_and_is_accepted_exactly_once(board: Model) -> None:
    post(board, "a-10", POLICY)
    token = sign_link(SECRET, "a-10", ALICE, START + timedelta(hours=1))
    with pytest.raises(LinkError) as bad:
        verify_link(token[:-1] + ("0" if token[-1] != "0" else "1"), SECRET, now=START)
    assert bad.value.problem is LinkProblem.BAD_SIGNATURE
    with pytest.raises(LinkError) as other_key:
        verify_link(token, b"another-secret-0123456789", now=START)
    assert other_key.value.problem is LinkProblem.BAD_SIGNATURE
    with pytest.raises(LinkError) as late:
        verify_link(token, SECRET, now=START + timedelta(hours=1))
    assert late.value.problem is LinkProblem.EXPIRED
    # eight requests race to redeem it: the board accepts exactly one
    outcomes: list[object] = []
    gate = threading.Barrier(8)

    def redeem() -> None:
        gate.wait()
        try:
            outcomes.append(redeem_link(board.control, board.reader, token, SECRET, now=START))
        except LinkError as exc:
            outcomes.append(exc.problem)

    threads = [threading.Thread(target=redeem) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(str, outcomes)).count(str(LinkProblem.USED)) == 7
    assert len(board.reader.read_level("link_uses")) == 1


def test_every_notifier_passes_the_seam_s_conformance_check(tmp_path: Path) -> None:
    recorder = RecordingNotifier()
    check_notifier(lambda: recorder, Channel("email", "a@example.org"), lambda: len(recorder.sent))
    assert recorder.closed
    with webhook_receiver() as hook:
        check_notifier(webhook, Channel("webhook", hook.url), lambda: len(hook.received))
    with smtp_server() as box:
        check_notifier(
            lambda: EmailNotifier("127.0.0.1", box.port, sender="pybb@example.org"),
            Channel("email", "a@example.org"),
            lambda: len(box.messages),
        )
    # negative control: a notifier that fails is caught, with the failure named
    failing = RecordingNotifier(fail=True, error="mailbox full")
    with pytest.raises(AssertionError, match="mailbox full"):
        check_notifier(lambda: failing, Channel("email", "a@example.org"), lambda: 0)

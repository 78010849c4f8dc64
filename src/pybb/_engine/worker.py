"""Workers: many processes, on any number of machines, sharing one run by leased claims.

A :class:`Worker` runs a controller on the entries it holds claims on, and only on those
(``Control.claim``; on PostgreSQL ``FOR UPDATE SKIP LOCKED``): it claims a batch of
entries that still need work, cycles on them until they settle (good, escalated or
resolved), releases them and claims more. A heartbeat thread renews its leases; a worker
that dies stops renewing, and one lease later its entries are taken over by the others.
Every batch a worker commits is fenced on the entries it is about, so a worker that
stalled past its lease and was taken over writes nothing; attempts carry idempotency keys
(``attempt/{key}/{source}/{n}``), so an attempt that landed is never applied twice.

The worker does not write the board's cycle count (each counts its own cycles) and
takes in other workers' writes incrementally: a cycle costs its own work plus the records
others wrote since, never a re-read of the board. The run is done when every entry is in
good standing, escalated or resolved: no entry is left for anyone to claim.

Sources, predicates and routes are code, not data: a worker builds its controller with an
*application*, a function ``app(context) -> Controller`` (:data:`WorkerApp`); the
command line loads one by name (``pybb.cli.worker.load_app``).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from blackboard import BlackboardError, RecordKind, StoreError
from blackboard.stores import Store
from pybb._engine.controller import Controller
from pybb._engine.journal import entry_key
from pybb._engine.types import Segment
from pybb.errors import BoardClosedError, PybbError

__all__ = [
    "AppContext",
    "Worker",
    "WorkerApp",
    "WorkerSettings",
    "WorkerSummary",
]

_log = logging.getLogger("pybb.worker")


@dataclass(frozen=True, slots=True)
class AppContext:
    """What an application gets to build the controller of one run.

    Attributes:
        store: The store the worker opened (the application must not close it).
        board_id: The run's board.
        options: The ``--app-option KEY=VALUE`` pairs of the command line.
    """

    store: Store
    board_id: str
    options: Mapping[str, str] = field(default_factory=dict)


WorkerApp = Callable[[AppContext], Controller]
"""An application: builds the controller (board, sources, predicates, routes) for a run.

It opens the blackboard on ``context.store`` and ``context.board_id`` with the regions
the run was created with, and must not write entries: the run's submitter does.
"""


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How a worker claims and waits.

    Attributes:
        lease: How long a claim lasts without a heartbeat: a killed worker's entries are
            taken over this long after its last one.
        heartbeat: How often the leases are renewed (default: a third of the lease).
        batch: The most entries a worker holds at once. Each cycle is one transaction
            over the entries held, so a bigger batch means fewer transactions per entry
            (and, on PostgreSQL, fewer turns at the board's lock, fewer commits and
            fences); a killed worker's batch waits one lease for a takeover, and workers
            started together on fewer than ``batch`` entries each leave the later ones
            less to claim. The default, 1,024, lets two workers share a few thousand
            entries in as few cycles as one controller (at 256, W1 with 2,000 entries
            took each of two workers 10 cycles where one controller takes 3).
        poll: The longest a waiting worker sleeps before looking again (it wakes at
            once when the board changes).
        follow: Keep waiting for new entries when the run is settled, until it closes.
        progress: How often the worker logs a progress line at INFO on ``pybb.worker``
            (entries settled, claims held and taken, lease renewals); ``None``: never.
            The library only logs; the ``pybb`` command shows it.
    """

    lease: timedelta = timedelta(seconds=30)
    heartbeat: timedelta | None = None
    batch: int = 1024
    poll: timedelta = timedelta(seconds=1)
    follow: bool = False
    progress: timedelta | None = timedelta(seconds=10)

    def __post_init__(self) -> None:
        for name in ("lease", "poll"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise PybbError(
                    f"WorkerSettings.{name} must be a positive timedelta, not {value!r}"
                )
        if self.progress is not None and (
            not isinstance(self.progress, timedelta) or self.progress <= timedelta(0)
        ):
            raise PybbError(
                f"WorkerSettings.progress must be a positive timedelta or None, not "
                f"{self.progress!r}"
            )
        beat = self.heartbeat
        if beat is not None and (
            not isinstance(beat, timedelta) or not timedelta(0) < beat < self.lease
        ):
            raise PybbError(
                f"WorkerSettings.heartbeat must be shorter than the lease, not {beat!r}"
            )
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise PybbError(f"WorkerSettings.batch must be a positive integer, not {self.batch!r}")

    @property
    def beat(self) -> float:
        """Seconds between heartbeats."""
        return (self.heartbeat or self.lease / 3).total_seconds()


@dataclass(frozen=True, slots=True)
class WorkerSummary:
    """How a worker's run ended.

    Attributes:
        name: The worker's holder name.
        reason: ``"settled"`` (every entry good, escalated or resolved), ``"quiescent"``
            (entries still need work but no source can contribute to them, as a single
            controller's run halts ``QUIESCENT``), ``"closed"`` (the run closed) or
            ``"stopped"`` (:meth:`Worker.stop`, e.g. SIGTERM).
        cycles: Cycles this worker committed.
        attempts: Knowledge-source attempts it ran.
        claimed: Claims it took.
        lost: Claims it lost to a takeover (its lease lapsed while it stalled).
        settled: Entries it held when they settled.
    """

    name: str
    reason: str
    cycles: int
    attempts: int
    claimed: int
    lost: int
    settled: int


def default_name() -> str:
    """A holder name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    """One of many processes working on one run; see the module docstring.

    Args:
        controller: The run's controller (an application builds it); its blackboard
            is used by this worker alone.
        name: The worker's holder name (default: host, pid and a random suffix; two
            live workers must not share one).
        settings: Lease, heartbeat, batch size, waiting.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        name: str | None = None,
        settings: WorkerSettings | None = None,
    ) -> None:
        self.controller = controller
        self.name = name or default_name()
        self.settings = settings or WorkerSettings()
        self._board = controller.blackboard
        self._journal = controller.blackboard.journal
        self._control = controller.blackboard.model.control
        self._held: dict[str, None] = {}
        self._held_lock = threading.Lock()
        self._busy: dict[str, float] = {}  # key -> monotonic time to try it again
        self._idle: set[str] = set()  # held, found with nothing to do: not claimed again
        self._redeliver: list[str] = []
        self._stopping = threading.Event()
        self._beating = threading.Event()
        self._counts = {"claimed": 0, "lost": 0, "settled": 0, "renewed": 0}
        self._cycles = 0
        self._attempts = controller.attempts_made

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> WorkerSummary:
        """Work until the run is settled (or closed, or :meth:`stop`); release every claim."""
        journal = self._journal
        journal.holder = self.name
        heart = threading.Thread(target=self._beat, name=f"pybb-worker-{self.name}", daemon=True)
        heart.start()
        try:
            self.controller.start(redeliver=False)  # escalations are redelivered under claims
            if self.controller.observers:
                self._redeliver = list(journal.view.segments[Segment.ESCALATE])
            reason = self._loop()
            if reason == "settled":
                self._tidy()
        finally:
            self._beating.set()
            heart.join(timeout=5)
            self._release_all()
            journal.holder = None
        return self._summary(reason)

    def stop(self) -> None:
        """Ask the worker to stop after its current cycle (safe from any thread or handler)."""
        self._stopping.set()

    def _loop(self) -> str:
        failures = 0
        while not self._stopping.is_set():
            try:
                reason = self._step()
                failures = 0
            except BoardClosedError:
                return "closed"
            except StoreError as exc:  # the store is away (a restart, a failover): retry
                failures += 1
                pause = min(0.1 * 2**failures, 5.0)
                _log.warning("worker %s: %s; trying again in %.1f s", self.name, exc, pause)
                self._stopping.wait(pause)
                continue
            if reason is not None:
                return reason
        return "stopped"

    def _step(self) -> str | None:
        """One round: settle claims, claim, take in the board, work or wait.

        The board is read once a round, after claiming: what the cycle decides on then
        includes every record written to its entries before they were claimed. Releasing
        and choosing candidates go by the board as of the last round (and this worker's
        own commits since, which fold in what others wrote before them): an entry settled
        meanwhile by someone else costs at most a claim it gives back next round.
        """
        self._redeliver_some()
        self._refill(self._drop_settled())
        if self._take_in():
            return "closed"
        if self._held:
            self._work()
            return None
        if self._done():
            stuck = any(self._journal.view.open_work(key) for key in self._idle)
            return "quiescent" if stuck else "settled"
        self._wait(self.settings.poll.total_seconds())
        return None

    def _take_in(self) -> bool:
        """Fold what others wrote; True if the run closed."""
        records = self.controller.take_in()
        closed = False
        for record in records:
            closed = closed or record.kind is RecordKind.CLOSE
            key = entry_key(record.content)
            self._idle.discard(key)  # something happened to it: it may have work again
        return closed

    def _work(self) -> None:
        with self._held_lock:
            focus = dict(self._held)
        worked = self.controller.cycle(focus, take_in=False)  # _step took it in
        if self._journal.take_claim_lost():
            self._check_claims(list(focus))
        if worked:
            self._cycles += 1
            return
        self._no_progress(focus)

    def _no_progress(self, focus: Mapping[str, None]) -> None:
        """Nothing to do on the held entries now: wait for a retry, or give them up."""
        delay = self.controller.next_retry(dict(focus))
        if delay is None:  # stuck: no source can contribute (a single run halts QUIESCENT)
            self._idle.update(focus)
            self._release(list(focus))
        elif delay > 0:
            self._wait(min(delay, self.settings.poll.total_seconds()))

    def _done(self) -> bool:
        if self.settings.follow or self._redeliver:
            return False
        state = self._journal.view
        if not state.entries:
            return False  # nothing submitted yet: wait for entries
        return all(key in self._idle for key in itertools.chain(state.unsettled, state.dirty))

    def _wait(self, seconds: float) -> None:
        board = self._board
        board.model.store.wait(board.board_id, self._journal.view.head, max(seconds, 0.0))

    # -- claims --------------------------------------------------------------------------

    def _refill(self, settled: list[str]) -> None:
        """Give back ``settled`` (no longer held) and claim more, in one call to the store."""
        room = self.settings.batch - len(self._held)
        candidates = self._candidates(2 * room) if room > 0 else []
        if not candidates:
            if settled:
                self._control.release(self.name, settled)
            return
        lease = self.settings.lease
        _, taken = self._control.release_and_claim(
            self.name, settled, candidates, lease=lease, limit=room
        )
        got = {claim.key for claim in taken}
        with self._held_lock:
            self._held.update(dict.fromkeys(claim.key for claim in taken))
        self._counts["claimed"] += len(got)
        # Skipped keys are held (or being taken) by others: try them later. Keys past the
        # last one taken may merely not have been reached (the limit): not skipped.
        reached = candidates
        if len(got) == room:
            last = max(i for i, key in enumerate(candidates) if key in got)
            reached = candidates[:last]
        retry = time.monotonic() + lease.total_seconds() / 4
        self._busy.update({key: retry for key in reached if key not in got})

    def _candidates(self, wanted: int) -> list[str]:
        state = self._journal.view
        now = time.monotonic()
        if len(self._busy) > 4 * len(state.unsettled) + 1024:
            self._busy = {k: at for k, at in self._busy.items() if at > now}
        candidates: list[str] = []
        for key in itertools.chain(state.unsettled, state.dirty):
            if key in self._held or key in self._idle or self._busy.get(key, 0.0) > now:
                continue
            candidates.append(key)
            if len(candidates) >= wanted:
                break
        return list(dict.fromkeys(candidates))

    def _drop_settled(self) -> list[str]:
        """Stop holding the entries that settled; the caller releases them (``_refill``)."""
        state = self._journal.view
        settled = [key for key in self._held if not state.open_work(key)]
        if settled:
            self._counts["settled"] += len(settled)
            self._forget(settled)
        return settled

    def _redeliver_some(self) -> None:
        """Tell observers of escalations made before this worker started, under a claim each.

        Under a claim, so two workers never tell one escalation at once (an observer such
        as the supervisor checks the board for a decision before deciding).
        """
        if not self._redeliver:
            return
        batch = self._redeliver[: self.settings.batch]
        taken = self._control.claim(self.name, batch, lease=self.settings.lease)
        got = [claim.key for claim in taken]
        try:
            for key in got:
                self.controller.redeliver(key)
        finally:
            self._control.release(self.name, got)
        done = set(got)
        self._redeliver = [key for key in self._redeliver if key not in done]
        if not got:
            self._wait(min(self.settings.lease.total_seconds() / 4, 1.0))

    def _tidy(self) -> None:
        """Clear the lapsed claims a dead worker left on entries that are settled.

        A worker killed between settling an entry and releasing it leaves a claim nobody
        needs to take over (the entry has no work), so a settled run would keep it for
        good. Claiming takes only lapsed leases (by the store's clock) and skips live
        ones, so this never touches a claim a living worker holds.
        """
        state = self._journal.view
        try:
            left = [
                claim.key
                for claim in self._board.model.store.claims(self._board.board_id)
                if claim.holder != self.name
                and claim.key in state.entries
                and not state.open_work(claim.key)
            ]
            if left:
                taken = self._control.claim(self.name, left, lease=self.settings.lease)
                self._control.release(self.name, [claim.key for claim in taken])
        except BlackboardError as exc:  # tidying is a courtesy; the run is settled anyway
            _log.warning("worker %s could not clear lapsed claims: %s", self.name, exc)

    def _check_claims(self, keys: list[str]) -> None:
        """A fenced batch was refused: keep the claims still held, drop the lost ones."""
        renewed = {c.key for c in self._control.renew(self.name, keys, lease=self.settings.lease)}
        lost = [key for key in keys if key not in renewed]
        self._forget(lost)
        self._counts["lost"] += len(lost)

    def _release(self, keys: list[str]) -> None:
        self._forget(keys)
        self._control.release(self.name, keys)

    def _forget(self, keys: list[str]) -> None:
        with self._held_lock:
            for key in keys:
                self._held.pop(key, None)

    def _release_all(self) -> None:
        with self._held_lock:
            keys = list(self._held)
        if keys:
            try:
                self._release(keys)
            except BlackboardError:
                _log.warning("worker %s could not release its claims; they lapse", self.name)

    def _beat(self) -> None:
        """The heartbeat: renew every held lease; a lease someone took over is dropped.

        It also logs the progress line every ``settings.progress`` (a steady rate, from
        this thread, so a worker busy on one long cycle still reports).
        """
        beat = self.settings.beat
        every = self.settings.progress.total_seconds() if self.settings.progress else None
        now = time.monotonic()
        next_beat = now + beat
        next_report = now + every if every else float("inf")
        while not self._beating.wait(max(min(next_beat, next_report) - time.monotonic(), 0.0)):
            now = time.monotonic()
            if now >= next_report and every:
                next_report = now + every
                self._report_progress()
            if now >= next_beat:
                next_beat = now + beat
                self._renew_held()

    def _report_progress(self) -> None:
        with self._held_lock:
            held = len(self._held)
        counts = self._counts
        _log.info(
            "worker %s: %d entries settled, %d claims held (%d taken, %d lost), "
            "%d lease renewals, %d cycles",
            self.name, counts["settled"], held, counts["claimed"], counts["lost"],
            counts["renewed"], self._cycles,
        )  # fmt: skip

    def _renew_held(self) -> None:
        """Renew every held lease once."""
        with self._held_lock:
            keys = list(self._held)
        if not keys:
            return
        try:
            renewed = self._control.renew(self.name, keys, lease=self.settings.lease)
        except BlackboardError as exc:
            _log.warning("worker %s could not renew its claims: %s", self.name, exc)
            return
        self._counts["renewed"] += len(renewed)
        lost = [key for key in keys if key not in {c.key for c in renewed}]
        if lost:
            _log.warning("worker %s lost %d claims to a takeover", self.name, len(lost))
            self._forget(lost)
            self._counts["lost"] += len(lost)

    def _summary(self, reason: str) -> WorkerSummary:
        return WorkerSummary(
            self.name,
            reason,
            self._cycles,
            self.controller.attempts_made - self._attempts,
            self._counts["claimed"],
            self._counts["lost"],
            self._counts["settled"],
        )

    def __repr__(self) -> str:
        return f"Worker({self.name!r}, board={self._board.board_id!r}, held={len(self._held)})"


def run_worker(
    app: WorkerApp,
    store: Store,
    board_id: str,
    *,
    options: Mapping[str, str] | None = None,
    name: str | None = None,
    settings: WorkerSettings | None = None,
    started: Callable[[Worker], Any] | None = None,
) -> WorkerSummary:
    """Build the run's controller with ``app`` and work on it until it is settled.

    Args:
        app: The application.
        store: The store (closed by the caller).
        board_id: The run.
        options: The application's options.
        name: The worker's holder name.
        settings: The worker's settings.
        started: Told of the worker before it starts (to wire a signal handler to stop).
    """
    controller = app(AppContext(store, board_id, dict(options or {})))
    if not isinstance(controller, Controller):
        raise PybbError(f"the application returned {controller!r}, not a pybb Controller")
    worker = Worker(controller, name=name, settings=settings)
    if started is not None:
        started(worker)
    return worker.run()

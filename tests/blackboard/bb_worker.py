"""A kernel process for the multi-process reliability tests.

``python bb_worker.py serve``: reads JSON commands on stdin, answers one JSON line each
(see ``WorkerPool`` in ``bb_reliability``). ``python bb_worker.py stream ARGS``: the
writer the kill test SIGKILLs; it appends every acknowledgement it receives to a side
file with one unbuffered ``write(2)`` per line, before it makes its next write.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

from bb_reliability import in_doubt, open_model, read_side_file, store_for

from blackboard import Conflict, Model, ProposedContribution, Rejected, RejectionCause, Written


def _wait(go_at: float) -> None:
    delay = go_at - time.time()
    if delay > 0:
        time.sleep(delay)


class Server:
    def __init__(self) -> None:
        self.model: Model | None = None

    def open(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.close()
        store = store_for(cmd["url"], cmd.get("variant", "real"))
        self.model = open_model(cmd["model"], store, cmd["board"])
        self.owned = store if not isinstance(store, str) else None
        return {"ok": True}

    def close(self) -> None:
        if self.model is not None:
            self.model.close()
            if self.owned is not None:
                self.owned.close()
        self.model = None

    def write(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        control, writer, level = self.model.control, cmd["writer"], cmd["level"]
        acks: list[tuple[int, int]] = []
        closed: list[int] = []
        errors: list[str] = []
        _wait(cmd["go_at"])
        started = time.perf_counter()
        for i in range(cmd["n"]):
            try:
                result = control.write(writer, level, {"w": writer, "i": i})
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                if len(errors) >= 5:
                    break
                continue
            if isinstance(result, Written):
                acks.append((i, result.sequence))
            elif result.cause is RejectionCause.RUN_CLOSED:
                closed.append(i)
                if len(closed) >= cmd.get("after_closed", 3):
                    break
            else:
                errors.append(f"unexpected {result!r}")
        return {
            "writer": writer,
            "acks": acks,
            "closed": closed,
            "errors": errors,
            "elapsed": time.perf_counter() - started,
        }

    def abort(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        _wait(cmd["go_at"] + cmd["delay"])
        outcome = self.model.control.abort("the closer closed the run")
        return {"close_seq": outcome.sequence, "at": time.time()}

    def unique(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        control = self.model.control
        results: list[tuple[int | None, str | None]] = []
        _wait(cmd["go_at"])
        for content in cmd["contents"]:
            result = control.write(cmd["writer"], cmd["level"], content)
            if isinstance(result, Written):
                results.append((result.sequence, None))
            else:
                results.append((None, result.cause.value))
        return {"results": results}


def serve() -> None:
    server = Server()
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            reply = getattr(server, cmd["op"])(cmd)
        except Exception as exc:  # reported, not swallowed: the test fails on it
            reply = {"failed": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    server.close()


# -- the kill target ---------------------------------------------------------------------


def stream(url: str, board: str, side_file: str, start: int, seed: int, limit: int) -> None:
    """Write ``limit`` fresh writes as ``clerk`` on the "mixed" model, logging each step.

    Side-file lines (JSON): ``{"intent": i, ...params}`` before a write and
    ``{"ack": i, "seqs": [...], "version": v}`` after it was acknowledged. A restarted
    stream first replays an intent that has no ack, with the same idempotency key and
    parameters, which is how a writer learns whether its in-doubt write landed.
    """
    model = open_model("mixed", url, board)
    fd = os.open(side_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pending = in_doubt(*read_side_file(side_file))
    rng = random.Random(seed)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    i = start
    while i < start + limit or pending is not None:
        intent = pending if pending is not None else _intent(model, rng, i)
        pending = None
        if intent["i"] == i:  # a fresh intent: log it before acting on it
            os.write(fd, (json.dumps(intent) + "\n").encode())
            i += 1
        ack = _act(model, intent)
        os.write(fd, (json.dumps(ack) + "\n").encode())
    os.close(fd)
    model.close()


def _intent(model: Model, rng: random.Random, i: int) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.15:
        version = model.reader.read_premise("counter").version
        return {"intent": "premise", "i": i, "expected": version}
    if roll < 0.30:
        return {"intent": "unique", "i": i}
    if roll < 0.40:
        return {"intent": "batch", "i": i, "size": rng.randint(2, 5)}
    return {"intent": "level", "i": i, "pad": rng.randint(0, 3000)}


def _act(model: Model, intent: dict[str, Any]) -> dict[str, Any]:
    control, i, kind = model.control, intent["i"], intent["intent"]
    key = f"k{i}"
    if kind == "premise":
        result = control.set_premise(
            "clerk", "counter", i, expected_version=intent["expected"], idempotency_key=key
        )
        assert isinstance(result, Written), result
        return {"ack": i, "seqs": [result.sequence], "version": result.version}
    if kind == "batch":
        proposals = [
            ProposedContribution("clerk", "events", {"i": i, "j": j}) for j in range(intent["size"])
        ]
        keys = [f"{key}.{j}" for j in range(intent["size"])]
        results = control.write_all(proposals, idempotency_keys=keys)
        assert all(isinstance(r, Written) for r in results), results
        return {"ack": i, "seqs": [r.sequence for r in results if isinstance(r, Written)]}
    if kind == "unique":
        result = control.write("clerk", "ids", {"id": i}, idempotency_key=key)
    else:
        result = control.write(
            "clerk", "events", {"i": i, "pad": "x" * intent["pad"]}, idempotency_key=key
        )
    assert isinstance(result, Written) and not isinstance(result, Conflict | Rejected), result
    return {"ack": i, "seqs": [result.sequence]}


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        _, _, url, board, side, start, seed, limit = sys.argv
        stream(url, board, side, int(start), int(seed), int(limit))

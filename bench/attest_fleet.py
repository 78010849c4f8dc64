"""Benchmark the attestation tree: devices per second, and replay beside bare hashlib.

For each size N (1,000 and 10,000; ``--quick``: 200 and 1,000) and store (memory,
SQLite), a fresh process generates the demo fleet (``generate_fleet(N, seed=0)``),
attests it with ``Attestation(fleet, store=...).run()`` — the whole tree: entries,
cheap check, both tiers, escalations, all on the board — checks that every device
landed where its ground truth says, and reports devices per second and peak RSS.

In the same process it then times, over the same devices' logs:

* ``parse+replay``: ``replay(parse_event_log(log))``, what a tier pays per device;
* ``replay``: ``replay(log)`` of logs already parsed;
* ``hashlib``: a bare loop doing the same PCR extends (``H(pcr || digest)`` per event
  per bank) with ``hashlib`` on digests already extracted: the floor.

and reports the ratios. Then (``--quotes-only``: only this) signed quotes: 1,000
devices, each an RSA-2048 RSASSA-SHA256 quote over a bundled log's PCRs with its own
nonce, verified as ``pybb attest verify`` does before its tree — parse TPMS_ATTEST and
TPMT_SIGNATURE, verify the signature with ``cryptography``, parse and replay the log,
check pcrDigest — and then the verification tier's policy (``verify``: replay against the
quote, Secure Boot, denylist). Aim: >= 1,000 devices/s, printed as a ratio against the
floor of bare ``hashlib`` replay plus one ``cryptography`` verify per device.

Usage: ``python bench/attest_fleet.py [--quick] [--quotes-only] [--results FILE]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FULL = [("memory", 1000), ("sqlite", 1000), ("memory", 10_000), ("sqlite", 10_000)]
QUICK = [("memory", 200), ("sqlite", 200), ("memory", 1000), ("sqlite", 1000)]


def run_one(backend: str, n: int) -> dict[str, Any]:
    from pybb.attestation import Attestation, generate_fleet

    started = time.perf_counter()
    fleet = generate_fleet(n, seed=0)
    generated = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        store = None if backend == "memory" else f"sqlite:///{tmp}/attest.db"
        started = time.perf_counter()
        with Attestation(fleet, store=store) as attestation:
            report = attestation.run()
            seconds = time.perf_counter() - started
            records = attestation.blackboard.head
    assert report.accuracy == 1.0, report.accuracy_by_kind()
    figures = {
        "backend": backend,
        "n": n,
        "seconds": seconds,
        "devices_per_s": n / seconds,
        "records": records,
        "generate_s": generated,
        "counts": report.counts(),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    figures.update(replay_costs(fleet))
    return figures


def replay_costs(fleet: Any) -> dict[str, Any]:
    """Time pybb's parse+replay and replay beside bare hashlib, over the fleet's logs."""
    from pybb.attestation import EventLogError, parse_event_log, replay

    logs, skipped = [], 0
    for device in fleet.devices:
        data = fleet.load(device).log
        try:
            logs.append((data, parse_event_log(data)))
        except EventLogError:
            skipped += 1  # corrupt logs: nothing to replay
    extends = [_extends(parsed) for _, parsed in logs]
    events = sum(len(e) for e in extends)
    parse_replay = _best(lambda: [replay(parse_event_log(data)) for data, _ in logs])
    replay_only = _best(lambda: [replay(parsed) for _, parsed in logs])

    def bare_all() -> None:
        for e in extends:
            _bare(e)

    bare = _best(bare_all)
    return {
        "logs": len(logs),
        "corrupt_logs": skipped,
        "extends": events,
        "parse_replay_us": parse_replay / len(logs) * 1e6,
        "replay_us": replay_only / len(logs) * 1e6,
        "hashlib_us": bare / len(logs) * 1e6,
        "parse_replay_ratio": parse_replay / bare,
        "replay_ratio": replay_only / bare,
    }


def _extends(parsed: Any) -> list[tuple[Callable[[bytes], Any], int, int, bytes]]:
    constructors = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha384": hashlib.sha384}
    constructors["sha512"] = hashlib.sha512
    return [
        (constructors[bank], event.pcr_index, len(digest), digest)
        for event in parsed.events
        if event.measured
        for bank, digest in event.digests.items()
    ]


def _bare(extends: list[tuple[Callable[[bytes], Any], int, int, bytes]]) -> None:
    pcrs: dict[tuple[Callable[[bytes], Any], int], bytes] = {}
    for hasher, pcr, size, digest in extends:
        key = (hasher, pcr)
        pcrs[key] = hasher(pcrs.get(key, bytes(size)) + digest).digest()


def _best(
    work: Callable[[], object], repeat: int = 3, clock: Callable[[], float] = time.perf_counter
) -> float:
    times = []
    for _ in range(repeat):
        started = clock()
        work()
        times.append(clock() - started)
    return min(times)


def quote_costs(n: int = 1000) -> dict[str, Any]:
    """Signature + replay + policy per device, beside bare hashlib replay + one verify."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    from pybb.attestation import Evidence, builtin_classes, builtin_logs, parse_event_log
    from pybb.attestation._analysis import verify
    from pybb.attestation._quote import (
        AttestationKey,
        check_pcr_digest,
        parse_quote,
        sign_quote,
        verify_signature,
    )
    from pybb.attestation._replay import replay

    classes = builtin_classes()
    logs = builtin_logs()
    keys = {name: rsa.generate_private_key(public_exponent=65537, key_size=2048) for name in logs}
    devices = []
    for i in range(n):
        name = sorted(logs)[i % len(logs)]
        policy = classes[name].policy
        values = replay(logs[name])
        quoted = {policy.bank: {p: values[policy.bank][p] for p in policy.pcrs}}
        message, signature = sign_quote(keys[name], quoted, i.to_bytes(32, "big"))
        devices.append(
            (name, logs[name], message, signature, AttestationKey(keys[name].public_key()))
        )

    def ours(reparse: bool) -> None:
        for name, log, message, raw, ak in devices:
            attest, signature = parse_quote(message, raw)
            verify_signature(message, signature, ak)
            parsed = parse_event_log(log)
            quoted = check_pcr_digest(attest, signature.hash, replay(parsed))
            evidence = Evidence(f"d{name}", name, log, quoted)
            report = verify(evidence, classes[name], parsed=None if reparse else parsed)
            assert report.passed, report.text()

    extends = {name: _extends(parse_event_log(log)) for name, log in logs.items()}

    def floor() -> None:
        for name, _, message, raw, ak in devices:
            _bare(extends[name])
            assert isinstance(ak.key, rsa.RSAPublicKey)
            ak.key.verify(raw[6:], message, padding.PKCS1v15(), hashes.SHA256())

    # CPU time, best of 5: the machine is shared, and wall time then measures the others.
    seconds = _best(lambda: ours(False), 5, time.process_time)
    twice = _best(lambda: ours(True), 5, time.process_time)  # as the tree does today
    bare = _best(floor, 5, time.process_time)
    return {
        "quote_devices": n,
        "quote_devices_per_s": n / seconds,
        "quote_us": seconds / n * 1e6,
        "floor_us": bare / n * 1e6,
        "quote_ratio": seconds / bare,
        "reparse_devices_per_s": n / twice,
        "reparse_ratio": twice / bare,
    }


def measure(backend: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", backend, str(n)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return figures


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| store | devices | devices/s | seconds | board records | peak RSS | "
        "parse+replay µs/log | replay µs/log | hashlib µs/log | parse+replay / hashlib | "
        "replay / hashlib |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r['backend']} | {r['n']:,} | {r['devices_per_s']:,.0f} | {r['seconds']:.2f} | "
        f"{r['records']:,} | {r['rss_mb']:.0f} MB | {r['parse_replay_us']:.0f} | "
        f"{r['replay_us']:.0f} | {r['hashlib_us']:.0f} | {r['parse_replay_ratio']:.1f}x | "
        f"{r['replay_ratio']:.1f}x |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 devices only")
    parser.add_argument("--results", type=Path, help="also write the table to this Markdown file")
    parser.add_argument("--quotes-only", action="store_true", help="only the signed quotes")
    parser.add_argument("--one", nargs=2, metavar=("BACKEND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]))))
        return
    rows = []
    for backend, n in [] if args.quotes_only else QUICK if args.quick else FULL:
        rows.append(measure(backend, n))
        print(json.dumps(rows[-1]), flush=True)
    quotes = quote_costs()
    print(json.dumps(quotes), flush=True)
    text = (
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{len(rows)} runs, each in a fresh process.\n\n{table(rows) if rows else ''}"
        f"\nSigned quotes (RSA-2048, {quotes['quote_devices']:,} devices): signature + replay + "
        f"policy {quotes['quote_devices_per_s']:,.0f} devices/s ({quotes['quote_us']:.0f} µs per "
        f"device) against bare hashlib replay + one cryptography verify "
        f"{quotes['floor_us']:.0f} µs: {quotes['quote_ratio']:.1f}x (aim >= 1,000 devices/s); "
        f"parsing the log a second time for the policy, as the tree's verification tier does: "
        f"{quotes['reparse_devices_per_s']:,.0f} devices/s ({quotes['reparse_ratio']:.1f}x). "
        "CPU time, best of 5.\n"
    )
    print(text)
    if args.results is not None:
        args.results.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""Record RA-09's golden runs: ``python tests/pybb/golden/make_golden.py [--count 50]``.

Each fixture holds a scenario (generated from its seed), the board digest of running it,
the controller's decisions in order, the board's log and the final summary. Re-record
only when the record format changes on purpose: bump ``pybb_golden.SCHEMA``, keep the
old fixtures under ``schema-<n>/`` and migrate their logs with a tested migration
(``test_pybb_golden_migration.py``); a fixture that stops replaying otherwise is a
regression.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pybb_golden import SCHEMA, fixture_text, replay, scenario  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    for seed in range(args.first_seed, args.first_seed + args.count):
        spec = scenario(seed)
        recorded = replay(spec)
        fixture = {"schema": SCHEMA, "seed": seed, "scenario": spec, **recorded}
        path = HERE / f"run-{seed}.json"
        path.write_text(fixture_text(fixture))
        print(f"{path.name}: {len(recorded['decisions'])} decisions, {recorded['summary']}")


if __name__ == "__main__":
    main()

"""An atheris (libFuzzer) target for the event-log decoder, run by test_fuzz.py.

Run by hand for longer: ``python fuzz_eventlog_target.py -max_total_time=600 SEEDS/``.
Any exception other than EventLogError is a crash; libFuzzer writes the input to
``-artifact_prefix`` and the test copies it into ``corpus/`` as a regression case.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from pybb.attestation import EventLogError, iter_replay, parse_event_log


def exercise(data: bytes) -> None:
    try:
        log = parse_event_log(data)
    except EventLogError:
        return
    for step in iter_replay(log):
        _ = (step.event.description, step.event.label, step.event.type_name)
    _ = (log.secure_boot, log.boot_components())


def main() -> None:
    atheris.Setup(sys.argv, exercise)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

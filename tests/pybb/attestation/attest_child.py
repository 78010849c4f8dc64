"""``pybb attest`` in a child process, with the crash points the resume test needs.

``ATTEST_CRASH_AFTER_WRITES=k``: die (``os._exit(137)``) right after the k-th chunk of
entries is committed, before the controller runs it: a deterministic kill point.
``ATTEST_FORGETFUL=1``: the negative control, a resume that does not finish the entries
an interrupted run left on the board (the first ``Controller.run`` does nothing).
"""

from __future__ import annotations

import os
import sys

from pybb import Controller
from pybb.attestation._tree import Attestation
from pybb.cli import main

crash_after = int(os.environ.get("ATTEST_CRASH_AFTER_WRITES", "0"))
if crash_after:
    original_write = Attestation._write
    writes = [0]

    def write_then_die(self: Attestation, devices: list[str]) -> None:
        original_write(self, devices)
        writes[0] += 1
        if writes[0] == crash_after:
            os._exit(137)

    Attestation._write = write_then_die  # type: ignore[method-assign]

if os.environ.get("ATTEST_FORGETFUL") == "1":
    original_run = Controller.run
    calls = [0]

    def forgetful_run(self: Controller):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 1:
            return None
        return original_run(self)

    Controller.run = forgetful_run  # type: ignore[method-assign]

sys.exit(main(sys.argv[1:]))

"""The README's real-evidence flow runs as written, against a private software TPM.

The ```sh block under "Real machines" in ``src/pybb/attestation/README.md`` is run by
bash in a temporary folder. What differs from a real machine is set up around it, not
edited into it: the "firmware" (this test) extends the swtpm's PCRs from a real log and
that log stands in for ``/sys/kernel/security/tpm0/binary_bios_measurements``; the
tpm2-tools commands are wrapped to flush transient objects after each call (a real
machine's kernel resource manager does that); ``pybb`` and ``python3`` are this Python.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from swtpm_support import MISSING, SoftwareTpm

from pybb.attestation import builtin_logs

if MISSING and not os.environ.get("CI"):
    pytest.skip(f"{', '.join(MISSING)} not on PATH", allow_module_level=True)

README = Path(__file__).resolve().parents[3] / "src" / "pybb" / "attestation" / "README.md"
_KERNEL_LOG = "/sys/kernel/security/tpm0/binary_bios_measurements"


def _flow() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Real machines") :]
    found = re.search(r"^```sh\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert found is not None
    return found.group(1)


def _wrappers(folder: Path, env: dict[str, str]) -> None:
    folder.mkdir()
    python = shlex.quote(sys.executable)
    scripts = {
        "pybb": f'exec {python} -m pybb "$@"\n',
        "python3": f'exec {python} "$@"\n',
    }
    for tool in ("tpm2_createek", "tpm2_createak", "tpm2_quote"):
        real = shutil.which(tool)
        assert real is not None
        scripts[tool] = f'{shlex.quote(real)} "$@" && tpm2_flushcontext -t\n'
    for name, body in scripts.items():
        path = folder / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    # The script runs elsewhere: a relative PYTHONPATH (PYTHONPATH=src) must still find it.
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths)


def test_the_readme_flow_passes_a_real_quote_once(tmp_path: Path) -> None:
    flow = _flow()
    assert _KERNEL_LOG in flow
    log = builtin_logs()["gce-ubuntu"]
    (tmp_path / "golden.bin").write_bytes(log)
    (tmp_path / "firmware.bin").write_bytes(log)
    tpm = SoftwareTpm(tmp_path / "tpm")
    try:
        tpm.extend(log)
        env = dict(tpm.env)
        _wrappers(tmp_path / "bin", env)
        script = flow.replace(_KERNEL_LOG, str(tmp_path / "firmware.bin"))
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        assert [(d["device"], d["outcome"], d["reason"]) for d in report["devices"]] == [
            ("web-01", "passed", None)
        ]
        # The last command again: the same quote counts once.
        last = flow.strip().splitlines()[-1]
        again = subprocess.run(
            ["bash", "-c", last], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert again.returncode == 1
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["devices"][0]["reason"] == "nonce_reused"
    finally:
        tpm.close()

"""A private software TPM (swtpm) driven with tpm2-tools, for tests that attest real quotes.

:class:`SoftwareTpm` starts ``swtpm socket`` on two free loopback ports in its own
temporary state folder (never the machine's TPM, never a shared one), talks to it with
``TPM2TOOLS_TCTI=swtpm:host=127.0.0.1,port=N``, and is always stopped by
:meth:`close` (the fixture calls it; it kills the process it started, by its pid).
There is no resource manager: every tool call is followed by flushing the transient
objects, and the AK is made persistent so it survives a reboot (:meth:`reboot`, a
power cycle that resets the PCRs and increments resetCount).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from pybb.attestation import parse_event_log

TOOLS = ("swtpm", "swtpm_ioctl", "tpm2_createek", "tpm2_createak", "tpm2_quote", "tpm2_checkquote")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
_TPM_BANKS = ("sha1", "sha256")  # what swtpm allocates without swtpm_setup


def _free_port_pair() -> int:
    """A port N such that N and N + 1 are free on 127.0.0.1 (the TCTI uses N + 1 to control)."""
    for _ in range(200):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return int(port)
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


class SoftwareTpm:
    """One private swtpm process and the tpm2-tools calls the tests need."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.state = self.folder / "state"
        self.state.mkdir(parents=True)
        self.port = _free_port_pair()
        self.env = {**os.environ, "TPM2TOOLS_TCTI": f"swtpm:host=127.0.0.1,port={self.port}"}
        self.process: subprocess.Popen[bytes] | None = None
        self._log = open(self.folder / "swtpm.log", "wb")  # noqa: SIM115 - closed by close()
        self._handles = 0x81010010
        self._start()

    def _start(self) -> None:
        self.process = subprocess.Popen(
            [
                "swtpm",
                "socket",
                "--tpm2",
                "--tpmstate",
                f"dir={self.state}",
                "--server",
                f"type=tcp,port={self.port},bindaddr=127.0.0.1",
                "--ctrl",
                f"type=tcp,port={self.port + 1},bindaddr=127.0.0.1",
                "--flags",
                "not-need-init,startup-clear",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                error = (self.folder / "swtpm.log").read_text(errors="replace")
                raise RuntimeError(f"swtpm exited: {error}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("swtpm did not start listening")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one tpm2-tools command against this TPM (then flush transient objects)."""
        done = subprocess.run(
            args, env=self.env, cwd=self.folder, capture_output=True, text=True, timeout=60
        )
        subprocess.run(["tpm2_flushcontext", "-t"], env=self.env, capture_output=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done

    def create_ak(self, name: str) -> tuple[str, Path]:
        """A new RSA-2048 RSASSA-SHA256 AK under the EK, made persistent.

        Returns:
            Its persistent handle (for ``tpm2_quote -c``) and its PEM file.
        """
        ek, ctx, pem = (str(self.folder / f"{name}.{x}") for x in ("ek.ctx", "ctx", "pem"))
        self.run("tpm2_createek", "-c", ek, "-G", "rsa", "-u", str(self.folder / f"{name}.ek"))
        self.run(
            "tpm2_createak", "-C", ek, "-c", ctx, "-G", "rsa", "-g", "sha256", "-s", "rsassa",
            "-u", pem, "-f", "pem", "-n", str(self.folder / f"{name}.name"),
        )  # fmt: skip
        handle = f"0x{self._handles:08x}"
        self._handles += 1
        self.run("tpm2_evictcontrol", "-C", "o", "-c", ctx, handle)
        self.run("tpm2_flushcontext", "-s", check=False)
        return handle, Path(pem)

    def reboot(self) -> None:
        """Power-cycle the TPM: PCRs back to their initial values, resetCount + 1."""
        subprocess.run(
            ["swtpm_ioctl", "--tcp", f"127.0.0.1:{self.port + 1}", "-i"],
            check=True,
            capture_output=True,
            timeout=30,
        )
        self.run("tpm2_startup", "-c")

    def extend(self, log: bytes) -> None:
        """Extend the PCRs as the firmware that wrote ``log`` did (its sha1/sha256 digests)."""
        specs = []
        for event in parse_event_log(log).events:
            if not event.measured:
                continue
            parts = [
                f"{bank}={event.digests[bank].hex()}"
                for bank in _TPM_BANKS
                if bank in event.digests
            ]
            specs.append(f"{event.pcr_index}:{','.join(parts)}")
        for start in range(0, len(specs), 16):
            self.run("tpm2_pcrextend", *specs[start : start + 16])

    def quote(self, handle: str, pcrs: str, nonce: str | None, out: Path) -> None:
        """``tpm2_quote`` into ``out``: quote.msg, quote.sig, quote.pcrs."""
        out.mkdir(parents=True, exist_ok=True)
        args = ["tpm2_quote", "-c", handle, "-l", pcrs, "-g", "sha256"]
        args += ["-m", str(out / "quote.msg"), "-s", str(out / "quote.sig")]
        args += ["-o", str(out / "quote.pcrs")]
        if nonce is not None:
            args += ["-q", nonce]
        self.run(*args)

    def checkquote(
        self, pem: Path, folder: Path, nonce: str | None, *, eventlog: bool = True
    ) -> int:
        """``tpm2_checkquote``'s exit status on the evidence in ``folder``."""
        args = ["tpm2_checkquote", "-u", str(pem), "-g", "sha256"]
        args += ["-m", str(folder / "quote.msg"), "-s", str(folder / "quote.sig")]
        args += ["-f", str(folder / "quote.pcrs")]
        if eventlog:
            args += ["-e", str(folder / "eventlog.bin")]
        if nonce is not None:
            args += ["-q", nonce]
        return subprocess.run(args, capture_output=True, timeout=60).returncode

    def close(self) -> None:
        """Stop the swtpm this object started (its pid only)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
        self._log.close()

"""A private PostgreSQL cluster for the tests that crash a server: never the machine's own.

``PrivateCluster.create()`` runs ``initdb`` into a fresh temporary folder (trust
authentication, superuser ``postgres``) and starts the server on a free port of 127.0.0.1,
its socket in that folder, so nothing else on the machine can reach it by accident or be
reached by it. ``remove()`` stops it and deletes the folder; the fixtures call it in a
``finally`` so a failing test leaves no server running and no folder behind.

PostgreSQL refuses to run as root, so as root the binaries run as a system user of their
own: ``PYBB_PG_USER`` if set, else ``postgres``, else ``nobody``. The binaries are taken
from ``PYBB_PG_BINDIR``, else the newest ``/usr/lib/postgresql/*/bin``, else ``PATH``.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

TOOLS = ("initdb", "pg_ctl", "postgres")


class ClusterUnavailableError(Exception):
    """A private cluster cannot be made here; the message says why and what to do."""


class ClusterCommandError(RuntimeError):
    """initdb or pg_ctl failed; the message holds its output and the end of the server log."""


def find_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, or None when there is none."""
    named = os.environ.get("PYBB_PG_BINDIR")
    if named:
        candidates = [Path(named)]
    else:
        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version, reverse=True)
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(Path(on_path).resolve().parent)
    for folder in candidates:
        if all(os.access(folder / tool, os.X_OK) for tool in TOOLS):
            return folder
    return None


def _version(bindir: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name))


def find_user() -> tuple[int, int] | None:
    """The (uid, gid) to run the server as when this process is root; None if there is none."""
    for name in (os.environ.get("PYBB_PG_USER"), "postgres", "nobody"):
        if not name:
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return entry.pw_uid, entry.pw_gid
    return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PrivateCluster:
    """One throw-away cluster: ``root`` holds ``data/``, the socket and ``server.log``."""

    bindir: str
    root: str
    port: int
    uid: int | None = None  # None: the binaries run as this process's user
    gid: int | None = None

    @classmethod
    def create(cls) -> PrivateCluster:
        """initdb into a new temporary folder and start it; raises ClusterUnavailableError."""
        bindir = find_bindir()
        if bindir is None:
            raise ClusterUnavailableError(
                "no PostgreSQL server binaries (initdb, pg_ctl, postgres) in "
                "/usr/lib/postgresql/*/bin or on PATH: apt-get install postgresql, "
                "or set PYBB_PG_BINDIR"
            )
        uid = gid = None
        if os.geteuid() == 0:
            user = find_user()
            if user is None:
                raise ClusterUnavailableError(
                    "running as root and no non-root user (postgres, nobody) to run a private "
                    "PostgreSQL cluster as: set PYBB_PG_USER"
                )
            uid, gid = user
        cluster = cls(str(bindir), tempfile.mkdtemp(prefix="pybb-pg-"), free_port(), uid, gid)
        atexit.register(cluster.remove)  # a backstop: the fixtures remove it themselves
        try:
            cluster._initdb()
            cluster._first_start()
        except ClusterCommandError as exc:
            cluster.remove()
            raise ClusterUnavailableError(f"could not make a private cluster: {exc}") from exc
        except BaseException:
            cluster.remove()
            raise
        return cluster

    @classmethod
    def from_json(cls, text: str) -> PrivateCluster:
        """The cluster ``to_json`` described (for a child process that must control it)."""
        return cls(**json.loads(text))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @property
    def data(self) -> Path:
        return Path(self.root) / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the server (crash recovery first, after a crash) and wait until it answers."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        log = str(Path(self.root) / "server.log")
        self._pg_ctl("-D", str(self.data), "-l", log, "-o", options, "-w", "-t", "120", "start")

    def crash(self) -> None:
        """Stop the server as a crash does: every backend killed, no checkpoint."""
        self._pg_ctl("-D", str(self.data), "-m", "immediate", "-w", "stop")

    def restart(self) -> None:
        """An orderly restart (a new postmaster, so a new ``pg_postmaster_start_time()``)."""
        self._pg_ctl("-D", str(self.data), "-m", "fast", "-w", "stop")
        self.start()

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def remove(self) -> None:
        """Stop the server if it runs and delete the folder; safe to call more than once."""
        root = Path(self.root)
        if not root.exists():
            return
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            self._kill_leftover_postmaster()
        shutil.rmtree(root)

    # -- the steps ---------------------------------------------------------------------------

    def _initdb(self) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(self.root, self.uid, self.gid)
        # --no-sync: the tests crash the server process, never the machine, so the files
        # need to reach the OS, not the disk; it saves seconds on a loaded machine.
        args = ["-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]
        self._run("initdb", *args, "--locale=C", "--no-sync", "--no-instructions")

    def _first_start(self) -> None:
        for _ in range(5):
            try:
                self.start()
                return
            except ClusterCommandError:
                if "could not bind" not in self._log_tail():
                    raise
                self.port = free_port()  # taken between our probe and the server's bind
        self.start()

    def _kill_leftover_postmaster(self) -> None:
        """SIGKILL the postmaster this cluster started if pg_ctl could not stop it."""
        pid_file = self.data / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split()[0])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            return
        if str(self.data) not in command:
            return  # a stale pid file: that process is not ours to signal
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises once the postmaster has gone
                time.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", *args)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(Path(self.bindir) / tool), *args],
            user=self.uid,
            group=self.gid,
            extra_groups=None if self.uid is None else [],  # not root's groups
            cwd=self.root,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if check and done.returncode != 0:
            raise ClusterCommandError(
                f"{tool} {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}"
                f"\nserver.log ends:\n{self._log_tail()}"
            )
        return done

    def _log_tail(self) -> str:
        try:
            return (Path(self.root) / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no server.log)"

"""A PostgreSQL server for the class store's tests, started from the machine's own PostgreSQL
(Debian's `postgresql` package: initdb and pg_ctl in /usr/lib/postgresql/N/bin), as the
`postgres` user when the tests run as root. `Server.start()` says why it cannot start instead."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[-3]))
    return versions[-1] if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One throwaway cluster on a free local port; `database()` makes a fresh database per test."""

    def __init__(self):
        self.folder: Path | None = None
        self.port = 0
        self.user: str | None = None  # the system user that runs the server (None: this one)
        self.made = 0

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        command = list(argv) if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    def start(self) -> str | None:
        """Start it; None when it runs, else the reason it cannot."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return 'psycopg is not installed (pip install "psycopg[binary]"): no PostgreSQL driver to test with'
        initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if not initdb or not pg_ctl:
            return "no PostgreSQL here (initdb and pg_ctl: Debian's postgresql package)"
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no postgres user to run PostgreSQL as"
            if not shutil.which("runuser"):
                return "running as root without runuser to start PostgreSQL as the postgres user"
            self.user = "postgres"
        self.folder = Path(tempfile.mkdtemp(prefix="capsviz-pg-"))
        if self.user:
            shutil.chown(self.folder, self.user)
        self.port = _free_port()
        made = self._run(initdb, "-D", str(self.folder / "data"), "-U", "capsviz", "--auth=trust", "-E", "UTF8")
        if made.returncode:
            return f"initdb failed: {made.stderr.strip()[-300:]}"
        started = self._run(
            pg_ctl,
            "-D",
            str(self.folder / "data"),
            "-l",
            str(self.folder / "log"),
            "-o",
            f"-p {self.port} -k {self.folder} -h 127.0.0.1",
            "-w",
            "start",
        )
        if started.returncode:
            return f"pg_ctl start failed: {started.stderr.strip()[-300:]}"
        self.pg_ctl = pg_ctl
        return None

    def database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        self.made += 1
        name = f"class_{self.made}"
        with psycopg.connect(f"postgresql://capsviz@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql://capsviz@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.folder is not None and self.port:
            self._run(self.pg_ctl, "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

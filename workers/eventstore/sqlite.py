"""The embedded SQLite event store: durable commits, checkpoints off the request path.

In WAL mode SQLite moves the log's pages into the database file (a checkpoint) at the
commit that finds the WAL over ``wal_autocheckpoint`` pages (1,000 by default): that one
commit, usually a request's, then copies and fsyncs megabytes before it answers. Here the
event store's connections keep ``synchronous=FULL`` (a commit survives power loss) and
set ``wal_autocheckpoint=0``; the read models' and job claims' connections of the same
file do likewise (``autocheckpoint=False``), and a ``WalCheckpointer`` thread runs
``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval`` seconds instead. A passive
checkpoint takes no lock a writer waits for; once it has moved every frame, the next
writer starts the WAL from its beginning again, and ``journal_size_limit`` truncates a
WAL that a burst made larger. Under steady writes a passive checkpoint may never find the
WAL wholly moved at the moment a writer starts, so right after a checkpoint that moved
every frame the checkpointer writes one tiny row itself, which starts the WAL over if no
other writer came first. Only when the WAL still holds more than ``restart_frames``
after a few such tries does it run ``RESTART`` (new writers wait while it moves the
few frames left). The WAL therefore stays bounded while no request's commit checkpoints.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, NamedTuple

import structlog
from eventsourcing.sqlite import SQLiteConnection, SQLiteConnectionPool, SQLiteFactory
from eventsourcing.utils import Environment, EnvType

from projections.engine.store import SqliteDocStore
from workers.eventstore.mapping import LeanStores

log = structlog.get_logger(__name__)

JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024  # bytes a reset WAL is truncated to


def no_autocheckpoint(conn: sqlite3.Connection, *, synchronous: str) -> None:
    """A connection that never checkpoints at commit (the checkpointer does)."""
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")


class DurablePool(SQLiteConnectionPool):
    """The library's pool; each connection commits with ``synchronous=FULL`` and leaves
    checkpoints to the ``WalCheckpointer``."""

    def _create_connection(self) -> SQLiteConnection:
        conn = super()._create_connection()
        if not self.is_sqlite_memory_mode:
            no_autocheckpoint(conn._sqlite_conn, synchronous="FULL")
        return conn


class CheckpointedSQLiteFactory(LeanStores, SQLiteFactory):
    """The library's SQLite factory over ``DurablePool`` (``PERSISTENCE_MODULE``)."""

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        library = self.datastore.pool
        self.datastore.pool = DurablePool(
            db_name=library.db_name,
            lock_timeout=library.lock_timeout,
            pool_size=library.pool_size,
            max_overflow=library.max_overflow,
            pool_timeout=library.pool_timeout,
            max_age=library.max_age,
            pre_ping=library.pre_ping,
        )


class Checkpoint(NamedTuple):
    """One ``PRAGMA wal_checkpoint`` answer: busy (1 if it could not run), the WAL's
    frames, the frames moved into the database file."""

    busy: int
    wal_frames: int
    moved: int


class WalCheckpointer:
    """A thread that checkpoints one SQLite file's WAL every ``interval`` seconds."""

    def __init__(self, path: str, *, interval: float = 0.25, restart_frames: int = 4096) -> None:
        self.path = path
        self.interval = interval
        self.restart_frames = restart_frames
        self.runs = 0
        self.restarts = 0
        self.last: Checkpoint | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one checkpoint at a time (the thread, close)

    def checkpoint(self, mode: str = "PASSIVE", *, rewind: bool = False) -> Checkpoint:
        """One checkpoint. ``rewind``: once every frame is moved, a tiny write at once (a
        row of ``wal_rewind``) starts the WAL over from its beginning, unless another
        writer came first or a reader still holds an older snapshot (nothing waits)."""
        with self._lock:
            conn = sqlite3.connect(self.path, timeout=5, isolation_level=None)
            try:
                conn.execute("PRAGMA wal_autocheckpoint=0")
                row: Any = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
                done = Checkpoint(*row)
                if rewind and done.busy == 0 and done.wal_frames > 0 and done.moved == done.wal_frames:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("CREATE TABLE IF NOT EXISTS wal_rewind (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
                    conn.execute("INSERT OR REPLACE INTO wal_rewind VALUES (1, ?)", (self.runs,))
                    conn.execute("COMMIT")
                    done = Checkpoint(*conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
            finally:
                conn.close()
            self.last = done
            self.runs += 1
            return done

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="wal-checkpointer", daemon=True)
        self._thread.start()

    def pass_once(self) -> Checkpoint:
        """Passive checkpoints that rewind the WAL (a few tries, none waits); a restarting
        one, which makes new writers wait while it runs, only if the WAL is still over
        ``restart_frames`` after them."""
        done = self.checkpoint(rewind=True)
        for _ in range(3):
            if done.wal_frames <= self.restart_frames:
                return done
            done = self.checkpoint(rewind=True)
        if done.wal_frames > self.restart_frames:
            done = self.checkpoint("RESTART")
            self.restarts += 1
        return done

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.pass_once()
            except sqlite3.Error as exc:  # busy past the timeout, disk trouble: next time
                log.warning("wal_checkpoint_failed", error=repr(exc))

    def stop(self) -> None:
        """Stops the thread, then checkpoints once more: a closed store leaves a short WAL."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        try:
            self.checkpoint()
        except sqlite3.Error as exc:
            log.warning("wal_checkpoint_failed", error=repr(exc))


class CheckpointedDocStore(SqliteDocStore):
    """The read models of the service's SQLite file, whose connections never checkpoint,
    with the ``WalCheckpointer`` of that file: it runs from here until ``close``."""

    def __init__(self, path: str | Path, *, interval: float = 0.25) -> None:
        super().__init__(path, autocheckpoint=False)
        self.checkpointer = WalCheckpointer(str(path), interval=interval)
        self.checkpointer.start()

    def close(self) -> None:
        super().close()
        self.checkpointer.stop()

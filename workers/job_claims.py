"""Job claims: which runner is taking which due job, so several runners split the work.

A small table ``job_claims`` beside the read models (runner state, not a read model: a
rebuild never touches it). Runners offer the due jobs they read from the jobs read model,
then claim one at a time: on PostgreSQL with ``FOR UPDATE SKIP LOCKED`` (two runners never
wait on, or take, the same row), on SQLite inside ``BEGIN IMMEDIATE`` (one claimer at a
time). A claim holds for a lease; a runner that vanished lets it lapse. The claim only
spreads the work: the job's own optimistic concurrency decides who records its steps.
"""

from __future__ import annotations

import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from projections.engine.sqlite_connections import ThreadConnections

TABLE = "job_claims"


class JobClaims(ABC):
    @abstractmethod
    def offer(self, due: Sequence[tuple[str, str]]) -> None:
        """Makes ``(job key, due time)`` pairs claimable; forgets lapsed claims of others."""

    @abstractmethod
    def claim(self, keys: Sequence[str], runner_id: str, lease_seconds: float) -> str | None:
        """Claims the earliest due of ``keys`` nobody holds; None when all are held."""

    @abstractmethod
    def release(self, key: str, runner_id: str) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Closes what the claims opened."""


class PostgresJobClaims(JobClaims):
    """Claims on PostgreSQL, through the read-model store's connection pool."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        with pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('squadops-job-claims'))")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (job_key TEXT COLLATE \"C\" PRIMARY KEY, "
                "due TEXT COLLATE \"C\" NOT NULL, claimed_by TEXT NOT NULL DEFAULT '', "
                "claimed_until DOUBLE PRECISION NOT NULL DEFAULT 0)"
            )

    def offer(self, due: Sequence[tuple[str, str]]) -> None:
        keys = [k for k, _ in due]
        with self.pool.connection() as conn:
            if due:
                conn.execute(
                    f"INSERT INTO {TABLE} (job_key, due) SELECT * FROM unnest(%s::text[], %s::text[]) "
                    f"ON CONFLICT (job_key) DO UPDATE SET due = excluded.due WHERE {TABLE}.due <> excluded.due",
                    (keys, [d for _, d in due]),
                )
            conn.execute(
                f"DELETE FROM {TABLE} WHERE claimed_until < extract(epoch FROM clock_timestamp()) "
                "AND NOT (job_key = ANY(%s))",
                (keys,),
            )

    def claim(self, keys: Sequence[str], runner_id: str, lease_seconds: float) -> str | None:
        if not keys:
            return None
        with self.pool.connection() as conn:
            row = conn.execute(
                f"WITH pick AS (SELECT job_key FROM {TABLE} WHERE job_key = ANY(%s) "
                "AND claimed_until < extract(epoch FROM clock_timestamp()) "
                "ORDER BY due, job_key LIMIT 1 FOR UPDATE SKIP LOCKED) "
                f"UPDATE {TABLE} c SET claimed_by = %s, "
                "claimed_until = extract(epoch FROM clock_timestamp()) + %s "
                "FROM pick WHERE c.job_key = pick.job_key RETURNING c.job_key",
                (list(keys), runner_id, lease_seconds),
            ).fetchone()
        return str(row[0]) if row else None

    def release(self, key: str, runner_id: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE job_key = %s AND claimed_by = %s", (key, runner_id))

    def close(self) -> None:
        """Nothing to close: the pool belongs to the read-model store."""


class SqliteJobClaims(JobClaims):
    """Claims in the embedded SQLite file: ``BEGIN IMMEDIATE`` makes each claim the only writer."""

    def __init__(self, path: str | Path, *, autocheckpoint: bool = True) -> None:
        self.path = str(path)
        self.autocheckpoint = autocheckpoint  # False: a WalCheckpointer checkpoints the file
        pragmas = ("busy_timeout=30000",) + (() if autocheckpoint else ("wal_autocheckpoint=0",))
        self._connections = ThreadConnections(self.path, pragmas)
        with self._writing() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (job_key TEXT PRIMARY KEY, due TEXT NOT NULL, "
                "claimed_by TEXT NOT NULL DEFAULT '', claimed_until REAL NOT NULL DEFAULT 0)"
            )

    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    class _Writing:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, kind: Any, *_: Any) -> None:
            self.conn.execute("ROLLBACK" if kind else "COMMIT")

    def _writing(self) -> SqliteJobClaims._Writing:
        return self._Writing(self._conn())

    def offer(self, due: Sequence[tuple[str, str]]) -> None:
        keys = [k for k, _ in due]
        with self._writing() as conn:
            conn.executemany(
                f"INSERT INTO {TABLE} (job_key, due) VALUES (?, ?) "
                "ON CONFLICT (job_key) DO UPDATE SET due = excluded.due",
                list(due),
            )
            marks = ",".join("?" * len(keys))
            conn.execute(
                f"DELETE FROM {TABLE} WHERE claimed_until < ? AND job_key NOT IN ({marks})", [time.time(), *keys]
            )

    def claim(self, keys: Sequence[str], runner_id: str, lease_seconds: float) -> str | None:
        if not keys:
            return None
        now = time.time()
        marks = ",".join("?" * len(keys))
        with self._writing() as conn:
            row = conn.execute(
                f"SELECT job_key FROM {TABLE} WHERE job_key IN ({marks}) AND claimed_until < ? "
                "ORDER BY due, job_key LIMIT 1",
                [*keys, now],
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                f"UPDATE {TABLE} SET claimed_by = ?, claimed_until = ? WHERE job_key = ?",
                (runner_id, now + lease_seconds, row[0]),
            )
        return str(row[0])

    def release(self, key: str, runner_id: str) -> None:
        with self._writing() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE job_key = ? AND claimed_by = ?", (key, runner_id))

    def close(self) -> None:
        self._connections.close()

"""Projection runners' heartbeats, kept in the read-model database.

A runner may live in another process (``squadops worker projector``), so whether read
models are being kept current is a fact about the database, not about the API's process:
every running runner upserts a row (which projectors it runs, where they stand, when)
about once a second, and deletes it when it stops. A row older than the staleness bound
is a runner that died without saying so.
"""

from __future__ import annotations

import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass

from projections.engine.pg_store import PostgresDocStore
from projections.engine.store import DocStore, SqliteDocStore

TABLE = "projector_heartbeats"
FORGET_AFTER_SECONDS = 3600.0  # rows of runners long dead are pruned by the living


@dataclass(frozen=True)
class Beat:
    """One runner's last heartbeat: its projectors, their lowest position, its age."""

    runner: str
    projectors: tuple[str, ...]
    position: int
    age_seconds: float


class Heartbeats(ABC):
    """The heartbeat table of one database."""

    @abstractmethod
    def beat(self, runner: str, projectors: Sequence[str], position: int) -> None:
        """Records that ``runner`` is alive now with its projectors at ``position``."""

    @abstractmethod
    def beats(self) -> list[Beat]:
        """Every runner's last heartbeat."""

    @abstractmethod
    def forget(self, runner: str) -> None:
        """A runner that stops cleanly removes its row."""


class SqliteHeartbeats(Heartbeats):
    """Heartbeats in the embedded SQLite file (one host: the local clock is the clock)."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self._connect() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (runner TEXT PRIMARY KEY, "
                "projectors TEXT NOT NULL, position INTEGER NOT NULL, beat_at REAL NOT NULL)"
            )

    def _connect(self) -> closing[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        return closing(conn)

    def beat(self, runner: str, projectors: Sequence[str], position: int) -> None:
        now = time.time()
        with self._connect() as conn:
            conn.execute(
                f"INSERT INTO {TABLE} (runner, projectors, position, beat_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (runner) DO UPDATE SET projectors = excluded.projectors, "
                "position = excluded.position, beat_at = excluded.beat_at",
                (runner, ",".join(projectors), position, now),
            )
            conn.execute(f"DELETE FROM {TABLE} WHERE beat_at < ?", (now - FORGET_AFTER_SECONDS,))

    def beats(self) -> list[Beat]:
        with self._connect() as conn:
            rows = conn.execute(f"SELECT runner, projectors, position, beat_at FROM {TABLE}").fetchall()
        now = time.time()
        return [Beat(r, tuple(filter(None, p.split(","))), int(pos), max(0.0, now - at)) for r, p, pos, at in rows]

    def forget(self, runner: str) -> None:
        with self._connect() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE runner = ?", (runner,))


class PostgresHeartbeats(Heartbeats):
    """Heartbeats in PostgreSQL, timed by the database's clock (runners on many hosts)."""

    NOW = "EXTRACT(EPOCH FROM clock_timestamp())"

    def __init__(self, store: PostgresDocStore) -> None:
        self.pool = store.pool
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"squadops-{TABLE}",))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (runner TEXT PRIMARY KEY, projectors TEXT NOT NULL, "
                "position BIGINT NOT NULL, beat_at DOUBLE PRECISION NOT NULL)"
            )

    def beat(self, runner: str, projectors: Sequence[str], position: int) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                f"INSERT INTO {TABLE} (runner, projectors, position, beat_at) VALUES (%s, %s, %s, {self.NOW}) "
                "ON CONFLICT (runner) DO UPDATE SET projectors = excluded.projectors, "
                "position = excluded.position, beat_at = excluded.beat_at",
                (runner, ",".join(projectors), position),
            )
            conn.execute(f"DELETE FROM {TABLE} WHERE beat_at < {self.NOW} - %s", (FORGET_AFTER_SECONDS,))

    def beats(self) -> list[Beat]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT runner, projectors, position, {self.NOW} - beat_at FROM {TABLE}"
            ).fetchall()
        return [
            Beat(r, tuple(filter(None, p.split(","))), int(pos), max(0.0, float(age))) for r, p, pos, age in rows
        ]

    def forget(self, runner: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE runner = %s", (runner,))


def heartbeats_for(store: DocStore) -> Heartbeats:
    """The heartbeat table beside ``store``'s read models."""
    if isinstance(store, PostgresDocStore):
        return PostgresHeartbeats(store)
    if isinstance(store, SqliteDocStore):
        return SqliteHeartbeats(store.path)
    raise TypeError(f"no heartbeat table for {type(store).__name__}")

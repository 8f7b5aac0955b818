"""Read-model storage beside the events: one table per read model plus tracking positions.

Every read model is a table ``rm_<name>`` of JSON documents, each with a key and four
attributes to list them by: ``partition`` (e.g. a run's reports), ``group`` (e.g. a
project), ``sort_key`` and ``status``. In SQL the columns are ``k, p, g, s, st, v`` (key,
partition, group, sort key, status, the document's bytes). A projector's row changes and
its new position are committed in one transaction, guarded by the position it started
from, so a crash resumes where it stopped and two runners never apply the same events twice.

``DocStore`` is one implementation over SQL; a dialect (SQLite here, PostgreSQL in
``projections.engine.pg_store``) supplies its connections, its parameter mark, its column
types and the few statements that differ (``get_many``, ``commit_many``, ``ensure``).
"""

from __future__ import annotations

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from projections.engine.sqlite_connections import ThreadConnections

T = TypeVar("T")
TRACKING = "rm_tracking"
COLUMNS = "k, p, g, s, st, v"


class Row(NamedTuple):
    key: str
    partition: str
    group: str
    sort_key: str
    status: str
    body: bytes


class Change(NamedTuple):
    """One projector's batch: rows written and deleted, its position moved."""

    name: str
    expected: int
    position: int
    upserts: Sequence[Row]
    deletes: Sequence[str]


def table_name(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"bad read model name {name!r}")
    return f"rm_{name}"


def as_row(record: Sequence[Any]) -> Row:
    """A ``SELECT k, p, g, s, st, v`` record as a ``Row``."""
    return Row(record[0], record[1], record[2], record[3], record[4], bytes(record[5]))


SHADOW_BATCH = 5000  # rows per write while a shadow table is filled


class Shadow(ABC):
    """A read model's shadow table while a rebuild fills it (``DocStore.open_shadow``).

    Rows are written and read back by key as the fold goes (``write``, ``get``); ``swap``
    then replaces the read model atomically, with the live runner held off while
    ``catch_up(position)`` answers the last rows (see ``DocStore.swap_in``). ``drop``
    discards the shadow unless it was swapped in: the read model stays as it was.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.table = table_name(name)
        self.shadow = self.table + "__shadow"
        self.done = False

    @abstractmethod
    def write(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        """Keys deleted, then rows written, in one transaction. A row whose key may already be
        in the shadow must have its key among ``deletes`` (PostgreSQL copies rows in)."""

    @abstractmethod
    def get(self, key: str) -> Row | None:
        """The row of ``key`` as written so far, or None."""

    @abstractmethod
    def swap(self, position: int, catch_up: Any) -> int:
        """Writes ``catch_up(position)``'s rows and swaps the shadow in; answers the final position.

        ``catch_up(position)`` is called with the live runner held off; it answers the
        rows changed since ``position`` and the final position, so nothing is missed.
        """

    @abstractmethod
    def drop(self) -> None:
        """Drops the shadow table if it was not swapped in (a no-op once it was)."""


class DocStore(ABC):
    """The read-model side of the database (same database as the event store)."""

    dialect = ""
    mark = "?"  # the dialect's parameter placeholder
    columns = ""  # the column definitions of a read model's table

    # -- the dialect seam ------------------------------------------------------------------------

    @abstractmethod
    def _fetch(self, sql: str, params: Sequence[Any] = (), *, prepare: bool = False) -> list[Any]:
        """The records a read answers (``prepare``: a statement worth preparing)."""

    @staticmethod
    def _executemany(conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        conn.executemany(sql, rows)

    @abstractmethod
    def _delete_keys(self, conn: Any, table: str, keys: Sequence[str]) -> None: ...

    @abstractmethod
    def ensure(self, name: str) -> None:
        """Creates the read model's table and tracking row when missing."""

    @abstractmethod
    def get_many(self, name: str, keys: Sequence[str]) -> dict[str, bytes]: ...

    @abstractmethod
    def commit_many(self, changes: Sequence[Change]) -> bool:
        """Several projectors' ``commit`` in one transaction: all move, or none does."""

    @abstractmethod
    def open_shadow(self, name: str) -> Shadow:
        """A fresh, empty shadow table of ``name`` (an older one is dropped), for a rebuild to
        fill; the read model itself is untouched until ``Shadow.swap``."""

    @abstractmethod
    def close(self) -> None: ...

    def announce(self, name: str) -> None:
        """Every commit of ``name`` tells listening readers what it changed (PostgreSQL
        only: ``projections.engine.announce``); elsewhere there is no one to tell."""
        return None

    # -- reads ---------------------------------------------------------------------------------

    def position(self, name: str) -> int:
        rows = self._fetch(f"SELECT position FROM {TRACKING} WHERE name = {self.mark}", (name,))
        return int(rows[0][0]) if rows else 0

    def positions(self) -> dict[str, int]:
        rows = self._fetch(f"SELECT name, position FROM {TRACKING} ORDER BY name")
        return {name: int(pos) for name, pos in rows}

    def get(self, name: str, key: str) -> bytes | None:
        rows = self._fetch(f"SELECT v FROM {table_name(name)} WHERE k = {self.mark}", (key,), prepare=True)
        return bytes(rows[0][0]) if rows else None

    def scan(
        self,
        name: str,
        *,
        partition: str,
        after: str = "",
        before: str = "",
        group: str | None = None,
        status: str | None = None,
        limit: int = 100,
        descending: bool = False,
    ) -> list[Row]:
        """The rows of ``partition`` by sort key (strictly between ``after`` and ``before``
        when given), only those of ``group`` / ``status`` when given."""
        mark = self.mark
        sql = f"SELECT {COLUMNS} FROM {table_name(name)} WHERE p = {mark}"
        params: list[Any] = [partition]
        for clause, value in (("s >", after), ("s <", before)):
            if value:
                sql += f" AND {clause} {mark}"
                params.append(value)
        for column, value in (("g", group), ("st", status)):
            if value is not None:
                sql += f" AND {column} = {mark}"
                params.append(value)
        sql += f" ORDER BY s {'DESC' if descending else 'ASC'} LIMIT {mark}"
        params.append(limit)
        return [as_row(record) for record in self._fetch(sql, params)]

    def count(self, name: str, *, partition: str) -> int:
        rows = self._fetch(f"SELECT COUNT(*) FROM {table_name(name)} WHERE p = {self.mark}", (partition,))
        return int(rows[0][0])

    def dump(self, name: str) -> list[Row]:
        """Every row in key order (for comparing a rebuild with live projection)."""
        return [as_row(record) for record in self._fetch(f"SELECT {COLUMNS} FROM {table_name(name)} ORDER BY k")]

    # -- writes --------------------------------------------------------------------------------

    def commit(
        self,
        name: str,
        expected: int,
        position: int,
        upserts: Sequence[Row],
        deletes: Sequence[str],
    ) -> bool:
        """Applies row changes and moves the position; False if another runner moved it."""
        return self.commit_many([Change(name, expected, position, upserts, deletes)])

    def _create(self, conn: Any, table: str) -> None:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({self.columns})")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_ps ON {table} (p, s)")

    def _create_tracking(self, conn: Any) -> None:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TRACKING} (name TEXT PRIMARY KEY, position BIGINT NOT NULL DEFAULT 0)"
        )

    def _track(self, conn: Any, name: str) -> None:
        """The tracking row of ``name`` at 0, unless it has one."""
        conn.execute(
            f"INSERT INTO {TRACKING} (name, position) VALUES ({self.mark}, 0) ON CONFLICT (name) DO NOTHING", (name,)
        )

    def _move_sql(self) -> str:
        """Moves a position, guarded by the one it started from (one row changed, or none)."""
        mark = self.mark
        return f"UPDATE {TRACKING} SET position = {mark} WHERE name = {mark} AND position = {mark}"

    def _write_rows(self, conn: Any, table: str, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        if deletes:
            self._delete_keys(conn, table, deletes)
        if upserts:
            marks = ", ".join([self.mark] * 6)
            self._executemany(
                conn,
                f"INSERT INTO {table} ({COLUMNS}) VALUES ({marks}) "
                "ON CONFLICT (k) DO UPDATE SET p = excluded.p, g = excluded.g, s = excluded.s, "
                "st = excluded.st, v = excluded.v",
                upserts,
            )

    def _replace(self, conn: Any, name: str, shadow: str, position: int) -> None:
        """In the caller's transaction: the shadow table becomes the read model ``name``, at
        ``position``."""
        table = table_name(name)
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"ALTER TABLE {shadow} RENAME TO {table}")
        self._renamed(conn, table, shadow)
        conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_ps ON {table} (p, s)")
        conn.execute(
            f"INSERT INTO {TRACKING} (name, position) VALUES ({self.mark}, {self.mark}) "
            "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
            (name, position),
        )

    def _renamed(self, conn: Any, table: str, shadow: str) -> None:
        """What else the dialect renames with a swapped-in table."""
        return None

    def swap_in(self, name: str, rows: Iterable[Row], position: int, catch_up: Any) -> int:
        """Blue/green: fills a shadow table with ``rows``, then atomically replaces the read
        model (``Shadow.swap``); on any failure the shadow is dropped, the model untouched."""
        shadow = self.open_shadow(name)
        try:
            batch: list[Row] = []
            for row in rows:
                batch.append(row)
                if len(batch) >= SHADOW_BATCH:
                    shadow.write(batch, ())
                    batch = []
            shadow.write(batch, ())
            return shadow.swap(position, catch_up)
        finally:
            shadow.drop()


# -- SQLite ----------------------------------------------------------------------------------


class SqliteDocStore(DocStore):
    """Read models in the embedded SQLite file (WAL: readers never block the writer)."""

    dialect = "sqlite"
    mark = "?"
    columns = (
        "k TEXT PRIMARY KEY, p TEXT NOT NULL, g TEXT NOT NULL, s TEXT NOT NULL, st TEXT NOT NULL, v BLOB NOT NULL"
    )

    def __init__(self, path: str | Path, *, autocheckpoint: bool = True) -> None:
        """``autocheckpoint=False``: commits never checkpoint the WAL; a checkpointer of
        the same file must (workers/eventstore/sqlite.py)."""
        self.path = str(path)
        self.autocheckpoint = autocheckpoint
        self._write_lock = threading.RLock()
        pragmas = ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000")
        if not autocheckpoint:  # and a reset WAL's size
            pragmas += ("wal_autocheckpoint=0", f"journal_size_limit={16 * 1024 * 1024}")
        self._connections = ThreadConnections(self.path, pragmas)
        with self._writing() as conn:
            self._create_tracking(conn)

    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def _fetch(self, sql: str, params: Sequence[Any] = (), *, prepare: bool = False) -> list[Any]:
        return self._conn().execute(sql, params).fetchall()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def ensure(self, name: str) -> None:
        with self._writing() as conn:
            self._create(conn, table_name(name))
            self._track(conn, name)

    def get_many(self, name: str, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._fetch(f"SELECT k, v FROM {table_name(name)} WHERE k IN ({marks})", chunk)
            found.update((k, bytes(v)) for k, v in rows)
        return found

    def _delete_keys(self, conn: Any, table: str, keys: Sequence[str]) -> None:
        conn.executemany(f"DELETE FROM {table} WHERE k = ?", [(k,) for k in keys])

    def commit_many(self, changes: Sequence[Change]) -> bool:
        move = self._move_sql()
        with self._write_lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for change in changes:
                    if conn.execute(move, (change.position, change.name, change.expected)).rowcount != 1:
                        conn.execute("ROLLBACK")
                        return False
                    self._write_rows(conn, table_name(change.name), change.upserts, change.deletes)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return True

    def open_shadow(self, name: str) -> Shadow:
        shadow = SqliteShadow(self, name)
        with self._writing() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {shadow.shadow}")
            conn.execute(f"CREATE TABLE {shadow.shadow} ({self.columns})")
        return shadow

    def close(self) -> None:
        self._connections.close()


class SqliteShadow(Shadow):
    """A shadow table in the SQLite file, written and read on the store's connection."""

    def __init__(self, store: SqliteDocStore, name: str) -> None:
        super().__init__(name)
        self.store = store

    def write(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        if upserts or deletes:
            with self.store._writing() as conn:
                self.store._write_rows(conn, self.shadow, upserts, deletes)

    def get(self, key: str) -> Row | None:
        rows = self.store._fetch(f"SELECT {COLUMNS} FROM {self.shadow} WHERE k = ?", (key,))
        return as_row(rows[0]) if rows else None

    def swap(self, position: int, catch_up: Any) -> int:
        with self.store._writing() as conn:  # the write lock holds the live runner off
            upserts, deletes, final = catch_up(position)
            self.store._write_rows(conn, self.shadow, upserts, deletes)
            self.store._replace(conn, self.name, self.shadow, final)
        self.done = True
        return final

    def drop(self) -> None:
        if not self.done:
            self.done = True
            with self.store._writing() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {self.shadow}")


"""Read models in PostgreSQL, in the same database as the events: the PostgreSQL dialect of
``projections.engine.store.DocStore``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from projections.engine import announce
from projections.engine.store import (
    COLUMNS,
    TRACKING,
    Change,
    DocStore,
    Row,
    Shadow,
    T,
    as_row,
    table_name,
)
from projections.engine.unavailable import GuardedPool, connection_bounds, connection_lost

PG_COLUMNS = (
    'k TEXT COLLATE "C" PRIMARY KEY, p TEXT COLLATE "C" NOT NULL, g TEXT NOT NULL, '
    's TEXT COLLATE "C" NOT NULL, st TEXT NOT NULL, v BYTEA{compression} NOT NULL'
)
# Large documents (a run's stored feed: tens of KB, rewritten at every batch that touches
# the run) are compressed by TOAST: lz4 costs the server a fraction of pglz's time.
LZ4 = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"


class PostgresDocStore(DocStore):
    """Read models in PostgreSQL, in the same database as the events."""

    dialect = "postgres"
    mark = "%s"

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, wait_seconds: float = 30.0, statement_seconds: float = 0.0
    ) -> None:
        self.url = url
        self.announced: set[str] = set()
        self._shadowing: Any = None  # see _shadow_connection
        self._shadows = 0
        # C19: connections are checked before use; waits, connects and statements bounded.
        kwargs = {"autocommit": True, **connection_bounds(statement_seconds)}
        self.pool = GuardedPool(
            url, min_size=min_size, max_size=max_size, open=True, kwargs=kwargs, timeout=wait_seconds
        )
        with self.pool.connection() as conn:
            if conn.execute("SELECT to_regclass(%s) IS NULL", (TRACKING,)).fetchone()[0]:
                with conn.transaction():  # (processes starting at once on a fresh database)
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"squadops-{TRACKING}",))
                    self._create_tracking(conn)
            row = conn.execute(LZ4).fetchone()
        self.columns = PG_COLUMNS.format(compression=" COMPRESSION lz4" if row and row[0] else "")

    def announce(self, name: str) -> None:
        self.announced.add(name)

    def _announce(self, conn: Any, name: str, position: int, keys: Sequence[str] | None) -> None:
        """Tells listening readers, on commit, what changed (``projections.engine.announce``)."""
        for payload in announce.entries(name, position, keys):
            conn.execute("SELECT pg_notify(%s, %s)", (announce.CHANNEL, payload))

    def reading(self, query: Callable[[Any], T]) -> T:
        """``query(connection)``, once more on a fresh connection if the first one died
        under it (reads are safe to repeat; a pool wait or a timeout is not repeated)."""
        try:
            with self.pool.connection() as conn:
                return query(conn)
        except Exception as exc:
            if not connection_lost(exc):
                raise
        with self.pool.connection() as conn:
            return query(conn)

    def _fetch(self, sql: str, params: Sequence[Any] = (), *, prepare: bool = False) -> list[Any]:
        return self.reading(lambda conn: conn.execute(sql, params, prepare=prepare or None).fetchall())

    @staticmethod
    def _executemany(conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(sql, rows)

    def _delete_keys(self, conn: Any, table: str, keys: Sequence[str]) -> None:
        conn.execute(f"DELETE FROM {table} WHERE k = ANY(%s)", (list(keys),))

    def ensure(self, name: str) -> None:
        """Creates the read model's table and tracking row when missing.

        A process starting beside running projectors must not lock what they write: the
        check takes no lock, and the table's DDL (which locks the table) and the tracking
        row's insert (which waits on a row a projector may hold) are separate transactions,
        so neither waits on the other while holding a lock (no deadlock).
        """
        table = table_name(name)
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT to_regclass(%s) IS NOT NULL, EXISTS (SELECT 1 FROM {TRACKING} WHERE name = %s)",
                (table, name),
            ).fetchone()
            has_table, tracked = bool(row[0]), bool(row[1])
            if not has_table:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"squadops-rm-{name}",))
                    self._create(conn, table)
            if not tracked:
                self._track(conn, name)

    def get_many(self, name: str, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        rows = self._fetch(f"SELECT k, v FROM {table_name(name)} WHERE k = ANY(%s)", (list(keys),))
        return {k: bytes(v) for k, v in rows}

    def commit_many(self, changes: Sequence[Change]) -> bool:
        """One pipeline: every position move and row write is sent before any answer is
        awaited (a pass of many projectors costs a round trip or two, not one each); a
        position another runner moved rolls all of it back."""
        from psycopg import Rollback

        move = self._move_sql()
        with self.pool.connection() as conn, conn.transaction():
            with conn.pipeline():
                moves = [conn.execute(move, (change.position, change.name, change.expected)) for change in changes]
                for change in changes:
                    self._write_rows(conn, table_name(change.name), change.upserts, change.deletes)
                    if change.name in self.announced:  # told on commit only
                        keys = [row[0] for row in change.upserts] + list(change.deletes)
                        self._announce(conn, change.name, change.position, keys)
            if any(move.rowcount != 1 for move in moves):
                raise Rollback()
            return True
        return False

    def _renamed(self, conn: Any, table: str, shadow: str) -> None:
        conn.execute(f"ALTER INDEX IF EXISTS {shadow}_pkey RENAME TO {table}_pkey")

    def open_shadow(self, name: str) -> Shadow:
        return PostgresShadow(self, name)

    def _shadow_connection(self) -> Any:
        """The connection every open shadow of this store is filled, read and swapped on
        (a rebuild's work is sequential): one connection, not one per read model."""
        import psycopg

        if self._shadowing is None or self._shadowing.closed:
            self._shadowing = psycopg.connect(self.url, autocommit=True)
        self._shadows += 1
        return self._shadowing

    def _shadow_done(self) -> None:
        self._shadows -= 1
        if self._shadows <= 0 and self._shadowing is not None:
            self._shadowing.close()
            self._shadowing = None

    def close(self) -> None:
        if self._shadowing is not None:
            self._shadowing.close()
        self.pool.close()


class PostgresShadow(Shadow):
    """A shadow table on a connection outside the pools: a whole read model is not bounded
    like a request. It is unlogged while it is filled (no WAL for rows that may be written
    again), and logged just before the swap."""

    def __init__(self, store: PostgresDocStore, name: str) -> None:
        super().__init__(name)
        self.store = store
        self.conn = store._shadow_connection()
        try:
            self.conn.execute(f"DROP TABLE IF EXISTS {self.shadow}")
            self.conn.execute(f"CREATE UNLOGGED TABLE {self.shadow} ({store.columns})")
        except BaseException:
            self.done = True
            store._shadow_done()
            raise

    def write(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        """Deletes, then copies the rows in (faster than upserts: a row already there must be
        among ``deletes``, see ``Shadow.write``)."""
        if not upserts and not deletes:
            return
        with self.conn.transaction(), self.conn.cursor() as cur:
            if deletes:
                self.store._delete_keys(cur, self.shadow, deletes)
            if upserts:
                with cur.copy(f"COPY {self.shadow} ({COLUMNS}) FROM STDIN") as copy:
                    for row in upserts:
                        copy.write_row(row)

    def get(self, key: str) -> Row | None:
        row = self.conn.execute(f"SELECT {COLUMNS} FROM {self.shadow} WHERE k = %s", (key,), prepare=True).fetchone()
        return as_row(row) if row else None

    @contextmanager
    def _held(self) -> Iterator[Any]:
        """A transaction on the shadow's connection that holds the live runner off this read
        model (its tracking row locked) until it commits."""
        self.conn.execute(f"ALTER TABLE {self.shadow} SET LOGGED")
        with self.conn.transaction():
            self.conn.execute(f"SELECT position FROM {TRACKING} WHERE name = %s FOR UPDATE", (self.name,))
            yield self.conn

    def swap(self, position: int, catch_up: Any) -> int:
        with self._held() as conn:
            upserts, deletes, final = catch_up(position)
            self.store._write_rows(conn, self.shadow, upserts, deletes)
            self.store._replace(conn, self.name, self.shadow, final)
            self.store._announce(conn, self.name, final, None)  # every copy of the model goes
        self.done = True
        self.store._shadow_done()
        return final

    def drop(self) -> None:
        """Drops the shadow on a fresh connection (its own may be what failed)."""
        if self.done:
            return
        self.done = True
        self.store._shadow_done()
        import psycopg

        with psycopg.connect(self.store.url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {self.shadow}")

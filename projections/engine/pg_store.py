"""Read models in PostgreSQL, in the same database as the events."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from projections.engine import announce
from projections.engine.store import TRACKING, Change, DocStore, Row, Shadow, T, table_name
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
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TRACKING} ("
                "name TEXT PRIMARY KEY, position BIGINT NOT NULL DEFAULT 0)"
            )
            row = conn.execute(LZ4).fetchone()
        self.columns = PG_COLUMNS.format(compression=" COMPRESSION lz4" if row and row[0] else "")

    def announce(self, name: str) -> None:
        self.announced.add(name)

    def _announce(self, conn: Any, name: str, position: int, keys: Sequence[str] | None) -> None:
        """Tells listening readers, on commit, what changed (``projections.engine.announce``)."""
        for payload in announce.entries(name, position, keys):
            conn.execute("SELECT pg_notify(%s, %s)", (announce.CHANNEL, payload))

    def _create(self, conn: Any, table: str) -> None:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ({self.columns})"
        )
        conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_ps ON {table} (p, s)")

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
                conn.execute(
                    f"INSERT INTO {TRACKING} (name, position) VALUES (%s, 0) ON CONFLICT (name) DO NOTHING",
                    (name,),
                )

    def position(self, name: str) -> int:
        sql = f"SELECT position FROM {TRACKING} WHERE name = %s"
        row = self.reading(lambda conn: conn.execute(sql, (name,)).fetchone())
        return int(row[0]) if row else 0

    def positions(self) -> dict[str, int]:
        sql = f"SELECT name, position FROM {TRACKING} ORDER BY name"
        rows = self.reading(lambda conn: conn.execute(sql).fetchall())
        return {name: int(pos) for name, pos in rows}

    def get(self, name: str, key: str) -> bytes | None:
        sql = f"SELECT v FROM {table_name(name)} WHERE k = %s"
        row = self.reading(lambda conn: conn.execute(sql, (key,), prepare=True).fetchone())
        return bytes(row[0]) if row else None

    def get_many(self, name: str, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        sql = f"SELECT k, v FROM {table_name(name)} WHERE k = ANY(%s)"
        rows = self.reading(lambda conn: conn.execute(sql, (list(keys),)).fetchall())
        return {k: bytes(v) for k, v in rows}

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
        sql, params = self.scan_query(
            name, "%s", partition=partition, after=after, before=before, group=group, status=status,
            limit=limit, descending=descending,
        )
        rows = self.reading(lambda conn: conn.execute(sql, params).fetchall())
        return [Row(*row[:5], bytes(row[5])) for row in rows]

    def count(self, name: str, *, partition: str) -> int:
        sql = f"SELECT COUNT(*) FROM {table_name(name)} WHERE p = %s"
        row = self.reading(lambda conn: conn.execute(sql, (partition,)).fetchone())
        return int(row[0])

    def _write_rows(self, conn: Any, table: str, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        with conn.cursor() as cur:
            if deletes:
                cur.execute(f"DELETE FROM {table} WHERE k = ANY(%s)", (list(deletes),))
            if upserts:
                cur.executemany(
                    f"INSERT INTO {table} (k, p, g, s, st, v) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (k) DO UPDATE SET p = excluded.p, g = excluded.g, s = excluded.s, "
                    "st = excluded.st, v = excluded.v",
                    upserts,
                )

    def commit_many(self, changes: Sequence[Change]) -> bool:
        """One pipeline: every position move and row write is sent before any answer is
        awaited (a pass of many projectors costs a round trip or two, not one each); a
        position another runner moved rolls all of it back."""
        from psycopg import Rollback

        with self.pool.connection() as conn, conn.transaction():
            with conn.pipeline():
                moves = [
                    conn.execute(
                        f"UPDATE {TRACKING} SET position = %s WHERE name = %s AND position = %s",
                        (change.position, change.name, change.expected),
                    )
                    for change in changes
                ]
                for change in changes:
                    self._write_rows(conn, table_name(change.name), change.upserts, change.deletes)
                    if change.name in self.announced:  # told on commit only
                        keys = [row[0] for row in change.upserts] + list(change.deletes)
                        self._announce(conn, change.name, change.position, keys)
            if any(move.rowcount != 1 for move in moves):
                raise Rollback()
            return True
        return False

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

    def dump(self, name: str) -> list[Row]:
        sql = f"SELECT k, p, g, s, st, v FROM {table_name(name)} ORDER BY k"
        rows = self.reading(lambda conn: conn.execute(sql).fetchall())
        return [Row(*row[:5], bytes(row[5])) for row in rows]

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
                cur.execute(f"DELETE FROM {self.shadow} WHERE k = ANY(%s)", (list(deletes),))
            if upserts:
                with cur.copy(f"COPY {self.shadow} (k, p, g, s, st, v) FROM STDIN") as copy:
                    for row in upserts:
                        copy.write_row(row)

    def get(self, key: str) -> Row | None:
        sql = f"SELECT k, p, g, s, st, v FROM {self.shadow} WHERE k = %s"
        row = self.conn.execute(sql, (key,), prepare=True).fetchone()
        return Row(row[0], row[1], row[2], row[3], row[4], bytes(row[5])) if row else None

    def swap(self, position: int, catch_up: Any) -> int:
        conn, table, shadow, name = self.conn, self.table, self.shadow, self.name
        conn.execute(f"ALTER TABLE {shadow} SET LOGGED")
        with conn.transaction():
            # Holds the live runner off this read model until the swap commits.
            conn.execute(f"SELECT position FROM {TRACKING} WHERE name = %s FOR UPDATE", (name,))
            upserts, deletes, final = catch_up(position)
            self.store._write_rows(conn, shadow, upserts, deletes)
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(f"ALTER TABLE {shadow} RENAME TO {table}")
            conn.execute(f"ALTER INDEX IF EXISTS {shadow}_pkey RENAME TO {table}_pkey")
            conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_ps ON {table} (p, s)")
            conn.execute(
                f"INSERT INTO {TRACKING} (name, position) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                (name, final),
            )
            self.store._announce(conn, name, final, None)  # every copy of the model goes
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

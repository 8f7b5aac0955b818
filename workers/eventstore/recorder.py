"""The PostgreSQL event recorder, with one faster insert.

The library inserts a save's events as an array of a composite row type, which psycopg
dumps in Python text form: about 40 µs an event. This recorder sends four typed arrays
(text, bigint, text, bytea) in binary and unnests them in one ``INSERT … SELECT``: the
same table lock, NOTIFY and RETURNING of notification ids, the same rows, at a fraction
of the cost. Selected with ``APPLICATION_RECORDER_TOPIC`` (see workers/bootstrap.py).

A large save (a ticker pass: hundreds of events) goes through ``insert_mapped``: in
pipeline mode the lock, the NOTIFY and each chunk of rows are sent as soon as they are
ready, so the database inserts one chunk while Python maps the next, instead of waiting
for all of them to be mapped and then for the database.

C19 bounds every wait: ``BoundedPostgresFactory`` validates pooled connections, bounds
the wait for one (and all of a request's waits together) and each statement. The library
retries a failed statement ten times, 0.2 s apart; here a read is tried once more only
when its connection died under it, and an insert whose connection died during COMMIT
asks the database whether it was recorded (rather than inserting again and letting a
command apply twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import ConnectionPool, PostgresApplicationRecorder, PostgresFactory
from eventsourcing.utils import Environment, EnvType
from psycopg.errors import UniqueViolation
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from projections.engine.unavailable import (
    CommitOutcomeUnknown,
    PoolGuard,
    connection_bounds,
    connection_lost,
)
from workers.eventstore.mapping import LeanStores

_Library = PostgresApplicationRecorder
_new = object.__new__
# Events a statement of a streamed insert carries: small enough that the database starts
# early, large enough that a statement's own cost stays a small share.
STREAM_CHUNK = 48


class TypedArrayApplicationRecorder(PostgresApplicationRecorder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.typed_insert_statement = self._on_events(
            "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(%b::{id_type}[], %b::bigint[], %b::text[], %b::bytea[]) "
            "RETURNING notification_id"
        ).as_bytes()
        # The library composes these again for every insert; rendered once, psycopg's
        # cache of converted queries answers for them.
        self.lock_table_statements = [q.as_bytes() for q in self.lock_table_statements]
        self.notify_statement = SQL("NOTIFY {0}").format(Identifier(self.channel_name)).as_bytes()
        self.recorded_statement = self._on_events(
            "SELECT originator_id, originator_version, notification_id, state FROM {schema}.{table} "
            "WHERE (originator_id, originator_version) IN "
            "(SELECT * FROM unnest(%b::{id_type}[], %b::bigint[]))"
        )
        self.between_statement = self._on_events(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {schema}.{table} "
            "WHERE notification_id>=%s AND notification_id <= %s ORDER BY notification_id LIMIT %s"
        ).as_bytes()

    def create_table(self) -> None:
        """The library's, again when a type it creates in a transaction of its own was created
        by another process at the same moment (a unique violation, not the ``DuplicateObject``
        the library expects): the second pass finds the type and goes on."""
        for attempt in range(3):
            try:
                super().create_table()
                return
            except (IntegrityError, UniqueViolation):
                if attempt == 2:
                    raise

    def _create_table(self, curs: Any) -> None:
        """The library's schema, created by one process at a time: two processes starting on a
        fresh database (the API and its projector) would race in ``CREATE TABLE IF NOT
        EXISTS``, which PostgreSQL does not guard (a unique violation on ``pg_type``)."""
        curs.execute("SELECT pg_advisory_xact_lock(hashtext('squadops-event-store-schema'))")
        super()._create_table(curs)

    def _on_events(self, template: str) -> Any:
        """``template`` with the events table (``{schema}.{table}``) and its id type filled in."""
        id_type = "uuid" if self.datastore.originator_id_type == "uuid" else "text"
        return SQL(template).format(  # type: ignore[arg-type]
            schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name), id_type=SQL(id_type)
        )

    # -- reads: once more on a fresh connection, only if the connection died ----------------

    def _read(self, read: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, *args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if not connection_lost(exc):
                raise
        return read(self, *args, **kwargs)

    def select_events(self, *args: Any, **kwargs: Any) -> Any:
        return self._read(_Library.select_events.__wrapped__, *args, **kwargs)  # type: ignore[attr-defined]

    def select_notifications(
        self, start: int | None, limit: int, stop: int | None = None, topics: Sequence[str] = (), *,
        inclusive_of_start: bool = True,
    ) -> Any:
        if start is None or stop is None or topics or not inclusive_of_start:
            return self._read(
                _Library.select_notifications.__wrapped__,  # type: ignore[attr-defined]
                start, limit, stop, topics, inclusive_of_start=inclusive_of_start,
            )
        return self._read(TypedArrayApplicationRecorder._notifications_between, start, stop, limit)

    def _notifications_between(self, start: int, stop: int, limit: int) -> list[Notification]:
        """The library's ``select_notifications(start, limit, stop)``, the same notifications
        made with less work a row (a log reader's pages: a rebuild reads the whole log): rows as
        tuples, and each frozen ``Notification`` filled directly, not field by field."""
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(self.between_statement, (start, stop, limit), prepare=True)
            rows = curs.fetchall()
        notifications = []
        append = notifications.append
        for notification_id, originator_id, originator_version, topic, state in rows:
            notification = _new(Notification)
            notification.__dict__.update(
                id=notification_id, originator_id=originator_id, originator_version=originator_version,
                topic=topic, state=bytes(state),
            )
            append(notification)
        return notifications

    def max_notification_id(self) -> int | None:
        return self._read(_Library.max_notification_id.__wrapped__)  # type: ignore[attr-defined]

    # -- the insert ------------------------------------------------------------------------

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Inserts a save's events; once more if the first try surely recorded nothing."""
        if not stored_events:
            return []
        ids = self._insert(stored_events, once_more=True, **kwargs)
        return ids if ids is not None else self._insert(stored_events, once_more=False, **kwargs)

    def _insert(self, stored_events: Sequence[StoredEvent], *, once_more: bool, **kwargs: Any) -> list[int] | None:
        """The events' notification ids; None if nothing was recorded and trying once more
        is worth it (the connection died, and ``once_more``)."""
        committing = False
        try:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                with conn.transaction():
                    self._insert_stored_events(curs, stored_events, **kwargs)
                    ids = [row["notification_id"] for row in curs.fetchall()]
                    committing = True
                return ids
        except (OperationalError, InterfaceError) as exc:
            if committing:  # COMMIT was sent: it may have been recorded
                found = self._recorded_after(exc, stored_events)
                if found is not None:
                    return found
            elif not connection_lost(exc):
                raise
            if not once_more:
                raise
            return None

    def insert_mapped(
        self, items: Sequence[Any], to_stored: Callable[[Any], StoredEvent], **kwargs: Any
    ) -> tuple[list[StoredEvent], Sequence[int]]:
        """``items`` mapped by ``to_stored`` and inserted in one transaction, chunk by chunk
        as they are mapped: the stored events and their notification ids.

        The same rows, lock, NOTIFY, ids and outcomes as ``insert_events`` of the mapped
        list: a conflict or a payload that cannot be stored records nothing; a connection
        that dies before COMMIT is replaced once; one that dies during COMMIT is asked.
        """
        stored: list[StoredEvent] = []
        if not items:
            return stored, []
        try:
            return stored, self._stream(items, to_stored, stored)
        except _Lost as lost:
            if lost.committing:  # COMMIT was sent: it may have been recorded
                found = self._recorded_after(lost.error, stored)
                if found is not None:
                    return stored, found
            elif not connection_lost(lost.error):
                raise lost.error from None
        stored.extend(map(to_stored, items[len(stored) :]))
        ids = self._insert(stored, once_more=False, **kwargs)
        assert ids is not None  # (with once_more=False it raises rather than answer None)
        return stored, ids

    def _stream(self, items: Sequence[Any], to_stored: Callable[[Any], StoredEvent], stored: list[StoredEvent]) -> list[int]:
        """One pipelined transaction; ``stored`` grows as items are mapped. Connection
        errors come out wrapped, saying whether COMMIT had been sent."""
        failed: BaseException | None = None
        committing = False
        ids: list[int] = []
        stored.extend(map(to_stored, items[:STREAM_CHUNK]))  # before the table lock is taken
        try:
            with self.datastore.get_connection() as conn:
                with conn.pipeline() as pipeline:
                    try:
                        with conn.transaction():
                            with conn.cursor() as curs:
                                self._lock_table(curs)
                                self._notify_channel(curs)
                            cursors = []
                            for start in range(0, len(items), STREAM_CHUNK):
                                if start == len(stored):
                                    stored.extend(map(to_stored, items[start : start + STREAM_CHUNK]))
                                chunk = stored[start : start + STREAM_CHUNK]
                                curs = conn.cursor()
                                cursors.append(curs)
                                curs.execute(self.typed_insert_statement, _columns(chunk), binary=True)
                            # Sync before COMMIT: a conflict is raised as such, here.
                            pipeline.sync()
                            for curs in cursors:
                                ids.extend(row["notification_id"] for row in curs.fetchall())
                                curs.close()
                            committing = True
                    except Exception as exc:
                        failed = exc  # raised after the pipeline is left (no warning from psycopg)
                if failed is not None:
                    raise failed
        except (OperationalError, InterfaceError) as exc:
            raise _Lost(exc, committing) from exc
        return ids

    def _recorded_after(self, lost: Exception, stored_events: Sequence[StoredEvent]) -> list[int] | None:
        try:
            return self._read(TypedArrayApplicationRecorder.recorded, stored_events)
        except (OperationalError, InterfaceError) as exc:
            raise CommitOutcomeUnknown(f"{lost} (and asking afterwards failed: {exc})") from lost

    def recorded(self, stored_events: Sequence[StoredEvent]) -> list[int] | None:
        """The notification ids of these very events if they are in the log; else None.

        A save is one transaction: either all its events are stored, with these states,
        or none is (a version taken by another writer holds another state).
        """
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(
                self.recorded_statement,
                ([e.originator_id for e in stored_events], [e.originator_version for e in stored_events]),
                binary=True,
            )
            rows = {(r["originator_id"], r["originator_version"]): r for r in curs.fetchall()}
        ids = []
        for event in stored_events:
            row = rows.get((event.originator_id, event.originator_version))
            if row is None or bytes(row["state"]) != event.state:
                return None
            ids.append(row["notification_id"])
        return ids

    def _notify_channel(self, curs: Any) -> None:
        curs.execute(self.notify_statement)

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(self.typed_insert_statement, _columns(stored_events), binary=True)


def _columns(stored_events: Sequence[StoredEvent]) -> tuple[list[Any], ...]:
    """The four typed arrays of an insert."""
    return (
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
        [e.topic for e in stored_events],
        [e.state for e in stored_events],
    )


class _Lost(Exception):
    """A streamed insert's connection error, before COMMIT was sent (nothing recorded) or
    after (``committing``: it may have been)."""

    def __init__(self, error: Exception, committing: bool) -> None:
        super().__init__(str(error))
        self.error, self.committing = error, committing


class EventPool(PoolGuard, ConnectionPool):  # type: ignore[misc]
    """The library's pool (it may fetch a password per connection), guarded."""


class BoundedPostgresFactory(LeanStores, PostgresFactory):
    """The library's PostgreSQL factory, with this recorder and every wait bounded (C19).

    The library takes the wait for a pooled connection in whole seconds and sets no
    statement or connect timeout, so its pool (not opened yet) is replaced by the same pool
    with ``POSTGRES_POOL_WAIT_SECONDS``, ``POSTGRES_STATEMENT_TIMEOUT_SECONDS`` and the
    guard's check of each connection before it is handed out (the library's
    ``POSTGRES_PRE_PING``): one killed while idle is never used.
    """

    application_recorder_class = TypedArrayApplicationRecorder
    POOL_WAIT = "POSTGRES_POOL_WAIT_SECONDS"
    STATEMENT_TIMEOUT = "POSTGRES_STATEMENT_TIMEOUT_SECONDS"

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        datastore, library = self.datastore, self.datastore.pool
        statement = float(self.env.get(self.STATEMENT_TIMEOUT) or 0)
        datastore.pool = EventPool(
            get_password_func=library.get_password_func,
            connection_class=library.connection_class,
            kwargs={**(library.kwargs or {}), **connection_bounds(statement)},
            min_size=library.min_size,
            max_size=library.max_size,
            open=False,
            configure=datastore.after_connect_func(),
            timeout=float(self.env.get(self.POOL_WAIT) or library.timeout),
            max_waiting=library.max_waiting,
            max_lifetime=library.max_lifetime,
        )

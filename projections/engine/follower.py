"""The log follower: one reader of the notification log for every worker that follows it.

The projection runner, the live fan-out and the ticker's holdings all follow the event
log from a position of their own. This module is the one place that knows how:

- **Position.** A follower holds the position it has read up to (``seek`` sets it, for
  instance from a stored tracking position; ``next_page`` moves it).
- **Contiguous pages.** A page holds only positions that follow each other, starting
  right after the position asked for.
- **Gap policy.** A position not visible yet may be a transaction still in flight. The
  gap is waited for while an insert may still fill it (the store is asked, and a store
  that cannot tell is assumed to have one in flight), for at most ``gap_timeout`` since
  the gap was first seen; after that it is a rolled-back insert and is accepted, loudly.
  A page that stops before a gap starts the gap's clock, so the wait counts from when
  the gap was first visible, not from when the follower reached it.
- **Wake-up.** ``wake`` is called after every append in this process (the event store's
  listeners); ``listen`` adds PostgreSQL ``LISTEN`` for appends by other processes.
  ``wait`` blocks until either or a timeout; ``subscribe`` lets an asyncio loop be told.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

import msgspec
import structlog

from projections.engine.envelope import Envelope, envelope

log = structlog.get_logger("squadops.follower")

LISTEN_POLL_SECONDS = 0.25


class Positioned(Protocol):
    @property
    def position(self) -> int: ...


T = TypeVar("T", bound=Positioned)


class LogHeader(msgspec.Struct, frozen=True, gc=False):
    """A log entry without its payload: what a reader of versions needs."""

    position: int
    originator_id: str
    version: int


def header(notification: Any) -> LogHeader:
    return LogHeader(notification.id, notification.originator_id, notification.originator_version)


class NotificationSource:
    """Reads the event store's notification log (any eventsourcing ApplicationRecorder).

    Entries are decoded into ``Envelope``s by default, their events read back by the event
    store's mapper; ``decode=header`` skips the payload.
    """

    def __init__(self, event_store: Any, decode: Callable[[Any], Any] | None = None) -> None:
        self.recorder = event_store.recorder
        self.decode = decode or partial(envelope, mapper=event_store.mapper)

    def read(self, start: int, limit: int, stop: int | None = None) -> list[Envelope]:
        notes = self.recorder.select_notifications(start=start, limit=limit, stop=stop)
        decode = self.decode
        return [decode(n) for n in notes]

    def max_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    def insert_in_flight(self) -> bool:
        """Whether an append may still fill a gap in the positions seen.

        Appends take the events table's lock until they commit (PostgreSQL) or are the
        single writer (SQLite), so positions become visible in order and a gap below a
        visible position can only be a rolled-back insert, unless an append is in
        flight right now. PostgreSQL is asked; on SQLite a rolled-back insert leaves no
        gap at all. Any other recorder is assumed to have one in flight.
        """
        from eventsourcing.postgres import PostgresApplicationRecorder
        from eventsourcing.sqlite import SQLiteApplicationRecorder

        if isinstance(self.recorder, SQLiteApplicationRecorder):
            return False
        if not isinstance(self.recorder, PostgresApplicationRecorder):
            return True
        table = self.recorder.events_table_name
        with self.recorder.datastore.get_connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON l.relation = c.oid "
                "WHERE c.relname = %s AND l.mode = 'ExclusiveLock'",
                (table,),
            ).fetchone()
        return bool(row and row["n"])


def contiguous(entries: Sequence[Positioned], after: int) -> int:
    """How many leading entries follow ``after`` without a gap."""
    expected = after + 1
    for count, entry in enumerate(entries):
        if entry.position != expected:
            return count
        expected += 1
    return len(entries)


class LogFollower(Generic[T]):
    """Follows the log from its position: contiguous pages, the gap policy, wake-ups.

    Reading is meant for one thread at a time; ``wake`` may be called from any thread.
    """

    def __init__(
        self,
        source: Any,
        *,
        position: int = 0,
        page_size: int = 2000,
        gap_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "log",
    ) -> None:
        self.source = source
        self.position = position
        self.page_size = page_size
        self.gap_timeout = gap_timeout
        self.clock = clock
        self.name = name
        self.gaps_accepted = 0
        self._gap_seen: dict[int, float] = {}
        self._woken = threading.Event()
        self._subscribers: list[Callable[[], None]] = []
        self._unheard = threading.Event()  # set: no listener should run
        self._unheard.set()
        self._listener: threading.Thread | None = None

    # -- position and pages -------------------------------------------------------------

    def seek(self, position: int) -> None:
        """Follows on from ``position`` (a stored tracking position, say)."""
        self.position = position

    def head(self) -> int:
        """The highest position in the log now."""
        return self.source.max_position()

    def read(self, after: int | None = None, *, stop: int | None = None) -> list[T]:
        """The contiguous page after ``after`` (the follower's position by default).

        Does not move the position: a caller that commits elsewhere (the runner, the
        fan-out) moves it once the page is done. An empty page: nothing new, or a gap
        that is still waited for.
        """
        start = self.position if after is None else after
        if stop is None:
            entries = self.source.read(start + 1, self.page_size)
        else:
            entries = self.source.read(start + 1, self.page_size, stop)
        if not entries:
            return []
        return entries[: self._usable(entries, start)]

    def next_page(self, *, stop: int | None = None) -> list[T]:
        """``read`` from the follower's position, moving it past the page."""
        entries = self.read(stop=stop)
        if entries:
            self.position = entries[-1].position
        return entries

    def _usable(self, entries: Sequence[T], start: int) -> int:
        count = contiguous(entries, start)
        if count == len(entries):
            return count
        gap = (entries[count - 1].position if count else start) + 1
        first_seen = self._gap_seen.setdefault(gap, self.clock())
        if count:
            return count
        if self.clock() - first_seen < self.gap_timeout and self._may_fill(gap):
            return 0
        # The gap outlived any transaction: a rolled-back insert. Accept it, loudly.
        log.warning("log_gap_accepted", follower=self.name, position=gap, next_position=entries[0].position)
        self.gaps_accepted += 1
        self._gap_seen.pop(gap, None)
        return contiguous(entries, entries[0].position - 1)

    def _may_fill(self, gap: int) -> bool:
        probe = getattr(self.source, "insert_in_flight", None)
        if probe is None:
            return True
        try:
            return bool(probe())
        except Exception as exc:  # cannot tell: wait for the timeout, as without a probe
            log.warning("log_gap_probe_failed", follower=self.name, position=gap, error=repr(exc))
            return True

    # -- wake-up --------------------------------------------------------------------------

    def wake(self, _position: int | None = None) -> None:
        """Thread-safe: something was appended (or the follower's owner wants a pass)."""
        self._woken.set()
        for subscriber in list(self._subscribers):
            subscriber()

    def wait(self, timeout: float) -> bool:
        """Blocks until a wake-up or ``timeout``; answers whether it was woken."""
        woken = self._woken.wait(timeout)
        self._woken.clear()
        return woken

    def subscribe(self, subscriber: Callable[[], None]) -> Callable[[], None]:
        """Calls ``subscriber`` (thread-safe, quick) on every wake-up; answers how to stop."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(subscriber)

        return unsubscribe

    def listen(self, url: str, channel: str) -> None:
        """PostgreSQL ``LISTEN`` on ``channel``: an append by any process wakes at once."""
        if not url or not channel or self._listener is not None:
            return
        self._unheard.clear()
        self._listener = threading.Thread(
            target=self._listen, args=(url, channel), name=f"{self.name}-listen", daemon=True
        )
        self._listener.start()

    def stop_listening(self, timeout: float = 5.0) -> None:
        self._unheard.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.join(timeout=timeout)

    def _listen(self, url: str, channel: str) -> None:
        import psycopg

        while not self._unheard.is_set():
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    while not self._unheard.is_set():
                        # A short timeout so stop_listening returns promptly; notifies
                        # arriving between calls wait in the connection's backlog.
                        for _ in conn.notifies(timeout=LISTEN_POLL_SECONDS, stop_after=1):
                            self.wake()
            except Exception as exc:
                log.warning("log_listen_failed", follower=self.name, error=repr(exc))
                self._unheard.wait(1.0)


def _followers(name: str) -> Any:
    """The attribute ``name`` of the worker's follower, read and set through the worker."""
    return property(lambda self: getattr(self.follower, name), lambda self, value: setattr(self.follower, name, value))


class FollowsLog:
    """What a worker reading the log through its ``follower`` (the projection runner, the
    live fan-out) passes on to it: the page size, the gap timeout and the wake-up."""

    follower: LogFollower[Any]
    page_size = _followers("page_size")
    gap_timeout = _followers("gap_timeout")

    def wake(self, _position: int | None = None) -> None:
        """Thread-safe: an append happened (called by the application after each save)."""
        self.follower.wake()

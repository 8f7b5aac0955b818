"""Copies of read-model documents in a reader's memory, kept exactly current by the
projectors' announcements (``projections.engine.announce``), never by time.

- **Following.** One thread holds a PostgreSQL connection that ``LISTEN``s on the
  announcement channel. Once it listens, it reads the read models' positions: every
  commit after that is announced to it, in commit order. Each announcement drops the
  copies of the keys it names (all of a model's for a swap), and only then moves the
  model's heard position.
- **Current.** A copy is in memory only while no announcement heard since it was read
  named its key; so it holds what the store held at the heard position or later. A
  caller asks for a copy at least at a position (``X-Squadops-Min-Position``, or a
  command this process answered, ``expect``): below that, or while not listening, there
  is no copy and the caller reads the store.
- **Filling.** A caller that read the store keeps what it read (``keep``) only if no
  announcement was heard, and the channel was not lost, since it started reading
  (``mark``): a copy never holds what a commit already replaced.
- **Lost.** When the connection is lost (or an announcement cannot be read), every copy
  is dropped at once, and none is kept until the channel listens again.
- **Bounded.** At most ``max_entries`` documents and ``max_bytes`` bytes (derived
  answers included); the least recently used go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

import structlog

from projections.engine import announce
from projections.engine.store import TRACKING

log = structlog.get_logger("squadops.copies")

POLL_SECONDS = 0.25  # how soon ``stop`` is noticed; notifications never wait on it
RETRY_SECONDS = 1.0
APPLICATION = "squadops-read-copies"  # the listening connection, as PostgreSQL shows it
# A connection that dies silently (no reset) is noticed within about 10 s: the kernel's
# keepalives and an unacknowledged send give up; a closed one at once.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 2, "tcp_user_timeout": 10_000}


class NotInMemory(Exception):
    """A reader that may not do I/O found no current copy: it reads the store instead."""


class Copy:
    """One document as the store held it, and answers derived from it (say, sliced)."""

    __slots__ = ("body", "derived", "size")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.derived: dict[object, bytes] = {}
        self.size = len(body)


class ReadCopies:
    """Copies of the documents of ``names`` (see the module's docstring). Thread-safe."""

    def __init__(self, names: Iterable[str], *, max_bytes: int = 64 << 20, max_entries: int = 2048) -> None:
        self.names = frozenset(names)
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._lock = threading.RLock()  # ``wait`` predicates may ask it again
        self._copies: OrderedDict[tuple[str, str], Copy] = OrderedDict()
        self._bytes = 0
        self._heard: dict[str, int] = {}
        self._floor = 0  # the newest position a command of this process answered
        self._epoch = 0  # moves whenever a copy may have stopped being current
        self._listening = False
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading -----------------------------------------------------------------------------

    def get(self, name: str, key: str, at_least: int = 0) -> Copy | None:
        """The copy of ``key``, current at ``at_least`` or later; None: read the store."""
        with self._lock:
            if not self._listening or self._heard.get(name, 0) < max(at_least, self._floor):
                return None
            found = self._copies.get((name, key))
            if found is not None:
                self._copies.move_to_end((name, key))
            return found

    def derive(self, name: str, key: str, copy: Copy, variant: object, body: bytes) -> None:
        """Keeps an answer derived from ``copy`` beside it (while it is still the copy)."""
        with self._lock:
            if self._copies.get((name, key)) is copy and variant not in copy.derived:
                copy.derived[variant] = body
                copy.size += len(body)
                self._bytes += len(body)
                self._bound()

    def mark(self) -> int | None:
        """Taken before reading the store for ``keep``; None: nothing may be kept now."""
        with self._lock:
            return self._epoch if self._listening else None

    def keep(self, mark: int | None, docs: Mapping[tuple[str, str], bytes]) -> bool:
        """Keeps documents read from the store since ``mark``, unless one may be stale."""
        with self._lock:
            if mark is None or mark != self._epoch or not self._listening:
                return False
            for (name, key), body in docs.items():
                if name in self.names:
                    self._drop(name, key)
                    copy = self._copies[(name, key)] = Copy(body)
                    self._bytes += copy.size
            self._bound()
            return True

    def expect(self, position: int) -> None:
        """A command of this process answered ``position``: no copy older serves a read."""
        with self._lock:
            self._floor = max(self._floor, position)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"copies": len(self._copies), "bytes": self._bytes, "listening": int(self._listening)}

    # -- being told ---------------------------------------------------------------------------

    def opened(self, positions: Mapping[str, int]) -> None:
        """The channel listens; ``positions`` were read after it did."""
        with self._changed:
            self._clear()
            self._heard = {name: positions.get(name, 0) for name in self.names}
            self._listening = True
            self._changed.notify_all()

    def heard(self, payload: str) -> None:
        """One announcement: its keys' copies go, then its position counts."""
        entry = announce.read(payload)
        with self._changed:
            if entry is None:
                log.warning("read_copies_unreadable_announcement", payload=payload[:200])
                self._clear()
                self._changed.notify_all()
                return
            if entry.name not in self.names:
                return
            if entry.keys is None:
                for name, key in [k for k in self._copies if k[0] == entry.name]:
                    self._drop(name, key)
                self._epoch += 1
            elif entry.keys:
                for key in entry.keys:
                    self._drop(entry.name, key)
                self._epoch += 1
            if entry.position > self._heard.get(entry.name, 0):
                self._heard[entry.name] = entry.position
            self._changed.notify_all()

    def lost(self) -> None:
        """The channel is gone: every copy goes, and none is kept until it listens again."""
        with self._changed:
            self._listening = False
            self._clear()
            self._changed.notify_all()

    def wait(self, predicate: Callable[[ReadCopies], bool], timeout: float) -> bool:
        """Blocks until ``predicate(self)`` holds (checked after each change) or ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    @property
    def listening(self) -> bool:
        return self._listening

    def heard_position(self, name: str) -> int:
        with self._lock:
            return self._heard.get(name, 0)

    # -- the listening thread -----------------------------------------------------------------

    def follow(self, url: str) -> None:
        """Starts listening on the database at ``url`` (a thread; ``stop`` ends it)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._follow, args=(url,), name="read-copies", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=timeout)
        self.lost()

    def _follow(self, url: str) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(url, autocommit=True, application_name=APPLICATION, connect_timeout=2, **KEEPALIVES) as conn:
                    conn.execute(f'LISTEN "{announce.CHANNEL}"')
                    rows = conn.execute(f"SELECT name, position FROM {TRACKING}").fetchall()
                    self.opened({name: int(position) for name, position in rows})
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=POLL_SECONDS):
                            self.heard(note.payload)
            except Exception as exc:
                log.warning("read_copies_channel_lost", error=repr(exc))
            self.lost()
            self._stop.wait(RETRY_SECONDS)

    # -- under the lock -------------------------------------------------------------------------

    def _drop(self, name: str, key: str) -> None:
        copy = self._copies.pop((name, key), None)
        if copy is not None:
            self._bytes -= copy.size

    def _clear(self) -> None:
        self._copies.clear()
        self._bytes = 0
        self._epoch += 1

    def _bound(self) -> None:
        while self._copies and (len(self._copies) > self.max_entries or self._bytes > self.max_bytes):
            _, copy = self._copies.popitem(last=False)
            self._bytes -= copy.size

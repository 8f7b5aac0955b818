"""The event store every area's commands save through: one eventsourcing Application.

It holds only what the areas share: saving (with the in-process wake-up of log followers),
loading, log positions and optimistic concurrency retries. The commands themselves live
in each area (``domain/<area>/commands``) and receive this store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, RecordConflictError, Recording

from domain.shared.errors import Conflict
from domain.shared.retry import conflict_pause

T = TypeVar("T")

# Each lost race means another writer's save of the same aggregate succeeded, so a valid
# command is refused only when more than this many saves land on its aggregate while it
# retries (a jittered pause between attempts, at most ~50 ms each): a livelock, not load.
CONFLICT_ATTEMPTS = 32


class EventStore(Application[str]):
    """Aggregates in and out of the event log; every state change is saved here."""

    # The library names the tables and the settings' prefix after the application.
    name = "squadops"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env=env)
        self._listeners: list[Callable[[int], None]] = []
        self._listeners_lock = threading.Lock()
        self._saved = threading.local()

    # -- wake-up -------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Called with the highest notification id after every successful save."""
        with self._listeners_lock:
            self._listeners.append(listener)

    def _notify(self, recordings: list[Recording[str]]) -> None:
        """The library's hook after a save: wakes the log's followers in this process."""
        if not recordings:
            return
        top = max(r.notification.id for r in recordings)
        self._saved.position = top
        for listener in list(self._listeners):
            listener(top)

    # -- loading -------------------------------------------------------------------------

    def get_or_none(self, aggregate_id: str) -> Any:
        try:
            return self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None

    def last_saved_position(self) -> int:
        """The log position of this thread's last save (read-your-writes)."""
        return getattr(self._saved, "position", 0)

    def max_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    # -- optimistic concurrency -----------------------------------------------------------

    def retrying(self, command: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
        """Runs ``command`` (load, decide, save) again after a concurrent write.

        Between attempts it pauses a jittered, growing moment, so concurrent commands on one
        aggregate (several steps each, e.g. gate runs of one thread) interleave instead of
        colliding again. A command that still conflicts after ``attempts`` answers 409; no
        event is lost, because a failed save stores nothing and the command re-reads the
        winner's events.
        """
        for conflicts in range(1, attempts):
            try:
                return command()
            except (IntegrityError, RecordConflictError):
                time.sleep(conflict_pause(conflicts))
        try:
            return command()
        except (IntegrityError, RecordConflictError):
            raise Conflict(
                "The resource changed concurrently too many times; try again.",
                code="concurrent_modification",
            ) from None

"""What the ticker holds between passes: its copies of the aggregates it ticks, and the
ticks that changed nothing since each run's last recorded tick."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from domain.shared.errors import NotFound
from domain.shared.event_store import EventStore
from domain.shared.ports import LogFollower

ENDED_KEPT = 10_000


@dataclass(frozen=True)
class QuietStretch:
    """Ticks of one run that changed nothing, after its recorded tick ``after_tick``.

    A quiet tick appends nothing, so only the ticker that ticked it knows of it; the
    next tick that changes something carries the count (``quiet_ticks`` in its report)
    and takes the tick number after them. A restarted ticker starts counting again.
    """

    after_tick: int
    count: int
    last_at: str


class Holdings:
    """The ticker's own copies of the aggregates it ticks, kept fresh from the log.

    Loading every run and session from the repository on every tick costs a query and
    a deep copy each. The ticker instead keeps its copies and, once per pass, follows the
    event log (a ``LogFollower`` port: contiguous pages under the gap policy) since its
    last position: an aggregate that someone else changed is dropped and loaded again. A
    copy it missed can only make a save fail on the version check, and a failed save
    drops every copy it touched.
    """

    def __init__(self, store: EventStore, log: LogFollower) -> None:
        self.store = store
        self.log = log
        self.aggregates: dict[str, Any] = {}
        self.batch: dict[str, Any] = {}
        self.quiet: dict[str, QuietStretch] = {}
        # Runs seen ended (an ended run never runs again): a tick of one is skipped
        # without loading it. The oldest are forgotten past ENDED_KEPT (then loaded once more).
        self.ended: dict[str, None] = {}
        self.lock = threading.Lock()

    @property
    def position(self) -> int:
        """How far the log has been read for changes to the held copies."""
        return self.log.position

    def refresh(self) -> None:
        top = self.log.head()
        if not self.aggregates:
            self.log.seek(top)
            return
        while self.log.position < top:
            page = self.log.next_page(stop=top)
            if not page:  # a gap still waited for: the next pass reads on
                break
            for entry in page:
                held = self.aggregates.get(entry.originator_id)
                if held is not None and held.version < entry.version:
                    del self.aggregates[entry.originator_id]

    def skip_own(self, recordings: Sequence[Any]) -> None:
        """Our own save right after what we have read: nothing in it to look at."""
        ids = sorted(r.notification.id for r in recordings)
        if ids and ids[0] == self.log.position + 1 and ids[-1] - ids[0] == len(ids) - 1:
            self.log.seek(ids[-1])

    def get(self, aggregate_id: str) -> Any:
        """The copy this pass works on (one object per aggregate within a pass)."""
        in_batch = self.batch.get(aggregate_id)
        if in_batch is not None:
            return in_batch
        held = self.aggregates.get(aggregate_id)
        # Pending events on a held copy are leftovers of a failed save: load afresh.
        if held is None or held._pending_events:
            held = self.store.get_or_none(aggregate_id)
            if held is None:
                raise NotFound(f"No aggregate {aggregate_id}.", code="not_found")
            self.aggregates[aggregate_id] = held
        self.batch[aggregate_id] = held
        return held

    def add_new(self, aggregate: Any) -> None:
        """A new aggregate created in this pass (not saved yet)."""
        self.batch[aggregate.id] = aggregate

    def get_or_none(self, aggregate_id: str) -> Any:
        """``get``, answering None for an aggregate that does not exist (a loader)."""
        try:
            return self.get(aggregate_id)
        except NotFound:
            return None

    def adopt(self, aggregates: Iterable[Any]) -> None:
        """Keeps the saved copies (sessions opened this tick included)."""
        for aggregate in aggregates:
            self.aggregates[aggregate.id] = aggregate

    def note_ended(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            self.ended[run_id] = None
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]

    def drop(self, aggregates: Iterable[Any]) -> None:
        for aggregate in aggregates:
            self.aggregates.pop(aggregate.id, None)

    # -- quiet ticks --------------------------------------------------------------------

    def quiet_since(self, run: Any) -> QuietStretch | None:
        """The quiet stretch after the run's last recorded tick, if this ticker saw one.

        A stretch stays valid while the run's tick stays where it was (other commands on
        the run do not end it); once a tick is recorded it is stale and ignored.
        """
        stretch = self.quiet.get(run.id)
        return stretch if stretch is not None and stretch.after_tick == run.tick else None

    def note_quiet(self, run: Any, at: str) -> None:
        """One more tick of ``run`` that changed nothing."""
        stretch = self.quiet_since(run)
        self.quiet[run.id] = QuietStretch(run.tick, (stretch.count if stretch else 0) + 1, at)

    def forget_quiet(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            self.quiet.pop(run_id, None)

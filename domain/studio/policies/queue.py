"""Queue policy for ``pendingRunExecution``: first-in-first-out by ``requested_at``.

Running runs keep their execution slots; free slots go to scheduled runs in order of the
time their execution was first requested, so newer follow-up kicks never starve older
scheduled runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SCHEDULED = "scheduled"
RUNNING = "running"


@dataclass(frozen=True, order=True)
class QueueEntry:
    requested_at: str
    tenant: str
    run_id: str
    status: str


def fifo(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    return sorted(entries, key=lambda e: (e.requested_at, e.tenant, e.run_id))


def pick_runs(entries: Iterable[QueueEntry], capacity: int) -> tuple[list[QueueEntry], list[QueueEntry]]:
    """(runs to tick, scheduled runs to start) for one pass of the ticker."""
    ordered = fifo(entries)
    running = [e for e in ordered if e.status == RUNNING][: max(capacity, 0)]
    free = max(capacity - len(running), 0)
    to_start = [e for e in ordered if e.status == SCHEDULED][:free]
    return running, to_start

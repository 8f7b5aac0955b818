"""The run ticker: starts scheduled runs in FIFO order and ticks running ones.

Each pass reads ``pendingRunExecution`` (the queue read model), lets the queue policy pick
what to start and what to tick within capacity, and advances them all in one save.
Several tickers may run at once: optimistic concurrency keeps them from double-ticking.
A tick that changes nothing appends nothing (``domain.studio.commands.ticks``); the ticker's
holdings remember it, so a quiet run is still ticked once per interval, not once per check.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import structlog

from domain.shared.clock import iso
from domain.shared.ports import ExecutionPlane
from domain.studio.commands.ticks import TickCommands, TickOutcome
from domain.studio.policies.queue import QueueEntry, pick_runs
from projections.engine.store import DocStore
from workers.passes import PassThread

log = structlog.get_logger("squadops.ticker")
_decode = msgspec.json.Decoder(dict).decode


def queue_entries(store: DocStore, limit: int = 10_000) -> list[QueueEntry]:
    rows = store.scan("runs", partition="queue", limit=limit)
    entries = []
    for row in rows:
        doc = _decode(row.body)
        entries.append(QueueEntry(doc["requested_at"], doc["tenant"], doc["run_id"], doc["status"]))
    return entries


class Ticker(PassThread):
    """Drives runs through an execution plane, about once per ``tick_seconds`` (C13)."""

    thread_name, event = "ticker", "tick"

    def __init__(
        self,
        ticks: TickCommands,
        store: DocStore,
        plane: ExecutionPlane,
        *,
        tick_seconds: float = 1.0,
        capacity: int = 64,
        policies: Sequence[Any] = (),
    ) -> None:
        self.ticks = ticks
        self.store = store
        self.plane = plane
        self.tick_seconds = tick_seconds
        self.capacity = capacity
        self.policies = list(policies)
        self.passes = 0
        self.totals = TickOutcome()
        super().__init__()

    def run_once(self) -> TickOutcome:
        running, to_start = pick_runs(queue_entries(self.store), self.capacity)
        if not running and not to_start:
            self._after_pass()
            return TickOutcome()
        # A run ticked less than an interval ago (by this or another ticker) waits.
        fresh_after = iso(datetime.now(UTC) - timedelta(seconds=self.tick_seconds * 0.95))
        outcome = self.ticks.tick_runs(
            self.plane,
            tick=[(e.tenant, e.run_id) for e in running],
            start=[(e.tenant, e.run_id) for e in to_start],
            policies=self.policies,
            fresh_after=fresh_after,
        )
        self._after_pass()
        self.passes += 1
        self.totals.add(outcome)
        if outcome.runs_started or outcome.runs_completed or outcome.conflicts:
            log.info(
                "tick_pass",
                ticked=outcome.runs_ticked,
                started=outcome.runs_started,
                completed=outcome.runs_completed,
                events=outcome.events,
                conflicts=outcome.conflicts,
            )
        return outcome

    def _after_pass(self) -> None:
        """A plane that owns processes (the local one) tidies up after the runs that ended."""
        after = getattr(self.plane, "after_pass", None)
        if after is not None:
            after()

    def pause(self, result: Any, started: float) -> float:
        """The queue is checked a few times per tick, so a scheduled run starts promptly."""
        check = max(min(self.tick_seconds, 0.25), 0.005)
        return max(check - (time.monotonic() - started), 0.0)

"""The run ticker: starts scheduled runs in FIFO order and ticks running ones.

Each pass reads ``pendingRunExecution`` (the queue read model), lets the queue policy pick
what to start and what to tick within capacity, and advances them all in one save.
Several tickers may run at once: optimistic concurrency keeps them from double-ticking.
A tick that changes nothing appends nothing (``domain.studio.commands.ticks``); the ticker's
holdings remember it, so a quiet run is still ticked once per interval, not once per check.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import structlog

from domain.shared.clock import iso
from domain.shared.ports import ExecutionPlane
from domain.shared.retry import backoff
from domain.studio.commands.ticks import TickCommands, TickOutcome
from domain.studio.policies.queue import QueueEntry, pick_runs
from projections.engine.store import DocStore

log = structlog.get_logger("squadops.ticker")
_decode = msgspec.json.Decoder(dict).decode


def queue_entries(store: DocStore, limit: int = 10_000) -> list[QueueEntry]:
    rows = store.scan("runs", partition="queue", limit=limit)
    entries = []
    for row in rows:
        doc = _decode(row.body)
        entries.append(QueueEntry(doc["requested_at"], doc["tenant"], doc["run_id"], doc["status"]))
    return entries


class Ticker:
    """Drives runs through an execution plane, about once per ``tick_seconds`` (C13)."""

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
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

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

    def wake(self, _position: int | None = None) -> None:
        self._wake.set()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ticker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        # Check the queue a few times per tick so a scheduled run starts promptly.
        check = max(min(self.tick_seconds, 0.25), 0.005)
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.run_once()
            except Exception as exc:  # the database went away: back off, resume by itself
                failures += 1
                delay = backoff(failures)
                log.warning("tick_pass_failed", error=repr(exc), failures=failures, retry_in=delay)
                self._stop.wait(delay)
                continue
            if failures:
                log.info("tick_resumed", failures=failures)
                failures = 0
            elapsed = time.monotonic() - started
            self._wake.wait(max(check - elapsed, 0.0))
            self._wake.clear()

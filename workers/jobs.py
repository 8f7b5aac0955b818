"""The job runner worker (``squadops worker jobs``; in-process under ``squadops serve``).

Each pass reads the due jobs from the jobs read model's queue, offers them as claims and
runs one step of each job it claims (``JobCommands.execute``): side effects (a connector
read, a UDP datagram, …) happen only here, and each is recorded as the job's event.
Several runners may run at once, in one process or many: the claims split the work, the
job's optimistic concurrency makes sure one step is recorded once.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from domain.jobs.commands import JobCommands
from domain.jobs.job import job_key
from domain.shared.clock import utc_now_iso
from domain.shared.retry import backoff
from projections.engine.store import DocStore
from projections.jobs.jobs import QUEUE_PARTITION
from workers.job_claims import JobClaims
from workers.passes import PassThread

log = structlog.get_logger("squadops.jobs")


class _Due(msgspec.Struct):
    tenant: str
    job_id: str
    due_at: str


_due = msgspec.json.Decoder(_Due).decode


class JobRunner(PassThread):
    """Runs due jobs' steps, ``batch`` candidates per pass, every ``poll_seconds``."""

    thread_name, event, join_seconds = "job-runner", "job", 30.0

    def __init__(
        self,
        jobs: JobCommands,
        store: DocStore,
        claims: JobClaims,
        *,
        poll_seconds: float = 0.25,
        lease_seconds: float = 300.0,
        batch: int = 20,
        clock: Callable[[], str] = utc_now_iso,
    ) -> None:
        self.jobs = jobs
        self.store = store
        self.claims = claims
        self.poll_seconds = poll_seconds
        self.lease_seconds = lease_seconds
        self.batch = batch
        self.clock = clock
        self.runner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.outcomes: dict[str, int] = {}
        super().__init__()

    def due(self) -> list[_Due]:
        """Jobs due now, earliest first (as the read model has them)."""
        rows = self.store.scan("jobs", partition=QUEUE_PARTITION, before=f"{self.clock()}|~", limit=self.batch)
        return [_due(row.body) for row in rows]

    def run_once(self) -> int:
        """One pass; answers how many steps it ran."""
        due = self.due()
        if not due:  # nothing to claim: no write at all (SQLite has one writer)
            return 0
        keys = {job_key(d.tenant, d.job_id): d for d in due}
        self.claims.offer([(key, d.due_at) for key, d in keys.items()])
        ran = 0
        while not self._stop.is_set():
            key = self.claims.claim(list(keys), self.runner_id, self.lease_seconds)
            if key is None:
                break
            job = keys.pop(key)
            try:
                outcome = self.jobs.execute(job.tenant, job.job_id, self.runner_id)
            finally:
                self.claims.release(key, self.runner_id)
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if outcome not in ("not_due", "ended", "missing", "taken"):
                ran += 1
                log.info("job_step", tenant=job.tenant, job_id=job.job_id, outcome=outcome)
        return ran

    # -- thread ------------------------------------------------------------------------------

    def pause(self, result: Any, started: float) -> float:
        return 0.0 if result else self.poll_seconds  # more may be due right away (a step that waits 0 s)

    def retry_in(self, failures: int) -> float:
        return backoff(failures, base=self.poll_seconds, cap=10.0)

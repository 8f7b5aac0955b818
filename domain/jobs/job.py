"""The Job aggregate: one enqueued piece of background work, from queued to its end.

``queued`` -> ``running`` -> ``succeeded`` | ``failed``. A failed attempt with attempts
left goes back to ``queued`` until its retry time (bounded backoff). A running job may
wait between steps (``Progressed``: an effect outside the service was taken and the next
step is due later); a runner that vanished mid-attempt is noticed when its lease expires,
and the next claimer starts a new attempt.

Every method checks first, then records; the recording methods only assign, so a replay
rebuilds the same job without touching anything outside it.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.jobs.events import (
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRetried,
    JobStarted,
    JobSucceeded,
)
from domain.shared.base import Aggregate
from domain.shared.errors import Conflict

QUEUED = "queued"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED)
ENDED = frozenset({SUCCEEDED, FAILED})

ACCESS_SYNC = "access_sync"
WIZARD_TRY = "wizard_try"
NODE_POWER_SLEEP = "node_power_sleep"
NODE_POWER_WAKE = "node_power_wake"
JOB_TYPES = (ACCESS_SYNC, WIZARD_TRY, NODE_POWER_SLEEP, NODE_POWER_WAKE)


def job_key(tenant: str, job_id: str) -> str:
    return f"job:{tenant}:{job_id}"


class JobNotClaimable(Conflict):
    code = "job_not_claimable"


class Job(Aggregate):
    """A job of one tenant; ``payload`` is its request as the client sent it (defaults filled)."""

    @staticmethod
    def create_id(tenant: str, job_id: str) -> str:
        return job_key(tenant, job_id)

    @event(JobQueued)
    def __init__(
        self,
        *,
        tenant: str,
        job_id: str,
        job_type: str,
        provider_kind: str,
        proposal_id: str | None,
        payload: dict[str, Any],
        idempotency_key: str,
        fingerprint: str,
        requested_by: str,
        queued_at: str,
        max_attempts: int,
    ) -> None:
        self.tenant = tenant
        self.job_id = job_id
        self.job_type = job_type
        self.provider_kind = provider_kind
        self.proposal_id = proposal_id
        self.payload = payload
        self.idempotency_key = idempotency_key
        self.fingerprint = fingerprint
        self.requested_by = requested_by
        self.created_at = queued_at
        self.updated_at = queued_at
        self.max_attempts = max_attempts
        self.status = QUEUED
        self.attempt = 0
        self.runner_id = ""
        self.due_at = queued_at  # when a runner should next look at this job
        self.waiting = False  # running, between two steps (not a lost runner)
        self.phase = ""
        self.phase_detail: dict[str, Any] = {}
        self.result: dict[str, Any] | None = None
        self.error_message: str | None = None

    # -- claims -----------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def claimable(self, at: str) -> bool:
        """Whether a runner may take the job at ``at``: it is due and not ended."""
        return not self.ended and self.due_at <= at

    def lost(self, at: str) -> bool:
        """A running attempt whose runner's lease ran out without a word."""
        return self.status == RUNNING and not self.waiting and self.due_at <= at

    def next_attempt(self, at: str) -> int:
        """The attempt a claim at ``at`` would run (a resumed wait keeps its attempt)."""
        if self.status == RUNNING and self.waiting:
            return self.attempt
        return self.attempt + 1

    def start(self, *, runner_id: str, at: str, lease_until: str) -> None:
        if not self.claimable(at):
            raise JobNotClaimable(f"Job {self.job_id} is {self.status}, next due at {self.due_at}.")
        attempt = self.next_attempt(at)
        if attempt > self.max_attempts:
            raise JobNotClaimable(f"Job {self.job_id} has used its {self.max_attempts} attempts.")
        self._started(attempt=attempt, runner_id=runner_id, at=at, lease_until=lease_until)

    @event(JobStarted)
    def _started(self, attempt: int, runner_id: str, at: str, lease_until: str) -> None:
        if attempt != self.attempt:  # a new attempt begins at its first step
            self.phase = ""
            self.phase_detail = {}
        self.status = RUNNING
        self.attempt = attempt
        self.runner_id = runner_id
        self.due_at = lease_until
        self.waiting = False
        self.updated_at = max(self.updated_at, at)

    # -- steps and ends ---------------------------------------------------------------------

    def _require_running(self) -> None:
        if self.status != RUNNING:
            raise Conflict(f"Job {self.job_id} is {self.status}, not running.")

    def progress(self, *, phase: str, detail: dict[str, Any], at: str, due_at: str) -> None:
        self._require_running()
        self._progressed(phase=phase, detail=detail, at=at, due_at=due_at)

    @event(JobProgressed)
    def _progressed(self, phase: str, detail: dict[str, Any], at: str, due_at: str) -> None:
        self.phase = phase
        self.phase_detail = detail
        self.due_at = due_at
        self.waiting = True
        self.updated_at = max(self.updated_at, at)

    @property
    def attempts_left(self) -> bool:
        return self.attempt < self.max_attempts

    def retry(self, *, error_message: str, at: str, retry_at: str) -> None:
        if self.status not in (RUNNING, QUEUED) or not self.attempts_left:
            raise Conflict(f"Job {self.job_id} cannot be retried ({self.status}, attempt {self.attempt}).")
        self._retried(attempt=self.attempt, error_message=error_message, at=at, retry_at=retry_at)

    @event(JobRetried)
    def _retried(self, attempt: int, error_message: str, at: str, retry_at: str) -> None:
        self.status = QUEUED
        self.due_at = retry_at
        self.waiting = False
        self.phase = ""
        self.phase_detail = {}
        self.error_message = error_message
        self.updated_at = max(self.updated_at, at)

    def succeed(self, *, result: dict[str, Any], at: str) -> None:
        self._require_running()
        self._succeeded(result=result, at=at)

    @event(JobSucceeded)
    def _succeeded(self, result: dict[str, Any], at: str) -> None:
        self.status = SUCCEEDED
        self.result = result
        self.error_message = None
        self.waiting = False
        self.updated_at = max(self.updated_at, at)

    def fail(self, *, error_message: str, at: str, result: dict[str, Any] | None = None) -> None:
        if self.ended:
            raise Conflict(f"Job {self.job_id} has already ended ({self.status}).")
        self._failed(attempt=self.attempt, error_message=error_message, result=result, at=at)

    @event(JobFailed)
    def _failed(self, attempt: int, error_message: str, result: dict[str, Any] | None, at: str) -> None:
        self.status = FAILED
        self.error_message = error_message
        self.result = result
        self.waiting = False
        self.updated_at = max(self.updated_at, at)

"""Job commands: enqueue (idempotent, C18), run a claimed job's next step, link identities."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError

from domain.jobs.access_sync import run_access_sync
from domain.jobs.idempotency import JobKey, job_key_id
from domain.jobs.identity import IdentityLink, LinkFacts, identity_key
from domain.jobs.job import (
    ACCESS_SYNC,
    NODE_POWER_SLEEP,
    NODE_POWER_WAKE,
    RUNNING,
    WIZARD_TRY,
    Job,
    job_key,
)
from domain.jobs.node_power import run_node_power
from domain.jobs.outcomes import JobContext, JobFailure, Step, Wait
from domain.jobs.policies import fingerprint, retry_at
from domain.jobs.ports import Connectors, PowerDevice
from domain.jobs.wizard import run_wizard_try
from domain.shared.clock import shift
from domain.shared.errors import Conflict, NotFound
from domain.shared.event_store import EventStore
from domain.shared.ids import is_valid_id, new_id

# The job types and the step that runs each (a step answers Done or Wait, or raises JobFailure).
STEPS: dict[str, Step] = {
    ACCESS_SYNC: run_access_sync,
    WIZARD_TRY: run_wizard_try,
    NODE_POWER_SLEEP: run_node_power,
    NODE_POWER_WAKE: run_node_power,
}

_CONFLICTS = (IntegrityError, RecordConflictError)
# How often a step runs again on fresh copies when a record it read changed under it.
_STEP_ATTEMPTS = 8


class IdempotencyKeyReused(Conflict):
    code = "idempotency_key_reused"


def job_not_found(job_id: str) -> NotFound:
    return NotFound(f"No job with id {job_id!r} in this tenant.", code="job_not_found")


@dataclass(frozen=True)
class JobPolicy:
    """Attempts, bounded backoff between them, and how long a claim holds."""

    max_attempts: int = 3
    retry_base_seconds: float = 1.0
    retry_cap_seconds: float = 60.0
    lease_seconds: float = 300.0


@dataclass(eq=False)
class JobCommands:
    """Enqueues jobs, runs their steps through the ports, and records identity links."""

    store: EventStore
    _: KW_ONLY
    connectors: Connectors
    power: PowerDevice
    clock: Callable[[], str]
    policy: JobPolicy = field(default_factory=JobPolicy)

    # -- enqueue --------------------------------------------------------------------------------

    def enqueue(
        self,
        *,
        tenant: str,
        job_type: str,
        provider_kind: str,
        proposal_id: str | None,
        request: Mapping[str, Any],
        requested_by: str,
    ) -> tuple[Job, bool]:
        """Queues a job; answers (job, created). The same ``idempotency_key`` with the same
        request answers the job it queued first; with another request, 409."""
        key = str(request.get("idempotency_key") or "")
        request_print = fingerprint(job_type, request)
        job_id = new_id("job")  # random: a job id tells nothing and is never guessed
        if key:
            existing = self._keyed(tenant, key)
            if existing is not None:
                return self._same_request(existing, request_print), False
        job = Job(
            tenant=tenant,
            job_id=job_id,
            job_type=job_type,
            provider_kind=provider_kind,
            proposal_id=proposal_id,
            payload=dict(request),
            idempotency_key=key,
            fingerprint=request_print,
            requested_by=requested_by,
            queued_at=self.clock(),
            max_attempts=self.policy.max_attempts,
        )
        claim = [JobKey.claim(tenant=tenant, idempotency_key=key, job_id=job_id, at=job.created_at)] if key else []
        try:
            self.store.save(job, *claim)
        except _CONFLICTS:  # a concurrent request with the same key queued it first
            existing = self._keyed(tenant, key) if key else None
            if existing is None:
                raise
            return self._same_request(existing, request_print), False
        return job, True

    def _keyed(self, tenant: str, key: str) -> Job | None:
        """The job ``key`` queued in the tenant (saved together with its key's record)."""
        claim = self.store.get_or_none(job_key_id(tenant, key))
        return self.store.get_or_none(job_key(tenant, claim.job_id)) if claim is not None else None

    @staticmethod
    def _same_request(job: Job, request_print: str) -> Job:
        if job.fingerprint != request_print:
            raise IdempotencyKeyReused(
                "This idempotency_key was used with a different request; use a new key."
            )
        return job

    def get_job(self, tenant: str, job_id: str) -> Job:
        job = self.store.get_or_none(job_key(tenant, job_id)) if is_valid_id(job_id) else None
        if job is None:
            raise job_not_found(job_id)
        return job

    # -- running --------------------------------------------------------------------------------

    def execute(self, tenant: str, job_id: str, runner_id: str) -> str:
        """Runs the job's next step if it is due; answers what happened.

        ``not_due``/``ended``/``missing``: nothing to do. ``taken``: another runner recorded
        first (optimistic concurrency on the job is the final word on who runs it).
        Otherwise ``succeeded``, ``waiting``, ``retrying`` or ``failed``.
        """
        job = self.store.get_or_none(job_key(tenant, job_id))
        if job is None:
            return "missing"
        now = self.clock()
        if job.ended:
            return "ended"
        if not job.claimable(now):
            return "not_due"
        if job.lost(now) and not job.attempts_left:
            job.fail(error_message=f"The runner of attempt {job.attempt} stopped answering; no attempts are left.", at=now)
            return "failed" if self._save(job) else "taken"
        job.start(runner_id=runner_id, at=now, lease_until=shift(now, self.policy.lease_seconds))
        if not self._save(job):
            return "taken"
        return self._step(job, runner_id)

    def _save(self, *aggregates: Any) -> bool:
        try:
            self.store.save(*aggregates)
        except _CONFLICTS:
            return False
        return True

    def _step(self, job: Job, runner_id: str) -> str:
        for _ in range(_STEP_ATTEMPTS):
            now = self.clock()
            context = JobContext(load=self.store.get_or_none, now=now, connectors=self.connectors, power=self.power)
            try:
                outcome = STEPS[job.job_type](job, context)
            except JobFailure as exc:
                return self._failed(job, exc, now)
            except Exception as exc:  # an unforeseen failure of a step is an attempt that failed
                return self._failed(job, JobFailure(f"{type(exc).__name__}: {exc}", retryable=True), now)
            if isinstance(outcome, Wait):
                job.progress(phase=outcome.phase, detail=outcome.detail, at=now, due_at=outcome.due_at)
                return "waiting" if self._save(job) else "taken"
            attempt = job.attempt
            job.succeed(result=outcome.result, at=now)
            if self._save(job, *outcome.changed):
                return "succeeded"
            # Another writer changed a record this step read: run the step again on fresh
            # copies, as long as the job itself is still this runner's attempt.
            job = self.store.get_or_none(job_key(job.tenant, job.job_id))
            if job is None or job.status != RUNNING or job.runner_id != runner_id or job.attempt != attempt:
                return "taken"
        return self._failed(job, JobFailure("Records kept changing under the job.", retryable=True), self.clock())

    def _failed(self, job: Job, exc: JobFailure, now: str) -> str:
        if exc.retryable and job.attempts_left:
            policy = self.policy
            when = retry_at(now, job.attempt, base=policy.retry_base_seconds, cap=policy.retry_cap_seconds)
            job.retry(error_message=exc.message, at=now, retry_at=when)
            outcome = "retrying"
        else:
            job.fail(error_message=exc.message, at=now, result=exc.result)
            outcome = "failed"
        return outcome if self._save(job) else "taken"

    # -- identity links -------------------------------------------------------------------------

    def link_identity(
        self, *, tenant: str, provider: str, facts: LinkFacts, linked: bool, source: str
    ) -> IdentityLink | None:
        """Links (or unlinks) a subject's account at ``provider``; None: nothing to unlink."""

        def command() -> IdentityLink | None:
            link = self.store.get_or_none(identity_key(tenant, provider, facts.subject_key))
            now = self.clock()
            if linked:
                if link is None:
                    link = IdentityLink.link_new(tenant=tenant, provider=provider, facts=facts, source=source, at=now)
                else:
                    link.relink(facts, source=source, at=now)
            elif link is None:
                return None
            else:
                link.unlink(source=source, at=now)
            self.store.save(link)
            return link

        return self.store.retrying(command)

"""The JobKey aggregate: which job an ``idempotency_key`` queued in a tenant (C18).

Job ids are random (``new_id``), so nobody can name a job they were not told about; the
same key with the same request still answers the same job because the key's record says
which one. The record's id carries a digest of the key, never the key itself.
"""

from __future__ import annotations

import hashlib

from eventsourcing.domain import event

from domain.jobs.events import JobKeyClaimed
from domain.shared.base import Aggregate


def job_key_id(tenant: str, idempotency_key: str) -> str:
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return f"jik:{tenant}:{digest}"


class JobKey(Aggregate):
    """One idempotency key of a tenant and the job it queued (written with that job)."""

    @staticmethod
    def create_id(tenant: str, idempotency_key: str) -> str:
        return job_key_id(tenant, idempotency_key)

    @classmethod
    def claim(cls, *, tenant: str, idempotency_key: str, job_id: str, at: str) -> JobKey:
        return cls(tenant=tenant, idempotency_key=idempotency_key, job_id=job_id, at=at)

    @event(JobKeyClaimed)
    def __init__(self, *, tenant: str, idempotency_key: str, job_id: str, at: str) -> None:
        self.tenant = tenant
        self.job_id = job_id
        self.at = at

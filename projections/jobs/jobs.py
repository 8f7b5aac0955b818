"""Jobs read model: each job as ``JobOut``, and the runners' queue of due jobs.

- ``job/<tenant>/<job_id>``: the job as ``GET /v1/jobs/{job_id}`` answers it (plus its
  ``attempt``).
- ``queue/<tenant>/<job_id>`` in partition ``job-queue``, sorted by when the job is next
  due (queued, a retry's time, a waiting step's time, or a running attempt's lease end):
  what the job runners scan. A job leaves the queue when it ends.
"""

from __future__ import annotations

from typing import Any

from domain.jobs import events as ev
from domain.jobs.job import FAILED, QUEUED, RUNNING, SUCCEEDED
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope

QUEUE_PARTITION = "job-queue"


def job_doc_key(tenant: str, job_id: str) -> str:
    return f"job/{tenant}/{job_id}"


def queue_doc_key(tenant: str, job_id: str) -> str:
    return f"queue/{tenant}/{job_id}"


def queue_sort(due_at: str, tenant: str, job_id: str) -> str:
    return f"{due_at}|{tenant}|{job_id}"


class JobsProjector(Projector):
    name = "jobs"
    topics = frozenset(ev.kind_of(e) for e in ev.JOB_EVENTS)

    def apply(self, env: Envelope, docs: Docs) -> None:
        event = env.event
        tenant = env.tenant
        if isinstance(event, ev.JobQueued):
            doc: dict[str, Any] | None = {
                "tenant_id": tenant,
                "id": event.job_id,
                "proposal_id": event.proposal_id,
                "job_type": event.job_type,
                "provider_kind": event.provider_kind,
                "status": QUEUED,
                "payload": event.payload,
                "result": None,
                "error_message": None,
                "created_at": event.queued_at,
                "updated_at": event.queued_at,
                "attempt": 0,
                "due_at": event.queued_at,
            }
        else:
            doc = docs.get(job_doc_key(tenant, env.originator_id.split(":", 2)[2]))
            if doc is None:
                return
            self.fold(doc, event)
        assert doc is not None
        job_id = doc["id"]
        docs.put(job_doc_key(tenant, job_id), doc, partition=f"jobs/{tenant}", sort_key=f"{doc['created_at']}|{job_id}", status=doc["status"])
        queue_key = queue_doc_key(tenant, job_id)
        if doc["status"] in (SUCCEEDED, FAILED):
            docs.delete(queue_key)
        else:
            entry = {"tenant": tenant, "job_id": job_id, "due_at": doc["due_at"], "status": doc["status"]}
            docs.put(queue_key, entry, partition=QUEUE_PARTITION, sort_key=queue_sort(doc["due_at"], tenant, job_id), status=doc["status"])

    @staticmethod
    def fold(doc: dict[str, Any], event: Any) -> None:
        doc["updated_at"] = max(doc["updated_at"], event.at)
        if isinstance(event, ev.JobStarted):
            doc.update(status=RUNNING, attempt=event.attempt, due_at=event.lease_until)
        elif isinstance(event, ev.JobProgressed):
            doc["due_at"] = event.due_at
        elif isinstance(event, ev.JobRetried):
            doc.update(status=QUEUED, due_at=event.retry_at, error_message=event.error_message)
        elif isinstance(event, ev.JobSucceeded):
            doc.update(status=SUCCEEDED, result=event.result, error_message=None)
        elif isinstance(event, ev.JobFailed):
            doc.update(status=FAILED, result=event.result, error_message=event.error_message)

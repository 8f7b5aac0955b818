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
from projections.engine.docs import Docs, Projector, handles
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

    @handles(ev.JobQueued)
    def job_queued(self, e: ev.JobQueued, env: Envelope, docs: Docs) -> None:
        self._store(docs, env.tenant, {
            "tenant_id": env.tenant,
            "id": e.job_id,
            "proposal_id": e.proposal_id,
            "job_type": e.job_type,
            "provider_kind": e.provider_kind,
            "status": QUEUED,
            "payload": e.payload,
            "result": None,
            "error_message": None,
            "created_at": e.queued_at,
            "updated_at": e.queued_at,
            "attempt": 0,
            "due_at": e.queued_at,
        })

    @handles(ev.JobStarted)
    def job_started(self, e: ev.JobStarted, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, status=RUNNING, attempt=e.attempt, due_at=e.lease_until)

    @handles(ev.JobProgressed)
    def job_progressed(self, e: ev.JobProgressed, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, due_at=e.due_at)

    @handles(ev.JobRetried)
    def job_retried(self, e: ev.JobRetried, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, status=QUEUED, due_at=e.retry_at, error_message=e.error_message)

    @handles(ev.JobSucceeded)
    def job_succeeded(self, e: ev.JobSucceeded, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, status=SUCCEEDED, result=e.result, error_message=None)

    @handles(ev.JobFailed)
    def job_failed(self, e: ev.JobFailed, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, status=FAILED, result=e.result, error_message=e.error_message)

    def _change(self, env: Envelope, docs: Docs, at: str, **changes: Any) -> None:
        doc = docs.get(job_doc_key(env.tenant, env.originator_id.split(":", 2)[2]))
        if doc is None:
            return
        doc["updated_at"] = max(doc["updated_at"], at)
        doc.update(changes)
        self._store(docs, env.tenant, doc)

    @staticmethod
    def _store(docs: Docs, tenant: str, doc: dict[str, Any]) -> None:
        job_id = doc["id"]
        docs.put(job_doc_key(tenant, job_id), doc, partition=f"jobs/{tenant}", sort_key=f"{doc['created_at']}|{job_id}", status=doc["status"])
        queue_key = queue_doc_key(tenant, job_id)
        if doc["status"] in (SUCCEEDED, FAILED):
            docs.delete(queue_key)
        else:
            entry = {"tenant": tenant, "job_id": job_id, "due_at": doc["due_at"], "status": doc["status"]}
            docs.put(queue_key, entry, partition=QUEUE_PARTITION, sort_key=queue_sort(doc["due_at"], tenant, job_id), status=doc["status"])

"""Developer workspace records: one document per workspace, listed per employee and per state.

Each record is kept twice over one document key space: ``dws/<tenant>/<scope>`` in the
employee's partition (the list endpoint scans it) and ``dwsq/<tenant>/<scope>`` in the
controller's queue partition with the state as its ``status`` (the reconcile loop scans it).
Each event's payload is decoded strictly into its Struct from ``domain.workspaces.events``.
"""

from __future__ import annotations

from typing import Any

from domain.workspaces import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope

TABLE = "dev_workspaces"
QUEUE_PARTITION = "dws-queue"


def record_key(tenant: str, scope: str) -> str:
    return f"dws/{tenant}/{scope}"


def queue_key(tenant: str, scope: str) -> str:
    return f"dwsq/{tenant}/{scope}"


def employee_partition(tenant: str, employee: str) -> str:
    return f"dws-emp/{tenant}/{employee.lower()}"


class WorkspacesProjector(Projector):
    name = TABLE

    @handles(ev.Launched)
    def launched(self, e: ev.Launched, env: Envelope, docs: Docs) -> None:
        self._store(env, docs, {
            "aggregate_id": env.originator_id,
            "tenant_id": e.tenant,
            "project_slug": e.project_slug,
            "repository_key": e.repository_key,
            "branch": e.branch,
            "employee": e.employee,
            "employee_slug": e.employee_slug,
            "workspace_scope": e.workspace_scope,
            "workspace_name": e.workspace_name,
            "provider_name": e.provider_name,
            "namespace": e.namespace,
            "status": "pending",
            "last_error": "",
            "launched_at": e.at,
            "status_since": e.at,
            "last_active_at": e.at,
            "pod_name": "",
            "volume_paths": [],
            "cleaned_workspace_resources": 0,
            "resume_estimate_seconds": 0,
            "stopped_reason": "",
            "updated_at": e.at,
        })

    @handles(ev.Requeued)
    def requeued(self, e: ev.Requeued, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "pending", last_error="", pod_name="", volume_paths=[], last_active_at=e.at,
                     resume_estimate_seconds=e.resume_estimate_seconds, stopped_reason="")

    @handles(ev.Reconnected)
    def reconnected(self, e: ev.Reconnected, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, None, last_active_at=e.at)

    @handles(ev.ProvisioningStarted)
    def provisioning_started(self, e: ev.ProvisioningStarted, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "provisioning")

    @handles(ev.Provisioned)
    def provisioned(self, e: ev.Provisioned, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "ready", pod_name=e.pod_name, volume_paths=list(e.volume_paths), last_active_at=e.at,
                     resume_estimate_seconds=0)

    @handles(ev.Failed)
    def failed(self, e: ev.Failed, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "error", last_error=e.last_error)

    @handles(ev.ReleaseRequested)
    def release_requested(self, e: ev.ReleaseRequested, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "release_requested")

    @handles(ev.ReleaseStarted)
    def release_started(self, e: ev.ReleaseStarted, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "releasing")

    @handles(ev.Suspended)
    def suspended(self, e: ev.Suspended, env: Envelope, docs: Docs) -> None:
        self._change(env, docs, e.at, "suspended", pod_name="", stopped_reason=e.reason)

    @handles(ev.SiblingsCleaned)
    def siblings_cleaned(self, e: ev.SiblingsCleaned, env: Envelope, docs: Docs) -> None:
        record = self._record(env, docs)
        if record is not None:
            record["cleaned_workspace_resources"] += len(e.removed)
            record["updated_at"] = e.at
            self._store(env, docs, record)

    @staticmethod
    def _record(env: Envelope, docs: Docs) -> dict[str, Any] | None:
        return docs.get(record_key(env.scope[1], env.scope[2]))

    def _change(self, env: Envelope, docs: Docs, at: str, status: str | None, **changes: Any) -> None:
        """The record with ``changes``, in ``status`` since ``at`` when one is given."""
        record = self._record(env, docs)
        if record is None:
            return
        if status is not None:
            record["status"] = status
            record["status_since"] = at
        record.update(changes)
        record["updated_at"] = at
        self._store(env, docs, record)

    @staticmethod
    def _store(env: Envelope, docs: Docs, record: dict[str, Any]) -> None:
        tenant, scope = env.scope[1], env.scope[2]
        docs.put(record_key(tenant, scope), record, partition=employee_partition(tenant, record["employee"]), sort_key=scope,
                 status=record["status"])
        queue = {"aggregate_id": env.originator_id, "workspace_scope": scope, "status_since": record["status_since"]}
        queue["last_active_at"] = record["last_active_at"]
        docs.put(queue_key(tenant, scope), queue, partition=QUEUE_PARTITION, sort_key=env.originator_id, status=record["status"])

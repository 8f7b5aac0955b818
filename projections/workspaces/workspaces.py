"""Developer workspace records: one document per workspace, listed per employee and per state.

Each record is kept twice over one document key space: ``dws/<tenant>/<scope>`` in the
employee's partition (the list endpoint scans it) and ``dwsq/<tenant>/<scope>`` in the
controller's queue partition with the state as its ``status`` (the reconcile loop scans it).
Each event's payload is decoded strictly into its Struct from ``domain.workspaces.events``.
"""

from __future__ import annotations

from typing import Any

from domain.workspaces import events as ev
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope

TABLE = "dev_workspaces"
QUEUE_PARTITION = "dws-queue"


def record_key(tenant: str, scope: str) -> str:
    return f"dws/{tenant}/{scope}"


def queue_key(tenant: str, scope: str) -> str:
    return f"dwsq/{tenant}/{scope}"


def employee_partition(tenant: str, employee: str) -> str:
    return f"dws-emp/{tenant}/{employee.lower()}"


_STATUS_AFTER = {
    "Requeued": "pending",
    "ProvisioningStarted": "provisioning",
    "Provisioned": "ready",
    "Failed": "error",
    "ReleaseRequested": "release_requested",
    "ReleaseStarted": "releasing",
    "Suspended": "suspended",
}


class WorkspacesProjector(Projector):
    name = TABLE
    topics = frozenset(f"DevWorkspace.{name}" for name in ev.EVENTS)

    def apply(self, env: Envelope, docs: Docs) -> None:
        event = env.event
        tenant, scope = env.scope[1], env.scope[2]
        key = record_key(tenant, scope)
        if isinstance(event, ev.Launched):
            record: dict[str, Any] = {
                "aggregate_id": env.originator_id,
                "tenant_id": event.tenant,
                "project_slug": event.project_slug,
                "repository_key": event.repository_key,
                "branch": event.branch,
                "employee": event.employee,
                "employee_slug": event.employee_slug,
                "workspace_scope": event.workspace_scope,
                "workspace_name": event.workspace_name,
                "provider_name": event.provider_name,
                "namespace": event.namespace,
                "status": "pending",
                "last_error": "",
                "launched_at": event.at,
                "status_since": event.at,
                "last_active_at": event.at,
                "pod_name": "",
                "volume_paths": [],
                "cleaned_workspace_resources": 0,
                "resume_estimate_seconds": 0,
                "stopped_reason": "",
                "updated_at": event.at,
            }
        else:
            found = docs.get(key)
            if found is None:
                return
            record = found
            self._fold(record, event, env.name)
        record["updated_at"] = event.at
        docs.put(key, record, partition=employee_partition(tenant, record["employee"]), sort_key=scope, status=record["status"])
        queue = {"aggregate_id": env.originator_id, "workspace_scope": scope, "status_since": record["status_since"]}
        queue["last_active_at"] = record["last_active_at"]
        docs.put(queue_key(tenant, scope), queue, partition=QUEUE_PARTITION, sort_key=env.originator_id, status=record["status"])

    @staticmethod
    def _fold(record: dict[str, Any], event: Any, name: str) -> None:
        if name in _STATUS_AFTER:
            record["status"] = _STATUS_AFTER[name]
            record["status_since"] = event.at
        if isinstance(event, ev.Requeued):
            record.update(last_error="", pod_name="", volume_paths=[], last_active_at=event.at)
            record["resume_estimate_seconds"] = event.resume_estimate_seconds
            record["stopped_reason"] = ""
        elif isinstance(event, ev.Reconnected):
            record["last_active_at"] = event.at
        elif isinstance(event, ev.Provisioned):
            record.update(pod_name=event.pod_name, volume_paths=list(event.volume_paths), last_active_at=event.at)
            record["resume_estimate_seconds"] = 0
        elif isinstance(event, ev.Failed):
            record["last_error"] = event.last_error
        elif isinstance(event, ev.Suspended):
            record.update(pod_name="", stopped_reason=event.reason)
        elif isinstance(event, ev.SiblingsCleaned):
            record["cleaned_workspace_resources"] += len(event.removed)

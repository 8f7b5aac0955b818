"""Developer workspace shapes: the record with its reconnect material, and the list."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.workspaces.material import MaterialConfig, reconnect_material
from domain.workspaces.workspace import DevWorkspace


class MetricNames(msgspec.Struct, kw_only=True):
    tokens: str
    requests: str


class UsageObservability(msgspec.Struct, kw_only=True):
    employee_slug: str
    employee: str  # the whole subject: the metrics' employee label
    meter_path: str
    dashboard_uid: str
    dashboard_path: str
    dashboard_url: str
    metric_names: MetricNames
    employee_label: str


class UsageLinks(msgspec.Struct, kw_only=True):
    dashboard_url: str
    meter_url: str


class ReconnectMaterial(msgspec.Struct, kw_only=True):
    provider_url: str
    kubeconfig_url: str
    provider_add_command: str
    up_command: str
    tool_loadout: list[str]
    usage_links: UsageLinks
    usage_observability: UsageObservability


class WorkspaceOut(msgspec.Struct, kw_only=True):
    """One developer workspace record (launch, list item and DELETE answer alike)."""

    provider: str = "dev_workspace"
    tenant_id: str
    project_slug: str
    repository_key: str
    branch: str
    employee_slug: str
    workspace_name: str
    provider_name: str
    namespace: str
    workspace_scope: str
    status: str
    last_error: str = ""
    launched_at: str = ""
    updated_at: str = ""
    resume_estimate_seconds: int = 0
    reconnect_material: ReconnectMaterial


class WorkspaceList(msgspec.Struct, kw_only=True):
    items: list[WorkspaceOut]


def record_of(ws: DevWorkspace) -> dict[str, Any]:
    """The aggregate as the read model records it (for a command's own answer)."""
    return {
        "tenant_id": ws.tenant,
        "project_slug": ws.project_slug,
        "repository_key": ws.repository_key,
        "branch": ws.branch,
        "employee": ws.employee,
        "employee_slug": ws.employee_slug,
        "workspace_name": ws.workspace_name,
        "provider_name": ws.provider_name,
        "namespace": ws.namespace,
        "workspace_scope": ws.workspace_scope,
        "status": ws.status,
        "last_error": ws.last_error,
        "launched_at": ws.launched_at,
        "updated_at": ws.status_since,
        "resume_estimate_seconds": ws.resume_estimate_seconds,
    }


def workspace_out(record: dict[str, Any], cfg: MaterialConfig) -> WorkspaceOut:
    fields = {k: record[k] for k in WORKSPACE_FIELDS if k in record}
    return msgspec.convert({**fields, "reconnect_material": reconnect_material(record, cfg)}, WorkspaceOut)


WORKSPACE_FIELDS = tuple(f.name for f in msgspec.structs.fields(WorkspaceOut) if f.name != "reconnect_material")

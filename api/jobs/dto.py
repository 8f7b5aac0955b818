"""Requests and answers of the jobs, sync and identity endpoints (spec: Jobs, sync, identity)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from domain.shared.ids import END, ID_PATTERN

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=ID_PATTERN)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Short = Annotated[str, msgspec.Meta(max_length=200)]
Email = Annotated[str, msgspec.Meta(max_length=320)]
NodeName = Annotated[str, msgspec.Meta(min_length=1, max_length=253, pattern=rf"^[A-Za-z0-9_.-]+{END}")]
Mac = Annotated[
    str,
    msgspec.Meta(pattern=rf"^[0-9A-Fa-f]{{2}}([:-]?[0-9A-Fa-f]{{2}}){{5}}{END}", description="MAC address, e.g. 52:54:00:12:34:56"),
]
DateTime = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
JobStatus = Literal["queued", "running", "succeeded", "failed"]

# -- requests -------------------------------------------------------------------------------


class AccessSyncIn(msgspec.Struct, kw_only=True):
    """Access sync request."""

    tenant_id: Id
    proposal_id: Id
    mode: Literal["request", "repository_dispatch", "delta_cursor", "reconcile"]
    idempotency_key: Key | None = None
    provider_kind: Short | None = None
    payload: dict[str, Any] = {}
    required_connectors: Annotated[list[Id], msgspec.Meta(max_length=100)] = []
    preflight_ssot: dict[Id, dict[Short, Short]] = {}
    dry_run: bool = False
    preflight_mode: Literal["strict", "best_effort"] = "strict"


class WizardTryIn(msgspec.Struct, kw_only=True):
    """Wizard try request."""

    tenant_id: Id
    proposal_id: Id
    provider: Id
    idempotency_key: Key | None = None
    ssot: dict[str, Any] = {}
    strict: bool = False
    apply_binding: bool = False
    confirm_update: bool = False
    update_mode: Literal["ask", "force", "skip"] = "ask"
    enabled: bool | None = None


class NodePowerIn(msgspec.Struct, kw_only=True):
    """Node power request (sleep, or wake)."""

    tenant_id: Id
    node_name: NodeName
    mac_address: Mac
    idempotency_key: Key | None = None
    proposal_id: Id | None = None
    power_device_id: Annotated[str, msgspec.Meta(max_length=128, pattern=rf"^[A-Za-z0-9_.-]*{END}")] = ""
    verify_after_seconds: Annotated[int, msgspec.Meta(ge=0, le=3600)] = 30


class IdentityLinkIn(msgspec.Struct, kw_only=True):
    """Links the caller (or, for super_admin and API keys, ``subject_key``) at a provider."""

    subject_key: Email | None = None
    provider_user_id: Short = ""
    provider_username: Short = ""
    user_id: Short = ""
    username: Short = ""
    email: Email = ""
    attributes: Annotated[dict[Short, Short], msgspec.Meta(max_length=100)] = {}
    linked: bool = True


# -- answers --------------------------------------------------------------------------------


class JobOut(msgspec.Struct, kw_only=True):
    """A job (spec: Job)."""

    tenant_id: str
    id: str
    proposal_id: str | None
    job_type: str
    provider_kind: str
    status: JobStatus
    payload: dict[str, Any]
    result: dict[str, Any] | None
    error_message: str | None
    created_at: DateTime
    updated_at: DateTime


class NodePowerJobOut(msgspec.Struct, kw_only=True):
    """The node power answer: a job without ``proposal_id``, ``result`` and ``error_message``."""

    tenant_id: str
    id: str
    job_type: str
    provider_kind: str
    status: JobStatus
    payload: dict[str, Any]
    created_at: DateTime
    updated_at: DateTime


class SyncCheckpoint(msgspec.Struct, kw_only=True):
    tenant_id: str
    id: str
    connector_id: str
    scope: str
    cursor_value: str
    meta: dict[str, Any]


class SyncCheckpointList(msgspec.Struct, kw_only=True):
    items: list[SyncCheckpoint]


class IdentityLinkState(msgspec.Struct, kw_only=True):
    subject_id: str
    subject_key: str
    user_id: str
    username: str
    email: str
    provider: str
    linked: bool
    provider_user_id: str
    provider_username: str
    attributes: dict[str, str] = {}


def job_out(job: Any) -> JobOut:
    """A Job aggregate as ``JobOut``."""
    return JobOut(
        tenant_id=job.tenant,
        id=job.job_id,
        proposal_id=job.proposal_id,
        job_type=job.job_type,
        provider_kind=job.provider_kind,
        status=job.status,
        payload=job.payload,
        result=job.result,
        error_message=job.error_message,
        created_at=job.created_at,
        updated_at=job.updated_at,
    )


def node_power_out(job: Any) -> NodePowerJobOut:
    """``JobOut`` without the fields a node power answer leaves out."""
    fields = msgspec.structs.asdict(job_out(job))
    return NodePowerJobOut(**{name: fields[name] for name in NodePowerJobOut.__struct_fields__})

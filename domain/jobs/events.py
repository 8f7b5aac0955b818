"""The jobs area's events: what Job, SyncCheckpoint, IdentityLink and ProviderBinding store.

Each event is declared once: its aggregate applies it by class (``@event(JobStarted)``)
and read models read the same class back. ``TOPIC`` is the name the log stores it under.
Stored events live forever: a field is only ever added with a default.
"""

from __future__ import annotations

from typing import Any

from domain.shared.base import Aggregate

# -- Job (``job:<tenant>:<job_id>``) ---------------------------------------------------------


class JobQueued(Aggregate.Created):
    TOPIC = "domain.jobs.job:Job.Queued"
    tenant: str
    job_id: str
    job_type: str
    provider_kind: str
    proposal_id: str | None
    payload: dict[str, Any]
    idempotency_key: str
    fingerprint: str
    requested_by: str
    queued_at: str
    max_attempts: int


class JobStarted(Aggregate.Event):
    TOPIC = "domain.jobs.job:Job.Started"
    attempt: int
    runner_id: str
    at: str
    lease_until: str


class JobProgressed(Aggregate.Event):
    """A step with an effect outside the service was taken; the next one is due at ``due_at``."""

    TOPIC = "domain.jobs.job:Job.Progressed"
    phase: str
    detail: dict[str, Any]
    at: str
    due_at: str


class JobRetried(Aggregate.Event):
    TOPIC = "domain.jobs.job:Job.Retried"
    attempt: int
    error_message: str
    at: str
    retry_at: str


class JobSucceeded(Aggregate.Event):
    TOPIC = "domain.jobs.job:Job.Succeeded"
    result: dict[str, Any]
    at: str


class JobFailed(Aggregate.Event):
    TOPIC = "domain.jobs.job:Job.Failed"
    attempt: int
    error_message: str
    result: dict[str, Any] | None
    at: str


JOB_EVENTS: tuple[type[Aggregate.Event], ...] = (
    JobQueued, JobStarted, JobProgressed, JobRetried, JobSucceeded, JobFailed,
)

# -- SyncCheckpoint (``chk:<tenant>:<connector_id>:<scope>``) ----------------------------------


class CheckpointOpened(Aggregate.Created):
    TOPIC = "domain.jobs.checkpoint:SyncCheckpoint.Opened"
    tenant: str
    checkpoint_id: str
    connector_id: str
    scope: str
    cursor_value: str
    meta: dict[str, Any]
    job_id: str
    at: str


class CheckpointAdvanced(Aggregate.Event):
    TOPIC = "domain.jobs.checkpoint:SyncCheckpoint.Advanced"
    cursor_value: str
    meta: dict[str, Any]
    job_id: str
    at: str


CHECKPOINT_EVENTS: tuple[type[Aggregate.Event], ...] = (CheckpointOpened, CheckpointAdvanced)

# -- IdentityLink (``idl:<tenant>:<provider>:<subject_id>``) -----------------------------------


class IdentityLinked(Aggregate.Created):
    TOPIC = "domain.jobs.identity:IdentityLink.Linked"
    tenant: str
    provider: str
    subject_id: str
    subject_key: str
    user_id: str
    username: str
    email: str
    provider_user_id: str
    provider_username: str
    attributes: dict[str, str]
    source: str
    at: str


class IdentityRelinked(Aggregate.Event):
    TOPIC = "domain.jobs.identity:IdentityLink.Relinked"
    user_id: str
    username: str
    email: str
    provider_user_id: str
    provider_username: str
    attributes: dict[str, str]
    source: str
    at: str


class IdentityUnlinked(Aggregate.Event):
    TOPIC = "domain.jobs.identity:IdentityLink.Unlinked"
    source: str
    at: str


IDENTITY_EVENTS: tuple[type[Aggregate.Event], ...] = (IdentityLinked, IdentityRelinked, IdentityUnlinked)

# -- ProviderBinding (``pbd:<tenant>:<proposal_id>:<provider>``), applied by wizard try --------


class BindingApplied(Aggregate.Created):
    TOPIC = "domain.jobs.binding:ProviderBinding.Applied"
    tenant: str
    proposal_id: str
    provider: str
    ssot: dict[str, Any]
    enabled: bool
    job_id: str
    at: str


class BindingUpdated(Aggregate.Event):
    TOPIC = "domain.jobs.binding:ProviderBinding.Updated"
    ssot: dict[str, Any]
    enabled: bool
    job_id: str
    at: str


BINDING_EVENTS: tuple[type[Aggregate.Event], ...] = (BindingApplied, BindingUpdated)

# -- JobKey (``jik:<tenant>:<digest of the idempotency key>``), saved with the job it queued ----


class JobKeyClaimed(Aggregate.Created):
    TOPIC = "domain.jobs.idempotency:JobKey.Claimed"
    tenant: str
    idempotency_key: str
    job_id: str
    at: str


EVENTS: tuple[type[Aggregate.Event], ...] = (
    JOB_EVENTS + CHECKPOINT_EVENTS + IDENTITY_EVENTS + BINDING_EVENTS + (JobKeyClaimed,)
)


def kind_of(event_type: type[Aggregate.Event]) -> str:
    """``JobQueued`` -> ``"Job.Queued"`` (the stored name: aggregate and event)."""
    return str(event_type.TOPIC).rpartition(":")[2]  # type: ignore[attr-defined]


BY_KIND: dict[str, type[Aggregate.Event]] = {kind_of(e): e for e in EVENTS}

"""The jobs area's event contracts: what Job, SyncCheckpoint, IdentityLink and
ProviderBinding store.

One Struct per stored kind, tagged by that kind, with exactly the fields its aggregate's
``@event`` method records (``tests/unit/test_jobs_event_contracts.py`` holds the two
together). Read models decode a stored event once into its Struct and read typed
attributes. Stored events live forever: a field is only ever added with a default.
"""

from __future__ import annotations

from typing import Any

import msgspec


class JobsEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="event"):
    """A fact of the jobs area, as stored (the store keeps id, version and time apart)."""


# -- Job (``job:<tenant>:<job_id>``) ---------------------------------------------------------


class JobQueued(JobsEvent, tag="Job.Queued"):
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


class JobStarted(JobsEvent, tag="Job.Started"):
    attempt: int
    runner_id: str
    at: str
    lease_until: str


class JobProgressed(JobsEvent, tag="Job.Progressed"):
    """A step with an effect outside the service was taken; the next one is due at ``due_at``."""

    phase: str
    detail: dict[str, Any]
    at: str
    due_at: str


class JobRetried(JobsEvent, tag="Job.Retried"):
    attempt: int
    error_message: str
    at: str
    retry_at: str


class JobSucceeded(JobsEvent, tag="Job.Succeeded"):
    result: dict[str, Any]
    at: str


class JobFailed(JobsEvent, tag="Job.Failed"):
    attempt: int
    error_message: str
    result: dict[str, Any] | None
    at: str


JOB_EVENTS: tuple[type[JobsEvent], ...] = (
    JobQueued, JobStarted, JobProgressed, JobRetried, JobSucceeded, JobFailed,
)

# -- SyncCheckpoint (``chk:<tenant>:<connector_id>:<scope>``) ----------------------------------


class CheckpointOpened(JobsEvent, tag="SyncCheckpoint.Opened"):
    tenant: str
    checkpoint_id: str
    connector_id: str
    scope: str
    cursor_value: str
    meta: dict[str, Any]
    job_id: str
    at: str


class CheckpointAdvanced(JobsEvent, tag="SyncCheckpoint.Advanced"):
    cursor_value: str
    meta: dict[str, Any]
    job_id: str
    at: str


CHECKPOINT_EVENTS: tuple[type[JobsEvent], ...] = (CheckpointOpened, CheckpointAdvanced)

# -- IdentityLink (``idl:<tenant>:<provider>:<subject_id>``) -----------------------------------


class IdentityLinked(JobsEvent, tag="IdentityLink.Linked"):
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


class IdentityRelinked(JobsEvent, tag="IdentityLink.Relinked"):
    user_id: str
    username: str
    email: str
    provider_user_id: str
    provider_username: str
    attributes: dict[str, str]
    source: str
    at: str


class IdentityUnlinked(JobsEvent, tag="IdentityLink.Unlinked"):
    source: str
    at: str


IDENTITY_EVENTS: tuple[type[JobsEvent], ...] = (IdentityLinked, IdentityRelinked, IdentityUnlinked)

# -- ProviderBinding (``pbd:<tenant>:<proposal_id>:<provider>``), applied by wizard try --------


class BindingApplied(JobsEvent, tag="ProviderBinding.Applied"):
    tenant: str
    proposal_id: str
    provider: str
    ssot: dict[str, Any]
    enabled: bool
    job_id: str
    at: str


class BindingUpdated(JobsEvent, tag="ProviderBinding.Updated"):
    ssot: dict[str, Any]
    enabled: bool
    job_id: str
    at: str


BINDING_EVENTS: tuple[type[JobsEvent], ...] = (BindingApplied, BindingUpdated)

# -- JobKey (``jik:<tenant>:<digest of the idempotency key>``), saved with the job it queued ----


class JobKeyClaimed(JobsEvent, tag="JobKey.Claimed"):
    tenant: str
    idempotency_key: str
    job_id: str
    at: str


EVENTS: tuple[type[JobsEvent], ...] = (
    JOB_EVENTS + CHECKPOINT_EVENTS + IDENTITY_EVENTS + BINDING_EVENTS + (JobKeyClaimed,)
)


def kind_of(event_type: type[JobsEvent]) -> str:
    """``JobQueued`` -> ``"Job.Queued"`` (its tag: aggregate and event name)."""
    return str(event_type.__struct_config__.tag)


BY_KIND: dict[str, type[JobsEvent]] = {kind_of(e): e for e in EVENTS}

"""The developer workspace's events, as projectors decode them (one Struct per event).

The aggregate (``domain.workspaces.workspace``) records each event with exactly these
fields; ``tests/unit/test_workspace_lifecycle.py`` checks that every stored event decodes
strictly into its Struct, so a renamed field fails loudly instead of projecting blanks.
"""

from __future__ import annotations

import msgspec


class WorkspaceEvent(msgspec.Struct, kw_only=True, frozen=True):
    """Base: every event carries the moment it happened (from the command's clock)."""

    at: str


class Launched(WorkspaceEvent, frozen=True):
    """First launch: the lease is queued as ``pending`` (the workflow queue's entry)."""

    tenant: str
    project_slug: str
    repository_key: str
    branch: str
    employee: str
    employee_slug: str
    workspace_scope: str
    workspace_name: str
    namespace: str
    provider_name: str


class Requeued(WorkspaceEvent, frozen=True):
    """Launched again from ``error`` or ``suspended``: back to ``pending``."""

    previous_status: str
    resume_estimate_seconds: int


class Reconnected(WorkspaceEvent, frozen=True):
    """Launched again while live: no state change, but the workspace counts as used."""


class ProvisioningStarted(WorkspaceEvent, frozen=True):
    controller_id: str


class Provisioned(WorkspaceEvent, frozen=True):
    pod_name: str
    volume_paths: list[str]


class Failed(WorkspaceEvent, frozen=True):
    last_error: str
    stale: bool


class ReleaseRequested(WorkspaceEvent, frozen=True):
    requested_by: str


class ReleaseStarted(WorkspaceEvent, frozen=True):
    controller_id: str


class Suspended(WorkspaceEvent, frozen=True):
    """Stopped: released by its owner (``reason`` ``released``) or idle (``idle``)."""

    reason: str


class SiblingsCleaned(WorkspaceEvent, frozen=True):
    removed: list[str]


EVENTS: dict[str, type[WorkspaceEvent]] = {
    cls.__name__: cls
    for cls in (
        Launched,
        Requeued,
        Reconnected,
        ProvisioningStarted,
        Provisioned,
        Failed,
        ReleaseRequested,
        ReleaseStarted,
        Suspended,
        SiblingsCleaned,
    )
}


class UsageRecorded(msgspec.Struct, kw_only=True, frozen=True):
    """One model request through the proxy (``domain.workspaces.usage.ModelUsage``).

    ``caller`` is ``agent`` (a squad agent's process: run, session and agent are set) or
    ``workspace`` (a developer workspace: ``workspace_scope`` is set). ``employee`` is the
    workspace's owner, or for an agent the subject who launched its run. ``partial``: the
    stream ended before the upstream said it was whole (cut, or the caller went away); the
    tokens are the ones reported until then."""

    at: str
    tenant: str
    request_id: str
    caller: str
    employee: str
    project_slug: str
    run_id: str
    session_id: str
    agent_id: str
    workspace_scope: str
    api: str
    alias: str
    upstream: str
    upstream_model: str
    status: int
    tokens_in: int
    cached_tokens: int
    tokens_out: int
    requests: int
    duration_ms: int
    cost_usd: float
    priced: bool
    partial: bool


USAGE_EVENTS: dict[str, type[msgspec.Struct]] = {"ModelUsage.Recorded": UsageRecorded}

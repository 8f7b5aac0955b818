"""The developer workspace's events: what a DevWorkspace stores.

Each event is declared once: the aggregate (``domain.workspaces.workspace``) applies it by
class and the read model reads the same class back; ``TOPIC`` is the name the log stores
it under.
"""

from __future__ import annotations

from domain.shared.base import Aggregate


class Launched(Aggregate.Created):
    """First launch: the lease is queued as ``pending`` (the workflow queue's entry)."""

    TOPIC = "domain.workspaces.workspace:DevWorkspace.Launched"
    at: str  # the moment it happened (from the command's clock)
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


class Requeued(Aggregate.Event):
    """Launched again from ``error`` or ``suspended``: back to ``pending``."""

    TOPIC = "domain.workspaces.workspace:DevWorkspace.Requeued"
    at: str
    previous_status: str
    resume_estimate_seconds: int


class Reconnected(Aggregate.Event):
    """Launched again while live: no state change, but the workspace counts as used."""

    TOPIC = "domain.workspaces.workspace:DevWorkspace.Reconnected"
    at: str

class ProvisioningStarted(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.ProvisioningStarted"
    at: str
    controller_id: str


class Provisioned(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.Provisioned"
    at: str
    pod_name: str
    volume_paths: list[str]


class Failed(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.Failed"
    at: str
    last_error: str
    stale: bool


class ReleaseRequested(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.ReleaseRequested"
    at: str
    requested_by: str


class ReleaseStarted(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.ReleaseStarted"
    at: str
    controller_id: str


class Suspended(Aggregate.Event):
    """Stopped: released by its owner (``reason`` ``released``) or idle (``idle``)."""

    TOPIC = "domain.workspaces.workspace:DevWorkspace.Suspended"
    at: str
    reason: str


class SiblingsCleaned(Aggregate.Event):
    TOPIC = "domain.workspaces.workspace:DevWorkspace.SiblingsCleaned"
    at: str
    removed: list[str]


EVENTS: dict[str, type[Aggregate.Event]] = {
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


class UsageRecorded(Aggregate.Created):
    """One model request through the proxy (``domain.workspaces.usage.ModelUsage``).

    ``caller`` is ``agent`` (a squad agent's process: run, session and agent are set) or
    ``workspace`` (a developer workspace: ``workspace_scope`` is set). ``employee`` is the
    workspace's owner, or for an agent the subject who launched its run. ``partial``: the
    stream ended before the upstream said it was whole (cut, or the caller went away); the
    tokens are the ones reported until then."""

    TOPIC = "domain.workspaces.usage:ModelUsage.Recorded"
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


USAGE_EVENTS: dict[str, type[Aggregate.Event]] = {"ModelUsage.Recorded": UsageRecorded}

"""The DevWorkspace aggregate: one per (project, repository, branch, employee).

States and moves follow the spec's "Developer workspace record" table; every guard raises
``WorkspaceStateConflict`` (409) before anything is recorded. Auto-stop of an idle
workspace ends in ``suspended`` (reason ``idle``), so launching again resumes it.
"""

from __future__ import annotations

from eventsourcing.domain import event

from domain.shared.base import Aggregate
from domain.shared.errors import Conflict
from domain.workspaces.events import (
    Failed,
    Launched,
    Provisioned,
    ProvisioningStarted,
    Reconnected,
    ReleaseRequested,
    ReleaseStarted,
    Requeued,
    SiblingsCleaned,
    Suspended,
)

PENDING = "pending"
PROVISIONING = "provisioning"
READY = "ready"
ERROR = "error"
RELEASE_REQUESTED = "release_requested"
RELEASING = "releasing"
SUSPENDED = "suspended"
STATES = (PENDING, PROVISIONING, READY, ERROR, RELEASE_REQUESTED, RELEASING, SUSPENDED)
REQUEUE_FROM = frozenset({ERROR, SUSPENDED})
LIVE = frozenset({PENDING, PROVISIONING, READY})

# (from, move) -> to: the table, and nothing else.
TRANSITIONS: dict[tuple[str, str], str] = {
    (ERROR, "launch"): PENDING,
    (SUSPENDED, "launch"): PENDING,
    (PENDING, "pick_up"): PROVISIONING,
    (PROVISIONING, "provisioned"): READY,
    (PROVISIONING, "fail"): ERROR,
    (READY, "release"): RELEASE_REQUESTED,
    (RELEASE_REQUESTED, "begin_release"): RELEASING,
    (RELEASING, "stopped"): SUSPENDED,
    (READY, "auto_stop"): SUSPENDED,
}


class WorkspaceStateConflict(Conflict):
    code = "dev_workspace_state_conflict"


class DevWorkspace(Aggregate):
    """A developer workspace lease; its events are the workflow queue's record of it."""

    @staticmethod
    def create_id(tenant: str, workspace_scope: str) -> str:
        return f"dws:{tenant}:{workspace_scope}"

    @event(Launched)
    def __init__(
        self,
        *,
        at: str,
        tenant: str,
        project_slug: str,
        repository_key: str,
        branch: str,
        employee: str,
        employee_slug: str,
        workspace_scope: str,
        workspace_name: str,
        namespace: str,
        provider_name: str,
    ) -> None:
        self.tenant = tenant
        self.project_slug = project_slug
        self.repository_key = repository_key
        self.branch = branch
        self.employee = employee
        self.employee_slug = employee_slug
        self.workspace_scope = workspace_scope
        self.workspace_name = workspace_name
        self.namespace = namespace
        self.provider_name = provider_name
        self.status = PENDING
        self.last_error = ""
        self.launched_at = at
        self.status_since = at
        self.last_active_at = at
        self.pod_name = ""
        self.cleaned = 0
        self.resume_estimate_seconds = 0

    # -- guards ----------------------------------------------------------------------------

    def _check(self, move: str) -> None:
        if (self.status, move) not in TRANSITIONS:
            raise WorkspaceStateConflict(
                f"Workspace {self.workspace_scope!r} is {self.status}; {move} is not allowed from there."
            )

    # -- launch (user) -----------------------------------------------------------------------

    def launch(self, at: str, resume_estimate_seconds: int) -> bool:
        """Re-queues from ``error``/``suspended``; a live workspace is only marked used.

        Answers whether the lease was re-queued. While a release is under way, 409.
        """
        if self.status in LIVE:
            self._reconnected(at=at)
            return False
        self._check("launch")
        # Resuming a stopped workspace takes about 90 s (Limits); from error it is a fresh start.
        estimate = resume_estimate_seconds if self.status == SUSPENDED else 0
        self._requeued(at=at, previous_status=self.status, resume_estimate_seconds=estimate)
        return True

    def mark_active(self, at: str) -> bool:
        """Use of a ready workspace (its model traffic through the meter) keeps it from being
        auto-stopped as idle; answers whether it was recorded."""
        if self.status != READY:
            return False
        self._reconnected(at=at)
        return True

    def request_release(self, at: str, requested_by: str) -> None:
        self._check("release")
        self._release_requested(at=at, requested_by=requested_by)

    # -- controller --------------------------------------------------------------------------

    def pick_up(self, at: str, controller_id: str) -> None:
        self._check("pick_up")
        self._provisioning_started(at=at, controller_id=controller_id)

    def provisioned(self, at: str, pod_name: str, volume_paths: list[str]) -> None:
        self._check("provisioned")
        self._provisioned(at=at, pod_name=pod_name, volume_paths=volume_paths)

    def fail(self, at: str, last_error: str, *, stale: bool = False) -> None:
        self._check("fail")
        self._failed(at=at, last_error=last_error or "provisioning failed", stale=stale)

    def begin_release(self, at: str, controller_id: str) -> None:
        self._check("begin_release")
        self._release_started(at=at, controller_id=controller_id)

    def stopped(self, at: str) -> None:
        self._check("stopped")
        self._suspended(at=at, reason="released")

    def auto_stop(self, at: str) -> None:
        self._check("auto_stop")
        self._suspended(at=at, reason="idle")

    def siblings_cleaned(self, at: str, removed: list[str]) -> None:
        if self.status != READY:
            raise WorkspaceStateConflict(f"Workspace {self.workspace_scope!r} is {self.status}, not ready.")
        if removed:
            self._siblings_cleaned(at=at, removed=removed)

    # -- recorded facts (no clock, no I/O: they run again on every replay) ---------------------

    @event(Requeued)
    def _requeued(self, at: str, previous_status: str, resume_estimate_seconds: int) -> None:
        self.status, self.status_since, self.last_active_at = PENDING, at, at
        self.last_error = ""
        self.pod_name = ""
        self.resume_estimate_seconds = resume_estimate_seconds

    @event(Reconnected)
    def _reconnected(self, at: str) -> None:
        self.last_active_at = at

    @event(ProvisioningStarted)
    def _provisioning_started(self, at: str, controller_id: str) -> None:
        self.status, self.status_since = PROVISIONING, at

    @event(Provisioned)
    def _provisioned(self, at: str, pod_name: str, volume_paths: list[str]) -> None:
        self.status, self.status_since, self.last_active_at = READY, at, at
        self.pod_name = pod_name
        self.resume_estimate_seconds = 0

    @event(Failed)
    def _failed(self, at: str, last_error: str, stale: bool) -> None:
        self.status, self.status_since = ERROR, at
        self.last_error = last_error

    @event(ReleaseRequested)
    def _release_requested(self, at: str, requested_by: str) -> None:
        self.status, self.status_since = RELEASE_REQUESTED, at

    @event(ReleaseStarted)
    def _release_started(self, at: str, controller_id: str) -> None:
        self.status, self.status_since = RELEASING, at

    @event(Suspended)
    def _suspended(self, at: str, reason: str) -> None:
        self.status, self.status_since = SUSPENDED, at
        self.pod_name = ""

    @event(SiblingsCleaned)
    def _siblings_cleaned(self, at: str, removed: list[str]) -> None:
        self.cleaned += len(removed)

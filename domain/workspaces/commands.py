"""WorkspaceCommands: launch, release and the controller's moves, saved as events.

Controller moves are claims under optimistic concurrency: each loads the workspace, checks
the table's guard and saves at the next version. When several controllers race, one save
wins; the others see a conflict (or, on reload, a state the move no longer fits) and
answer ``None`` — nobody moves a workspace twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError

from domain.shared.access import ProjectGrants, Subject
from domain.shared.errors import Conflict, NotFound
from domain.shared.event_store import EventStore
from domain.workspaces import policies
from domain.workspaces.workspace import DevWorkspace, WorkspaceStateConflict

ACTIVITY_EVERY_SECONDS = 60.0  # model traffic marks a workspace used at most once a minute


def workspace_not_found(scope: str) -> NotFound:
    return NotFound(f"No developer workspace {scope!r} of yours.", code="dev_workspace_not_found")


class WorkspaceCommands:
    """Developer workspace leases over the shared event store."""

    def __init__(
        self,
        store: EventStore,
        *,
        clock: Callable[[], str],
        proxy_client_key: Callable[[], str] = lambda: "",
    ) -> None:
        self.store = store
        self.clock = clock
        self.proxy_client_key = proxy_client_key
        self._active: dict[tuple[str, str], str] = {}  # last recorded use, per workspace

    # -- user ------------------------------------------------------------------------------

    def launch(
        self,
        subject: Subject,
        grants: ProjectGrants,
        *,
        tenant: str,
        repository_key: str,
        branch: str,
    ) -> DevWorkspace:
        """Records the lease (first launch), re-queues it (from error/suspended) or marks it used.

        Access first (Authentication §7), then the model-proxy client key (Errors §7): without
        it no material can be made, so no workspace is produced.
        """
        policies.require_workspace_role(subject, grants)
        if not self.proxy_client_key():
            # The deployment lacks a setting: no retry helps, so not a 503 (C19 is for what
            # cannot be reached), and the caller's own request is not at fault (not a 4xx of
            # its input): the service's current state refuses it (409).
            raise Conflict(
                "The model-proxy client key (SQUADOPS_MODEL_PROXY_CLIENT_KEY) is not configured; "
                "no workspace is produced with only a base URL.",
                code="dev_workspace_proxy_client_token_missing",
            )
        employee = subject.subject_key.lower()
        project = grants.project_slug
        digest = policies.workspace_hash(tenant, project, repository_key, branch, employee)
        scope = policies.workspace_scope(project, employee, digest)

        def command() -> DevWorkspace:
            now = self.clock()
            workspace = self.store.get_or_none(policies.workspace_id(tenant, scope))
            if workspace is None:
                workspace = DevWorkspace(
                    at=now,
                    tenant=tenant,
                    project_slug=project,
                    repository_key=repository_key,
                    branch=branch,
                    employee=employee,
                    employee_slug=policies.employee_slug(employee),
                    workspace_scope=scope,
                    workspace_name=f"{policies.slug(project)}-{policies.slug(repository_key)}-{policies.slug(branch)}",
                    namespace=policies.namespace(tenant, project, employee, digest),
                    provider_name=policies.PROVIDER_NAME,
                )
            else:
                workspace.launch(now, policies.RESUME_ESTIMATE_SECONDS)
            self.store.save(workspace)
            return workspace

        return self.store.retrying(command)

    def own(self, tenant: str, scope: str, employee: str) -> DevWorkspace:
        """The caller's own workspace; another employee's is as absent as a missing one."""
        workspace = self.get(tenant, scope)
        if workspace is None or workspace.employee != employee.lower():
            raise workspace_not_found(scope)
        return workspace

    def release(self, tenant: str, scope: str, employee: str) -> DevWorkspace:
        """DELETE: the owner's ready workspace goes to ``release_requested`` (else 409)."""

        def command() -> DevWorkspace:
            workspace = self.own(tenant, scope, employee)
            workspace.request_release(self.clock(), employee.lower())
            self.store.save(workspace)
            return workspace

        return self.store.retrying(command)

    def mark_active(self, tenant: str, scope: str, *, every_seconds: float = ACTIVITY_EVERY_SECONDS) -> bool:
        """Records use of a ready workspace (a metered model call), at most once per
        ``every_seconds`` per workspace: what keeps it from the idle auto-stop."""
        now = self.clock()
        seen = self._active.get((tenant, scope))
        if seen and policies.seconds_between(seen, now) < every_seconds:
            return False
        workspace = self.get(tenant, scope)
        if workspace is None:
            return False
        if policies.seconds_between(workspace.last_active_at, now) < every_seconds:
            self._active[(tenant, scope)] = workspace.last_active_at
            return False
        try:
            if not workspace.mark_active(now):
                return False
            self.store.save(workspace)
        except (RecordConflictError, IntegrityError):  # another request recorded it
            return False
        self._active[(tenant, scope)] = now
        return True

    def get(self, tenant: str, scope: str) -> DevWorkspace | None:
        if not scope or len(scope) > 128:
            return None
        return self.store.get_or_none(policies.workspace_id(tenant, scope))

    # -- controller ------------------------------------------------------------------------

    def claim(self, aggregate_id: str, move: Callable[[DevWorkspace], Any]) -> DevWorkspace | None:
        """Applies one controller move and saves it; ``None`` when another controller won."""
        workspace = self.store.get_or_none(aggregate_id)
        if workspace is None:
            return None
        try:
            move(workspace)
            self.store.save(workspace)
        except (WorkspaceStateConflict, RecordConflictError, IntegrityError):
            return None
        return workspace

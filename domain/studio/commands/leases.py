"""Execution workspace leases: slots taken and given back as sessions start and end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.shared.clock import shift
from domain.shared.event_store import EventStore
from domain.shared.ids import derived_id, lease_key
from domain.shared.loading import Loader
from domain.studio.lease import (
    DEFAULT_MAX_SLOTS,
    RESUME_ESTIMATE_SECONDS,
    SUSPEND_AFTER_SECONDS,
    WARM_SECONDS,
    WorkspaceLease,
)
from domain.studio.run import Run
from domain.studio.session import AgentSession


def handoff_target(run: Run, agent_id: str) -> str:
    """``repo@branch`` the agent's work lands on (its lane, else the assembly repository)."""
    bindings = {b["repository_key"]: b for b in run.project_facts.get("repository_bindings", [])}
    binding = bindings.get(agent_id) or next(
        (b for b in bindings.values() if b.get("repository_type") == "assembly"), None
    )
    if not binding or not binding.get("vcs_repo_slug"):
        return ""
    return f"{binding['vcs_repo_slug']}@{binding.get('default_branch') or 'main'}"


def recreate_once(run: Any, lease: WorkspaceLease, reason: str, at: str) -> bool:
    """Recreates a missing workspace through the shared registry; answers whether it did."""
    return lease.recreate(
        reason=reason,
        provider_workspace_id=derived_id(
            "sbx", run.tenant, run.project_slug, lease.workspace_name, lease.recreations + 1
        ),
        at=at,
    )


@dataclass(eq=False)
class LeaseCommands:
    """A project's shared workspace leases: provisioned on first use, slots taken and given back.

    Nothing here saves: the caller saves the lease with the command's other aggregates.
    """

    store: EventStore

    def lease(self, run: Run, workspace_name: str, at: str, load: Loader | None = None) -> WorkspaceLease:
        """The project's workspace lease, provisioned on first use."""
        key = lease_key(run.tenant, run.project_slug, workspace_name)
        found = (load or self.store.get_or_none)(key)
        if found is not None:
            return found
        return WorkspaceLease(
            tenant=run.tenant,
            project_slug=run.project_slug,
            workspace_name=workspace_name,
            provider="sandbox",
            namespace=f"squadops-{run.tenant}-{run.project_slug}",
            target_branch="main",
            workspace_scope="project_shared",
            max_active_slots=DEFAULT_MAX_SLOTS,
            resume_estimate_seconds=RESUME_ESTIMATE_SECONDS,
            provider_workspace_id=derived_id("sbx", run.tenant, run.project_slug, workspace_name, 0),
            at=at,
        )

    def take_slot(self, run: Run, session: AgentSession, lease: WorkspaceLease, at: str) -> None:
        lease.acquire_slot(
            run_id=run.run_id,
            session_id=session.session_id,
            agent_id=session.agent_id,
            handoff_target=handoff_target(run, session.agent_id),
            recovery_reason=session.last_restart_reason,
            at=at,
            warm_until_at=shift(at, WARM_SECONDS),
        )

    def give_back_slot(
        self, run: Run, session: AgentSession, reason: str, at: str, load: Loader | None = None
    ) -> WorkspaceLease | None:
        """Releases the session's slot; answers the lease when it changed."""
        if not session.workspace_name:
            return None
        lease = (load or self.store.get_or_none)(lease_key(run.tenant, run.project_slug, session.workspace_name))
        if lease is None or session.session_id not in lease.slots:
            return None
        lease.release_slot(
            session_id=session.session_id,
            reason=reason,
            at=at,
            suspend_after_at=shift(at, SUSPEND_AFTER_SECONDS),
        )
        return lease

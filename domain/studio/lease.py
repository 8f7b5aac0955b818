"""The WorkspaceLease aggregate: a project's shared sandbox workspace and its slots.

Workspaces are isolated per project. Sessions of the project's runs take an execution
slot when their process starts and give it back when they end; an empty workspace stays
warm for a while, then suspends (resuming takes about ``resume_estimate_seconds``).
A workspace whose sandbox disappeared is recreated once through the shared workspace
registry; its slot bindings survive as stale bindings until their sessions start again.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.shared.base import Aggregate, stored_topic
from domain.shared.errors import Conflict
from domain.shared.ids import lease_key
from domain.studio.events import (
    LeaseProvisioned,
    LeaseRecreated,
    LeaseStatusChanged,
    LeaseVerified,
    SlotAcquired,
    SlotReleased,
)

READY = "ready"
PROVISIONING = "provisioning"
SUSPENDED = "suspended"
MISSING = "missing"
STOPPED = "stopped"
WORKSPACE_STATUSES = (PROVISIONING, READY, SUSPENDED, MISSING, STOPPED)

DEFAULT_MAX_SLOTS = 24
WARM_SECONDS = 600
SUSPEND_AFTER_SECONDS = 1800
RESUME_ESTIMATE_SECONDS = 90


class SlotsExhausted(Conflict):
    code = "execution_slots_exhausted"


class WorkspaceLease(Aggregate):
    """A project's shared execution workspace (one aggregate per workspace)."""

    @staticmethod
    def create_id(tenant: str, project_slug: str, workspace_name: str) -> str:
        return lease_key(tenant, project_slug, workspace_name)

    @event(LeaseProvisioned)
    def __init__(
        self,
        *,
        tenant: str,
        project_slug: str,
        workspace_name: str,
        provider: str,
        namespace: str,
        target_branch: str,
        workspace_scope: str,
        max_active_slots: int,
        resume_estimate_seconds: int,
        provider_workspace_id: str,
        at: str,
    ) -> None:
        self.tenant = tenant
        self.project_slug = project_slug
        self.workspace_name = workspace_name
        self.max_active_slots = max_active_slots
        self.provider_workspace_id = provider_workspace_id
        self.status = READY
        self.slots: dict[str, dict[str, Any]] = {}
        self.recreations = 0
        self.idle_since = at
        self.last_verified_at = ""

    @property
    def active_slot_count(self) -> int:
        return sum(1 for s in self.slots.values() if not s.get("stale"))

    def acquire_slot(self, *, session_id: str, **slot: Any) -> None:
        """Binds ``session_id`` to a free slot (the fields of ``SlotAcquired`` but ``reused``)."""
        binding = self.slots.get(session_id)
        if binding is not None and not binding.get("stale"):
            return  # the session holds its slot already (a process restart reuses it)
        if binding is None and self.active_slot_count >= self.max_active_slots:
            raise SlotsExhausted(
                f"Workspace {self.workspace_name} has no free execution slot "
                f"({self.active_slot_count}/{self.max_active_slots})."
            )
        self._slot_acquired(session_id=session_id, reused=binding is not None, **slot)

    @event(SlotAcquired)
    def _slot_acquired(
        self,
        run_id: str,
        session_id: str,
        agent_id: str,
        handoff_target: str,
        recovery_reason: str,
        reused: bool,
        at: str,
        warm_until_at: str,
    ) -> None:
        self.slots[session_id] = {"run_id": run_id, "agent_id": agent_id, "stale": False}
        # A start wakes a suspended workspace; a missing provider binding stays missing
        # (sessions already placed keep running) until it is recreated.
        if self.status == SUSPENDED:
            self.status = READY
        self.idle_since = ""

    def release_slot(self, *, session_id: str, reason: str, at: str, suspend_after_at: str) -> None:
        if session_id not in self.slots:
            return
        self._slot_released(session_id=session_id, reason=reason, at=at, suspend_after_at=suspend_after_at)

    @event(SlotReleased)
    def _slot_released(self, session_id: str, reason: str, at: str, suspend_after_at: str) -> None:
        self.slots.pop(session_id, None)
        if not self.slots:
            self.idle_since = at

    def mark_missing(self, *, reason: str, at: str) -> None:
        """The sandbox behind the workspace is gone (seen by a session's runner)."""
        if self.status == MISSING:
            return
        self._status_changed(status=MISSING, reason=reason, at=at)

    def suspend(self, *, at: str) -> None:
        if self.status != READY or self.slots:
            return
        self._status_changed(status=SUSPENDED, reason="inactivity", at=at)

    @event(LeaseStatusChanged)
    def _status_changed(self, status: str, reason: str, at: str) -> None:
        self.status = status

    def recreate(self, *, reason: str, provider_workspace_id: str, at: str) -> bool:
        """Recreates a missing workspace once; answers whether it did.

        Slot bindings that still point at the old provider id are kept as stale bindings
        in the recreated workspace until their sessions start again.
        """
        if self.status != MISSING:
            return False
        self._recreated(
            reason=reason,
            previous_provider_workspace_id=self.provider_workspace_id,
            provider_workspace_id=provider_workspace_id,
            stale_sessions=sorted(self.slots),
            at=at,
        )
        return True

    @event(LeaseRecreated)
    def _recreated(
        self,
        reason: str,
        previous_provider_workspace_id: str,
        provider_workspace_id: str,
        stale_sessions: list[str],
        at: str,
    ) -> None:
        self.provider_workspace_id = provider_workspace_id
        self.status = READY
        self.recreations += 1
        for session_id in stale_sessions:
            if session_id in self.slots:
                self.slots[session_id]["stale"] = True

    def record_probe(self, *, live_status: str, at: str) -> None:
        """What a live probe of the sandbox saw; it wins over the persisted status."""
        if live_status not in ("connected", "pending", "stopped", "missing", "unknown"):
            raise Conflict(f"Unknown live status {live_status!r}.", code="invalid_live_status")
        self._verified(live_status=live_status, at=at)

    @event(LeaseVerified)
    def _verified(self, live_status: str, at: str) -> None:
        self.last_verified_at = at


stored_topic(WorkspaceLease, "domain.lease:WorkspaceLease")  # its module has moved since the log began

"""Execution workspace mirror: each project's workspace leases, as the feed shows them.

The projector keeps one document per project (``mirror/<tenant>/<project>``) folded from
WorkspaceLease events; ``compose_mirror`` turns it into the feed's surface for one run,
enriching each workspace with what correlates with that run's sessions. Only leases of
the project are ever in its document (per-project isolation).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from domain.studio import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope

LIVE_BY_STATUS = {
    "ready": "connected",
    "provisioning": "pending",
    "pending": "pending",
    "suspended": "stopped",
    "stopped": "stopped",
    "missing": "missing",
}


MIRROR_NAME = "workspace_mirror"


def mirror_doc_key(tenant: str, project_slug: str) -> str:
    return f"mirror/{tenant}/{project_slug}"


def live_status(workspace: dict[str, Any]) -> str:
    """A live probe wins; otherwise derived from the persisted status."""
    probe = workspace.get("probe_live_status", "")
    if probe:
        return probe
    return LIVE_BY_STATUS.get(workspace.get("workspace_status", ""), "unknown")


class MirrorProjector(Projector):
    name = MIRROR_NAME

    @handles(ev.LeaseProvisioned)
    def lease_provisioned(self, e: ev.LeaseProvisioned, env: Envelope, docs: Docs) -> None:
        doc = self._doc(env, docs)
        name = env.scope[3]
        doc["workspaces"][name] = {
            "workspace_name": name,
            "provider": e.provider,
            "namespace": e.namespace,
            "target_branch": e.target_branch,
            "workspace_scope": e.workspace_scope,
            "workspace_status": "ready",
            "probe_live_status": "",
            "active_slot_count": 0,
            "max_active_slots": e.max_active_slots,
            "warm_until_at": "",
            "suspend_after_at": "",
            "last_verified_at": "",
            "resume_estimate_seconds": 0,
            "default_resume_estimate_seconds": e.resume_estimate_seconds,
            "provider_workspace_id": e.provider_workspace_id,
            "recreations": 0,
            "slots": {},
            "history": {},
        }
        self._store(env, docs, doc)

    @handles(ev.SlotAcquired)
    def slot_acquired(self, e: ev.SlotAcquired, env: Envelope, docs: Docs) -> None:
        for workspace in self._workspace(env, docs):
            workspace["slots"][e.session_id] = {
                "run_id": e.run_id,
                "agent_id": e.agent_id,
                "handoff_target": e.handoff_target,
                "stale": False,
            }
            seen = _history(workspace, e.session_id)
            seen["starts"] += 1
            seen["handoff_target"] = e.handoff_target
            if e.recovery_reason:
                seen["recovery_reason"] = e.recovery_reason
            if workspace["workspace_status"] == "suspended":
                workspace["workspace_status"] = "ready"
            workspace["warm_until_at"] = max(workspace["warm_until_at"], e.warm_until_at)
            workspace["resume_estimate_seconds"] = 0

    @handles(ev.SlotReleased)
    def slot_released(self, e: ev.SlotReleased, env: Envelope, docs: Docs) -> None:
        for workspace in self._workspace(env, docs):
            workspace["slots"].pop(e.session_id, None)
            if not workspace["slots"]:
                workspace["suspend_after_at"] = e.suspend_after_at

    @handles(ev.LeaseStatusChanged)
    def lease_status_changed(self, e: ev.LeaseStatusChanged, env: Envelope, docs: Docs) -> None:
        for workspace in self._workspace(env, docs):
            workspace["workspace_status"] = e.status
            workspace["probe_live_status"] = ""
            if e.status == "suspended":
                workspace["resume_estimate_seconds"] = workspace["default_resume_estimate_seconds"]
            if e.status == "missing":
                for session_id in workspace["slots"]:
                    _history(workspace, session_id)["recovery_reason"] = "sandbox_missing"

    @handles(ev.LeaseRecreated)
    def lease_recreated(self, e: ev.LeaseRecreated, env: Envelope, docs: Docs) -> None:
        for workspace in self._workspace(env, docs):
            workspace["workspace_status"] = "ready"
            workspace["probe_live_status"] = ""
            workspace["recreations"] += 1
            workspace["provider_workspace_id"] = e.provider_workspace_id
            for session_id in e.stale_sessions:
                if session_id in workspace["slots"]:
                    workspace["slots"][session_id]["stale"] = True
                    _history(workspace, session_id)["recovery_reason"] = "sandbox_recreated"

    @handles(ev.LeaseVerified)
    def lease_verified(self, e: ev.LeaseVerified, env: Envelope, docs: Docs) -> None:
        for workspace in self._workspace(env, docs):
            workspace["probe_live_status"] = e.live_status
            workspace["last_verified_at"] = env.at

    @staticmethod
    def _doc(env: Envelope, docs: Docs) -> dict[str, Any]:
        _, tenant, project_slug = env.scope[:3]
        return docs.get(mirror_doc_key(tenant, project_slug)) or {"project_slug": project_slug, "workspaces": {}}

    def _workspace(self, env: Envelope, docs: Docs) -> Iterator[dict[str, Any]]:
        """The event's workspace, once, if the mirror has it; the mirror is stored after the
        loop's body changed it (an event of a workspace never provisioned changes nothing)."""
        doc = self._doc(env, docs)
        workspace = doc["workspaces"].get(env.scope[3])
        if workspace is not None:
            yield workspace
            self._store(env, docs, doc)

    @staticmethod
    def _store(env: Envelope, docs: Docs, doc: dict[str, Any]) -> None:
        _, tenant, project_slug, workspace_name = env.scope[:4]
        workspace = doc["workspaces"][workspace_name]
        workspace["active_slot_count"] = sum(1 for s in workspace["slots"].values() if not s["stale"])
        docs.put(mirror_doc_key(tenant, project_slug), doc, partition=f"mirrors/{tenant}", sort_key=project_slug)


def _history(workspace: dict[str, Any], session_id: str) -> dict[str, Any]:
    """What the mirror remembers of a session that held a slot of ``workspace``."""
    return workspace["history"].setdefault(session_id, {"starts": 0, "recovery_reason": ""})


def default_mirror(project_slug: str) -> dict[str, Any]:
    """The surface of a project with no workspace (or whose mirror document is broken)."""
    return compose_mirror(None, [], project_slug)


def compose_mirror(doc: dict[str, Any] | None, sessions: list[dict[str, Any]], project_slug: str) -> dict[str, Any]:
    """The feed's ``execution_workspace_mirror`` for one run of ``project_slug``."""
    workspaces = []
    run_sessions = {s.get("session_id", ""): s for s in sessions}
    for name in sorted((doc or {}).get("workspaces", {})):
        w = doc["workspaces"][name] if doc else {}
        correlated = [sid for sid in w["history"] if sid in run_sessions]
        reuse = recovery_reason = target = ""
        if correlated:
            starts = sum(w["history"][sid]["starts"] for sid in correlated)
            reuse = "reused" if starts > 1 or len(w["history"]) > len(correlated) else "fresh"
            reasons = [w["history"][sid]["recovery_reason"] for sid in correlated if w["history"][sid]["recovery_reason"]]
            recovery_reason = reasons[-1] if reasons else ""
            targets = [w["history"][sid].get("handoff_target", "") for sid in correlated]
            targets = [t for t in targets if t]
            target = targets[0] if targets else ""
        workspaces.append(
            {
                "workspace_name": w["workspace_name"],
                "provider": w["provider"],
                "namespace": w["namespace"],
                "target_branch": w["target_branch"],
                "workspace_scope": w["workspace_scope"],
                "workspace_status": w["workspace_status"],
                "live_status": live_status(w),
                "active_slot_count": w["active_slot_count"],
                "max_active_slots": w["max_active_slots"],
                "warm_until_at": w["warm_until_at"],
                "suspend_after_at": w["suspend_after_at"],
                "last_verified_at": w["last_verified_at"],
                "resume_estimate_seconds": w["resume_estimate_seconds"],
                "reuse": reuse,
                "recovery_reason": recovery_reason,
                "handoff_target": target,
            }
        )
    return {
        "project_slug": project_slug,
        "isolation": "per_project",
        "workspace_count": len(workspaces),
        "workspaces": workspaces,
    }

"""Live events: the run's events as the log dock and live-channel subscribers see them.

One pure mapping from a stored event to a ``live_events[]`` item (Log dock fields), used
by the feed's log dock and by the live fan-out alike, so both always agree. Per-tick
reports are not live events (they have their own endpoint).
"""

from __future__ import annotations

from typing import Any

from domain.shared.metadata import snake
from domain.studio.policies.pixel import pixel_state
from projections.engine.envelope import Envelope

# event kind -> (event_kind, pixel state shown with it, or "" when it does not move the pixel)
LIVE_KINDS: dict[str, tuple[str, str]] = {
    "Run.Launched": ("run", ""),
    "Run.ExecutionRequested": ("run", ""),
    "Run.ExecutionStarted": ("run", ""),
    "Run.HandoffRecorded": ("handoff", ""),
    "Run.PreviewShared": ("delivery", ""),
    "Run.ControlRecorded": ("control", ""),
    "Run.Completed": ("run", ""),
    "Run.CleanedUp": ("run", ""),
    "AgentSession.Opened": ("session", "idle"),
    "AgentSession.ProcessStarted": ("session", "waiting"),
    "AgentSession.ProcessRestarted": ("session", "waiting"),
    "AgentSession.ControllerActionObserved": ("controller", "waiting"),
    "AgentSession.ToolCalled": ("tool", "moving"),
    "AgentSession.AssistantMessage": ("message", "active"),
    "AgentSession.Blocked": ("blocker", "blocked"),
    "AgentSession.Unblocked": ("blocker", "active"),
    "AgentSession.HandedOff": ("handoff", "awaiting_reply"),
    "AgentSession.PullRequestOpened": ("delivery", "active"),
    "AgentSession.Completed": ("session", "idle"),
    "AgentSession.Stopped": ("session", "resolved"),
    "AgentSession.Paused": ("control", "waiting"),
    "AgentSession.Resumed": ("control", "active"),
    "AgentSession.ControlApplied": ("control", ""),
    "AgentSession.MessageDelivered": ("message", "in_conversation"),
    "AgentSession.ProcessSwitched": ("control", ""),
    "AgentSession.TaskCardChanged": ("task_card", ""),
    "AgentSession.WorkspaceRestarted": ("session", "waiting"),
    "AgentSession.StartFailed": ("session", ""),
    "AgentSession.SelfHealed": ("session", "waiting"),
    "AgentSession.RequestQueued": ("control", ""),
}


def _summary(env: Envelope) -> str:
    d, name = env.data, env.name
    if name == "ToolCalled":
        first = " (first tool)" if d.get("first") else ""
        return f"{d.get('tool_name', '')}{first}: {d.get('summary', '')}".strip()
    if name == "ControllerActionObserved":
        label = d.get("evidence_label", "")
        return f"controller action {d.get('action', '')}" + (f" [{label}]" if label else "")
    if name == "Blocked":
        return f"{d.get('code', '')}: {d.get('message', '')}"
    if name == "Unblocked":
        return f"{d.get('code', '')} cleared: {d.get('resolution', '')}"
    if name in ("HandedOff", "HandoffRecorded"):
        return str(d.get("reason", ""))
    if name == "PullRequestOpened":
        return f"pull request {d.get('pr_url', '')}"
    if name == "AssistantMessage":
        return str(d.get("text", ""))[:500]
    if name == "MessageDelivered":
        return str(d.get("message", ""))[:500]
    if name == "Completed" and env.aggregate_type == "AgentSession":
        result = d.get("result", {})
        return str(result.get("result", "session completed"))[:500]
    if name in ("ControlRecorded", "ControlApplied"):
        return f"{d.get('verb', '')} by {d.get('actor', '')}".strip()
    if name == "Launched":
        return f"run launched from {d.get('template_id', '')} for {d.get('project_slug', '')}"
    if name == "ExecutionRequested":
        return "follow-up kick" if d.get("follow_up") else "execution scheduled"
    if name == "Stopped":
        return str(d.get("reason", "stopped"))
    if name == "StartFailed":
        return f"start failed in {d.get('workspace_name', '')}: {d.get('error', '')}"
    if name == "SelfHealed":
        return f"self-heal on {d.get('signal', '')}: stale workspace identity cleared, fresh launch queued"
    if name == "RequestQueued":
        wake = d.get("wake_target", "")
        return (f"request queued, waking {wake}" if wake else "request queued") + (
            f": {d.get('message', '')}" if d.get("message") else ""
        )
    return snake(name).replace("_", " ")


def live_event(env: Envelope) -> dict[str, Any] | None:
    """The live event for ``env``, or None when it is not one (ticks, projects, leases)."""
    mapped = LIVE_KINDS.get(env.kind)
    if mapped is None:
        return None
    event_kind, pixel = mapped
    d = env.data
    agent_id, session_id = env.agent_id, env.session_id
    if env.kind == "Run.HandoffRecorded":
        agent_id = str(d.get("from_agent_id", ""))
    if env.name == "Unblocked":
        pixel = pixel_state(str(d.get("resume_status", "working")))
    return {
        "event_id": env.event_id,
        "run_id": env.run_id,
        "agent_id": agent_id,
        "session_id": session_id,
        "event_kind": event_kind,
        "event_name": snake(env.name),
        "route": str(d.get("route", "")),
        "tool_name": str(d.get("tool_name", "") or d.get("action", "")),
        "summary": _summary(env),
        "pixel_state": pixel,
        "target_agent_id": str(d.get("target_agent_id", "") or d.get("to_agent_id", "")),
        "thread_id": str(d.get("thread_id", "")),
        "task_card_id": str(d.get("task_card_id", "")),
        "created_at": env.at,
    }

"""Live events: the run's events as the log dock and live-channel subscribers see them.

One pure mapping from a stored event to a ``live_events[]`` item (Log dock fields), used
by the feed's log dock and by the live fan-out alike, so both always agree. Per-tick
reports are not live events (they have their own endpoint). The publication gate's steps
are live events of the studio run they publish for (``projections.studio.gate_steps``).
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from domain.shared.metadata import snake
from domain.studio import events as ev
from domain.studio.policies.pixel import pixel_state
from projections.engine.envelope import Envelope
from projections.studio import gate_steps

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
    **{kind: (gate_steps.EVENT_KIND, "") for kind in gate_steps.KINDS},
}


@cache
def event_name(name: str) -> str:
    """``ToolCalled`` -> ``tool_called`` (the few event names, converted once each)."""
    return snake(name)


def live_run_id(env: Envelope) -> str:
    """The run whose live event ``env`` is: its own, or the one a gate step publishes for."""
    if env.aggregate_type == "GateThread":
        return gate_steps.run_of(env)
    return env.run_id


def _summary(env: Envelope) -> str:
    if env.aggregate_type == "GateThread":
        return gate_steps.summary(env.event)
    match env.event:
        case ev.ToolCalled(tool_name=tool, first=first, summary=summary):
            return f"{tool}{' (first tool)' if first else ''}: {summary}".strip()
        case ev.ControllerActionObserved(action=action, evidence_label=label):
            return f"controller action {action}" + (f" [{label}]" if label else "")
        case ev.Blocked(code=code, message=message):
            return f"{code}: {message}"
        case ev.Unblocked(code=code, resolution=resolution):
            return f"{code} cleared: {resolution}"
        case ev.HandedOff(reason=reason) | ev.HandoffRecorded(reason=reason):
            return reason
        case ev.PullRequestOpened(pr_url=pr_url):
            return f"pull request {pr_url}"
        case ev.AssistantMessage(text=text):
            return text[:500]
        case ev.MessageDelivered(message=message):
            return message[:500]
        case ev.SessionCompleted(result=result):
            return str((result or {}).get("result", "session completed"))[:500]
        case ev.ControlRecorded(verb=verb, actor=actor) | ev.ControlApplied(verb=verb, actor=actor):
            return f"{verb} by {actor}".strip()
        case ev.RunLaunched(template_id=template_id, project_slug=project_slug):
            return f"run launched from {template_id} for {project_slug}"
        case ev.ExecutionRequested(follow_up=follow_up):
            return "follow-up kick" if follow_up else "execution scheduled"
        case ev.Stopped(reason=reason):
            return reason
        case ev.StartFailed(workspace_name=workspace, error=error):
            return f"start failed in {workspace}: {error}"
        case ev.SelfHealed(signal=signal):
            return f"self-heal on {signal}: stale workspace identity cleared, fresh launch queued"
        case ev.RequestQueued(wake_target=wake, message=message):
            return (f"request queued, waking {wake}" if wake else "request queued") + (f": {message}" if message else "")
    return event_name(env.name).replace("_", " ")


class _Fields(NamedTuple):
    """What a live event shows of its payload besides the summary."""

    route: str = ""
    tool_name: str = ""
    target_agent_id: str = ""
    thread_id: str = ""
    task_card_id: str = ""


def _fields(event: object) -> _Fields:
    match event:
        case ev.ToolCalled(route=route, tool_name=tool):
            return _Fields(route=route, tool_name=tool)
        case ev.ControllerActionObserved(action=action):
            return _Fields(tool_name=action)
        case ev.HandedOff(target_agent_id=target, thread_id=thread_id):
            return _Fields(target_agent_id=target, thread_id=thread_id)
        case ev.HandoffRecorded(to_agent_id=target, thread_id=thread_id):
            return _Fields(target_agent_id=target, thread_id=thread_id)
        case ev.MessageDelivered(thread_id=thread_id):
            return _Fields(thread_id=thread_id)
        case ev.TaskCardChanged(task_card_id=card, action=action):
            return _Fields(tool_name=action, task_card_id=card)
    return _Fields()


def live_event(env: Envelope) -> dict[str, Any] | None:
    """The live event for ``env``, or None when it is not one (ticks, projects, leases)."""
    mapped = LIVE_KINDS.get(env.kind)
    if mapped is None:
        return None
    run_id = live_run_id(env)
    if not run_id:
        return None
    event_kind, pixel = mapped
    e = env.event
    agent_id, session_id = env.agent_id, env.session_id
    if isinstance(e, ev.HandoffRecorded):
        agent_id = e.from_agent_id
    if isinstance(e, ev.Unblocked):
        pixel = pixel_state(e.resume_status)
    fields = _fields(e)
    return {
        "event_id": env.event_id,
        "run_id": run_id,
        "agent_id": agent_id,
        "session_id": session_id,
        "event_kind": event_kind,
        "event_name": event_name(env.name),
        "route": fields.route,
        "tool_name": fields.tool_name,
        "summary": _summary(env),
        "pixel_state": pixel,
        "target_agent_id": fields.target_agent_id,
        "thread_id": fields.thread_id,
        "task_card_id": fields.task_card_id,
        "created_at": env.at,
    }

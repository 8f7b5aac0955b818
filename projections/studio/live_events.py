"""Live events: the run's events as the log dock and live-channel subscribers see them.

One pure mapping from a stored event to a ``live_events[]`` item (Log dock fields), used
by the feed's log dock and by the live fan-out alike, so both always agree. Per-tick
reports are not live events (they have their own endpoint). The publication gate's steps
are live events of the studio run they publish for (``projections.studio.gate_steps``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

from domain.shared.metadata import snake
from domain.studio import events as ev
from domain.studio.policies.pixel import pixel_state
from projections.engine.by_type import ByType
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
    "Run.ProcessAssigned": ("control", ""),
    "Run.CleanedUp": ("run", ""),
    "AgentSession.Opened": ("session", "idle"),
    "AgentSession.ProcessStarted": ("session", "waiting"),
    "AgentSession.ProcessRestarted": ("session", "waiting"),
    "AgentSession.ControllerActionObserved": ("controller", "waiting"),
    "AgentSession.ToolCalled": ("tool", "moving"),
    "AgentSession.ToolCallFailed": ("tool", ""),
    "AgentSession.ModelReported": ("session", ""),
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


# The summary of each event class (one dict lookup per event: ``projections.engine.by_type``);
# the others are summed up by their name.
SUMMARIES: ByType[Callable[[Any], str]] = ByType(
    {
        ev.ToolCalled: lambda e: f"{e.tool_name}{' (first tool)' if e.first else ''}: {e.summary}".strip(),
        ev.ToolCallFailed: lambda e: f"{e.tool_name} failed: {e.reason}",
        ev.ModelReported: lambda e: f"model {e.model}",
        ev.ProcessAssigned: lambda e: f"process assignment {e.target} -> "
        + "/".join(p for p in (e.provider, e.model, e.effort, e.speed) if p),
        ev.ControllerActionObserved: lambda e: f"controller action {e.action}"
        + (f" [{e.evidence_label}]" if e.evidence_label else ""),
        ev.Blocked: lambda e: f"{e.code}: {e.message}",
        ev.Unblocked: lambda e: f"{e.code} cleared: {e.resolution}",
        ev.HandedOff: lambda e: e.reason,
        ev.HandoffRecorded: lambda e: e.reason,
        ev.PullRequestOpened: lambda e: f"pull request {e.pr_url}" + (f" at {e.head_sha[:12]}" if e.head_sha else ""),
        ev.AssistantMessage: lambda e: e.text[:500],
        ev.MessageDelivered: lambda e: e.message[:500],
        ev.SessionCompleted: lambda e: str((e.result or {}).get("result", "session completed"))[:500],
        ev.ControlRecorded: lambda e: f"{e.verb} by {e.actor}".strip(),
        ev.ControlApplied: lambda e: f"{e.verb} by {e.actor}".strip(),
        ev.RunLaunched: lambda e: f"run launched from {e.template_id} for {e.project_slug}",
        ev.ExecutionRequested: lambda e: "follow-up kick" if e.follow_up else "execution scheduled",
        ev.Stopped: lambda e: e.reason,
        ev.StartFailed: lambda e: f"start failed in {e.workspace_name}: {e.error}",
        ev.SelfHealed: lambda e: f"self-heal on {e.signal}: stale workspace identity cleared, fresh launch queued",
        ev.RequestQueued: lambda e: (f"request queued, waking {e.wake_target}" if e.wake_target else "request queued")
        + (f": {e.message}" if e.message else ""),
    }
)


def _summary(env: Envelope) -> str:
    if env.aggregate_type == "GateThread":
        return gate_steps.summary(env.event)
    summary = SUMMARIES.get(env.event)
    if summary is not None:
        return summary(env.event)
    return event_name(env.name).replace("_", " ")


class _Fields(NamedTuple):
    """What a live event shows of its payload besides the summary."""

    route: str = ""
    tool_name: str = ""
    target_agent_id: str = ""
    thread_id: str = ""
    task_card_id: str = ""


NO_FIELDS = _Fields()
FIELDS: ByType[Callable[[Any], _Fields]] = ByType(
    {
        ev.ToolCalled: lambda e: _Fields(route=e.route, tool_name=e.tool_name),
        ev.ToolCallFailed: lambda e: _Fields(route=e.route, tool_name=e.tool_name),
        ev.ControllerActionObserved: lambda e: _Fields(tool_name=e.action),
        ev.HandedOff: lambda e: _Fields(target_agent_id=e.target_agent_id, thread_id=e.thread_id),
        ev.HandoffRecorded: lambda e: _Fields(target_agent_id=e.to_agent_id, thread_id=e.thread_id),
        ev.MessageDelivered: lambda e: _Fields(thread_id=e.thread_id),
        ev.TaskCardChanged: lambda e: _Fields(tool_name=e.action, task_card_id=e.task_card_id),
    }
)


def _fields(event: object) -> _Fields:
    fields = FIELDS.get(event)
    return NO_FIELDS if fields is None else fields(event)


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

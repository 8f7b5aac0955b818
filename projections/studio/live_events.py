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
from projections.engine.docs import Handlers, handles
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


class _Shown(NamedTuple):
    """What a live event shows of its payload."""

    summary: str
    route: str = ""
    tool_name: str = ""
    target_agent_id: str = ""
    thread_id: str = ""
    task_card_id: str = ""
    agent_id: str | None = None  # the agent it is of, when not the envelope's
    pixel: str | None = None  # the pixel state shown with it, when not its kind's
    result: dict[str, Any] | None = None  # a tool call's result, when it answered something


def _result(e: ev.ToolCalled | ev.ToolCallFailed) -> dict[str, Any] | None:
    """A tool call's kept result (none on a call that answered nothing, as in logs written before)."""
    if not e.result:
        return None
    return {"result": e.result, "result_size": e.result_size, "result_truncated": e.result_truncated}


def _named(env: Envelope) -> str:
    """An event summed up by its name (``TaskCardChanged`` -> ``task card changed``)."""
    return event_name(env.name).replace("_", " ")


class _Shows(Handlers):
    """What a live event shows, by its event's class: ``(e, env)`` -> ``_Shown``; an event
    of any other class is summed up by its name."""

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope) -> _Shown:
        return _Shown(f"run launched from {e.template_id} for {e.project_slug}")

    @handles(ev.ExecutionRequested)
    def execution_requested(self, e: ev.ExecutionRequested, env: Envelope) -> _Shown:
        return _Shown("follow-up kick" if e.follow_up else "execution scheduled")

    @handles(ev.HandoffRecorded)
    def handoff_recorded(self, e: ev.HandoffRecorded, env: Envelope) -> _Shown:
        return _Shown(e.reason, target_agent_id=e.to_agent_id, thread_id=e.thread_id, agent_id=e.from_agent_id)

    @handles(ev.ControlRecorded)
    def control_recorded(self, e: ev.ControlRecorded, env: Envelope) -> _Shown:
        return _Shown(f"{e.verb} by {e.actor}".strip())

    @handles(ev.ProcessAssigned)
    def process_assigned(self, e: ev.ProcessAssigned, env: Envelope) -> _Shown:
        return _Shown(f"process assignment {e.target} -> " + "/".join(p for p in (e.provider, e.model, e.effort, e.speed) if p))

    @handles(ev.ToolCalled)
    def tool_called(self, e: ev.ToolCalled, env: Envelope) -> _Shown:
        summary = f"{e.tool_name}{' (first tool)' if e.first else ''}: {e.summary}".strip()
        return _Shown(summary, route=e.route, tool_name=e.tool_name, result=_result(e))

    @handles(ev.ToolCallFailed)
    def tool_call_failed(self, e: ev.ToolCallFailed, env: Envelope) -> _Shown:
        return _Shown(f"{e.tool_name} failed: {e.reason}", route=e.route, tool_name=e.tool_name, result=_result(e))

    @handles(ev.ModelReported)
    def model_reported(self, e: ev.ModelReported, env: Envelope) -> _Shown:
        return _Shown(f"model {e.model}")

    @handles(ev.ControllerActionObserved)
    def controller_action_observed(self, e: ev.ControllerActionObserved, env: Envelope) -> _Shown:
        label = f" [{e.evidence_label}]" if e.evidence_label else ""
        return _Shown(f"controller action {e.action}{label}", tool_name=e.action)

    @handles(ev.Blocked)
    def blocked(self, e: ev.Blocked, env: Envelope) -> _Shown:
        return _Shown(f"{e.code}: {e.message}")

    @handles(ev.Unblocked)
    def unblocked(self, e: ev.Unblocked, env: Envelope) -> _Shown:
        return _Shown(f"{e.code} cleared: {e.resolution}", pixel=pixel_state(e.resume_status))

    @handles(ev.HandedOff)
    def handed_off(self, e: ev.HandedOff, env: Envelope) -> _Shown:
        return _Shown(e.reason, target_agent_id=e.target_agent_id, thread_id=e.thread_id)

    @handles(ev.PullRequestOpened)
    def pull_request_opened(self, e: ev.PullRequestOpened, env: Envelope) -> _Shown:
        return _Shown(f"pull request {e.reference}" + (f" at {e.head_sha[:12]}" if e.head_sha else ""))

    @handles(ev.AssistantMessage)
    def assistant_message(self, e: ev.AssistantMessage, env: Envelope) -> _Shown:
        return _Shown(e.text[:500])

    @handles(ev.MessageDelivered)
    def message_delivered(self, e: ev.MessageDelivered, env: Envelope) -> _Shown:
        return _Shown(e.message[:500], thread_id=e.thread_id)

    @handles(ev.SessionCompleted)
    def session_completed(self, e: ev.SessionCompleted, env: Envelope) -> _Shown:
        return _Shown(str((e.result or {}).get("result", "session completed"))[:500])

    @handles(ev.ControlApplied)
    def control_applied(self, e: ev.ControlApplied, env: Envelope) -> _Shown:
        return _Shown(f"{e.verb} by {e.actor}".strip())

    @handles(ev.Stopped)
    def stopped(self, e: ev.Stopped, env: Envelope) -> _Shown:
        return _Shown(e.reason)

    @handles(ev.StartFailed)
    def start_failed(self, e: ev.StartFailed, env: Envelope) -> _Shown:
        return _Shown(f"start failed in {e.workspace_name}: {e.error}")

    @handles(ev.SelfHealed)
    def self_healed(self, e: ev.SelfHealed, env: Envelope) -> _Shown:
        return _Shown(f"self-heal on {e.signal}: stale workspace identity cleared, fresh launch queued")

    @handles(ev.RequestQueued)
    def request_queued(self, e: ev.RequestQueued, env: Envelope) -> _Shown:
        queued = f"request queued, waking {e.wake_target}" if e.wake_target else "request queued"
        return _Shown(queued + (f": {e.message}" if e.message else ""))

    @handles(ev.TaskCardChanged)
    def task_card_changed(self, e: ev.TaskCardChanged, env: Envelope) -> _Shown:
        return _Shown(_named(env), tool_name=e.action, task_card_id=e.task_card_id)


SHOWS = _Shows()


def _shown(env: Envelope) -> _Shown:
    if env.aggregate_type == "GateThread":
        return _Shown(gate_steps.summary(env.event))
    show = SHOWS.handler(type(env.event))
    return _Shown(_named(env)) if show is None else show(SHOWS, env.event, env)


def live_event(env: Envelope) -> dict[str, Any] | None:
    """The live event for ``env``, or None when it is not one (ticks, projects, leases)."""
    mapped = LIVE_KINDS.get(env.kind)
    if mapped is None:
        return None
    run_id = live_run_id(env)
    if not run_id:
        return None
    event_kind, pixel = mapped
    shown = _shown(env)
    return {
        "event_id": env.event_id,
        "run_id": run_id,
        "agent_id": env.agent_id if shown.agent_id is None else shown.agent_id,
        "session_id": env.session_id,
        "event_kind": event_kind,
        "event_name": event_name(env.name),
        "route": shown.route,
        "tool_name": shown.tool_name,
        "summary": shown.summary,
        "pixel_state": pixel if shown.pixel is None else shown.pixel,
        "target_agent_id": shown.target_agent_id,
        "thread_id": shown.thread_id,
        "task_card_id": shown.task_card_id,
        "created_at": env.at,
        **(shown.result or {}),
    }

"""Log dock: what a run's events show in it, and the read model that keeps it, newest first.

Each event shows in up to two lanes, both answered by the one handler of its class
(``_Shows``): a ``live_events[]`` item (``live_event``; what the live fan-out publishes
too, so the channel and the dock always agree) and a ``runtime_logs`` excerpt (a
diagnostic excerpt of what happened, ``evidence_scope`` ``diagnostic_excerpt``; the
current-state entries, what needs an operator now, come from the pixel agents read model).
Per-tick reports are neither (they have their own endpoint). The publication gate's steps
show in the dock of the studio run they publish for (``projections.studio.gate_steps``).
Sources: ``studio/session``, ``studio/activity``, ``studio/assistant-message``,
``studio/delivery``, ``sandbox/runner``, ``sandbox/runner-stdout``, ``sandbox/tempo``,
``sandbox/wall``, ``sandbox/slot``, ``sandbox/ownership`` and ``gate``; levels ``info``,
``warn``, ``error``.

The head document (``logdock/<tenant>/<run_id>``) holds ``event_count`` (every live event
of the run so far) and each lane's newest items (its ``tail``, under ``CHUNK``); a full
tail is sealed into a chunk row (partitions ``logdock-live/<tenant>/<run_id>`` and
``logdock-logs/...``, sorted by chunk number), and whole oldest chunks go once
``CAPACITY`` newer items are kept. A batch of events rewrites one document per run (plus a
sealed chunk now and then) instead of the run's whole log; a feed read takes the head and
the newest chunks in one scan.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import structlog

from domain.gate.events import EVENTS as GATE_EVENTS
from domain.shared.metadata import snake
from domain.studio import events as ev
from domain.studio.policies.pixel import pixel_state
from domain.studio.policies.walls import wall_for
from projections.engine.docs import Docs, Handlers, Projector, handles, tenant_scoped
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp
from projections.studio import gate_steps

log = structlog.get_logger("squadops.projections.log_dock")

CAPACITY = 200
CHUNK = 25
SLOT_ACTIONS = frozenset({"acquire_execution_slot", "dispatch_slot_prompt"})

# event kind -> (event_kind, pixel state shown with it, or "" when it does not move the pixel)
LIVE_KINDS: dict[str, tuple[str, str]] = {
    "Run.Launched": ("run", ""), "Run.ExecutionRequested": ("run", ""), "Run.ExecutionStarted": ("run", ""),
    "Run.HandoffRecorded": ("handoff", ""), "Run.PreviewShared": ("delivery", ""),
    "Run.ControlRecorded": ("control", ""), "Run.Completed": ("run", ""), "Run.ProcessAssigned": ("control", ""),
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

log_dock_doc_key = tenant_scoped("logdock")
live_partition = tenant_scoped("logdock-live")
logs_partition = tenant_scoped("logdock-logs")


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


# What an event shows: its live event's part (None: summed up by its name) and its runtime
# log excerpt (None: it leaves no line).
Shows = tuple[_Shown | None, dict[str, Any] | None]


def _result(e: ev.ToolCalled | ev.ToolCallFailed) -> dict[str, Any] | None:
    """A tool call's kept result (none on a call that answered nothing, as in logs written before)."""
    if not e.result:
        return None
    return {"result": e.result, "result_size": e.result_size, "result_truncated": e.result_truncated}


def _named(env: Envelope) -> str:
    """An event summed up by its name (``TaskCardChanged`` -> ``task card changed``)."""
    return event_name(env.name).replace("_", " ")


def _entry(env: Envelope, source: str, level: str, message: str, signal: str, *, warning: str = "") -> dict[str, Any]:
    return {
        "source": source,
        "level": level,
        "message": message,
        "created_at": stamp(env),
        "evidence_scope": "diagnostic_excerpt",
        "current_signal": signal,
        "warning": warning,
        "agent_id": env.agent_id,
        "event_id": env.event_id,
    }


def _head(e: ev.PullRequestOpened) -> str:
    """The commit a pull request proposes, when its event names one (older events do not)."""
    if not e.head_sha:
        return ""
    return f" at {e.head_sha[:12]} ({len(e.changed_paths)} changed file{'s' if len(e.changed_paths) != 1 else ''})"


class _Shows(Handlers):
    """What each event shows in the log dock, by its class: ``(e, env, who)`` -> ``Shows``
    (``who`` is the agent of a session event)."""

    # -- run events -----------------------------------------------------------------------

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, who: str) -> Shows:
        return (_Shown(f"run launched from {e.template_id} for {e.project_slug}"),
                _entry(env, "studio/session", "info", f"Run launched from {e.template_id} for {e.project_slug}.", "ready"))

    @handles(ev.RunSessionOpened)
    def run_session_opened(self, e: ev.RunSessionOpened, env: Envelope, who: str) -> Shows:
        return None, None  # the session's own event shows

    @handles(ev.ExecutionRequested)
    def execution_requested(self, e: ev.ExecutionRequested, env: Envelope, who: str) -> Shows:
        return (_Shown("follow-up kick" if e.follow_up else "execution scheduled"),
                _entry(env, "studio/session", "info",
                       "Follow-up execution kick." if e.follow_up else "Execution scheduled.", "scheduled"))

    @handles(ev.ExecutionStarted)
    def execution_started(self, e: ev.ExecutionStarted, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "studio/session", "info", "Execution started.", "running")

    @handles(ev.TickRecorded)
    def tick_recorded(self, e: ev.TickRecorded, env: Envelope, who: str) -> Shows:
        return None, None  # per-tick reports have their own endpoint

    @handles(ev.HandoffRecorded)
    def handoff_recorded(self, e: ev.HandoffRecorded, env: Envelope, who: str) -> Shows:
        to = e.to_agent_id
        return (_Shown(e.reason, target_agent_id=to, thread_id=e.thread_id, agent_id=e.from_agent_id),
                _entry(env, "studio/activity", "info", f"Handoff {e.kind} {e.from_agent_id} -> {to}.", f"handoff:{to}"))

    @handles(ev.PreviewShared)
    def preview_shared(self, e: ev.PreviewShared, env: Envelope, who: str) -> Shows:
        preview = e.preview or {}
        return None, _entry(env, "studio/delivery", "info",
                            f"Preview shared at {preview.get('url') or preview.get('domain_url') or ''}.", "preview_shared")

    @handles(ev.ControlRecorded)
    def control_recorded(self, e: ev.ControlRecorded, env: Envelope, who: str) -> Shows:
        return (_Shown(f"{e.verb} by {e.actor}".strip()),
                _entry(env, "studio/activity", "info", f"{e.verb} on the run by {e.actor}.", f"control:{e.verb}"))

    @handles(ev.ProcessAssigned)
    def process_assigned(self, e: ev.ProcessAssigned, env: Envelope, who: str) -> Shows:
        process = "/".join(p for p in (e.provider, e.model, e.effort, e.speed) if p)
        return (_Shown(f"process assignment {e.target} -> {process}"),
                _entry(env, "sandbox/ownership", "info", f"Process assignment {e.target} -> {process} by {e.actor} "
                       f"({e.source}); sessions opened later for it take it.", f"process_assigned:{e.target}"))

    @handles(ev.RunCompleted)
    def run_completed(self, e: ev.RunCompleted, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "studio/session", "info", "Run completed.", "completed")

    @handles(ev.RunCleanedUp)
    def run_cleaned_up(self, e: ev.RunCleanedUp, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "studio/session", "warn", f"Run cleaned up by {e.actor}: {e.reason}.", "cleaned_up")

    # -- session events -------------------------------------------------------------------

    @handles(ev.SessionOpened)
    def session_opened(self, e: ev.SessionOpened, env: Envelope, who: str) -> Shows:
        joined = e.joined_via or {}
        frm = f" from {joined['from_agent_id']}" if joined.get("from_agent_id") else ""
        return None, _entry(env, "studio/session", "info",
                            f"{who} joined the run ({joined.get('kind', '') or 'launch'}{frm}).", "ready")

    @handles(ev.ProcessStarted)
    def process_started(self, e: ev.ProcessStarted, env: Envelope, who: str) -> Shows:
        ran = f", model {e.model_ran}" if e.model_ran else ""
        return None, _entry(env, "sandbox/runner", "info",
                            f"{who} process started (attempt {e.attempt}) in workspace {e.workspace_name}{ran}.",
                            "waiting_first_tool")

    @handles(ev.ToolCallFailed)
    def tool_call_failed(self, e: ev.ToolCallFailed, env: Envelope, who: str) -> Shows:
        tool = e.tool_name
        return (_Shown(f"{tool} failed: {e.reason}", route=e.route, tool_name=tool, result=_result(e)),
                _entry(env, "studio/activity", "warn", f"{who} {tool} failed: {e.reason}"[:800], f"tool_failed:{tool}",
                       warning="A denied or failed tool call is counted apart and is never the first tool."))

    @handles(ev.ModelReported)
    def model_reported(self, e: ev.ModelReported, env: Envelope, who: str) -> Shows:
        return _Shown(f"model {e.model}"), _entry(env, "sandbox/runner", "info", f"{who} runs model {e.model}.",
                                                  "model_reported")

    @handles(ev.ProcessRestarted)
    def process_restarted(self, e: ev.ProcessRestarted, env: Envelope, who: str) -> Shows:
        cleared = e.cleared_blocker
        return None, _entry(env, "sandbox/runner", "warn", f"{who} process restarted: {e.reason}.", "ready",
                            warning=f"cleared blocker {cleared}" if cleared else "")

    @handles(ev.WorkspaceRestarted)
    def workspace_restarted(self, e: ev.WorkspaceRestarted, env: Envelope, who: str) -> Shows:
        note, cleared = " (recreated)" if e.recreated else "", e.cleared_blocker
        return None, _entry(env, "sandbox/slot", "warn", f"{who} workspace restarted{note}: {e.reason}.", "ready",
                            warning=f"cleared blocker {cleared}" if cleared else "")

    @handles(ev.ControllerActionObserved)
    def controller_action_observed(self, e: ev.ControllerActionObserved, env: Envelope, who: str) -> Shows:
        action, label = e.action, e.evidence_label
        return (_Shown(f"controller action {action}" + (f" [{label}]" if label else ""), tool_name=action),
                _entry(env, "sandbox/slot" if action in SLOT_ACTIONS else "studio/activity", "warn" if label else "info",
                       f"{who} controller action {action}.", f"controller:{action}",
                       warning="A controller action is not the required first tool." if label else ""))

    @handles(ev.ToolCalled)
    def tool_called(self, e: ev.ToolCalled, env: Envelope, who: str) -> Shows:
        tool = e.tool_name
        shown = _Shown(f"{tool}{' (first tool)' if e.first else ''}: {e.summary}".strip(), route=e.route,
                       tool_name=tool, result=_result(e))
        if e.first is True:
            return shown, _entry(env, "sandbox/tempo", "info", f"{who} made its first tool call ({tool}); agent running.",
                                 f"tool:{tool}")
        return shown, _entry(env, "studio/activity", "info", f"{who} {tool}: {e.summary}".strip(), f"tool:{tool}")

    @handles(ev.AssistantMessage)
    def assistant_message(self, e: ev.AssistantMessage, env: Envelope, who: str) -> Shows:
        return _Shown(e.text[:500]), _entry(env, "studio/assistant-message", "info", e.text[:500], "message")

    @handles(ev.Blocked)
    def blocked(self, e: ev.Blocked, env: Envelope, who: str) -> Shows:
        code, message = e.code, e.message
        return (_Shown(f"{code}: {message}"),
                _entry(env, "sandbox/wall", "error" if code.startswith("sandbox_") else "warn",
                       f"{who} blocked by {code}: {message}", f"blocked:{code}", warning=wall_for(code, message).message))

    @handles(ev.Unblocked)
    def unblocked(self, e: ev.Unblocked, env: Envelope, who: str) -> Shows:
        return (_Shown(f"{e.code} cleared: {e.resolution}", pixel=pixel_state(e.resume_status)),
                _entry(env, "sandbox/wall", "info", f"{who} {e.code} cleared: {e.resolution}.", e.resume_status))

    @handles(ev.HandedOff)
    def handed_off(self, e: ev.HandedOff, env: Envelope, who: str) -> Shows:
        to = e.target_agent_id
        return (_Shown(e.reason, target_agent_id=to, thread_id=e.thread_id),
                _entry(env, "studio/activity", "info", f"{who} handed off to {to}: {e.reason}", f"handoff:{to}"))

    @handles(ev.PullRequestOpened)
    def pull_request_opened(self, e: ev.PullRequestOpened, env: Envelope, who: str) -> Shows:
        return (_Shown(f"pull request {e.reference}" + (f" at {e.head_sha[:12]}" if e.head_sha else "")),
                _entry(env, "studio/delivery", "info", f"{who} opened pull request {e.reference}{_head(e)}.",
                       "pull_request_opened"))

    @handles(ev.SessionCompleted)
    def session_completed(self, e: ev.SessionCompleted, env: Envelope, who: str) -> Shows:
        result = e.result or {}
        error, text = bool(result.get("is_error")), str(result.get("result", "session completed"))[:500]
        return _Shown(text), _entry(env, "sandbox/runner-stdout", "error" if error else "info", text,
                                    "session_completed", warning="The runner reported an error result." if error else "")

    @handles(ev.Stopped)
    def stopped(self, e: ev.Stopped, env: Envelope, who: str) -> Shows:
        return _Shown(e.reason), _entry(env, "studio/session", "warn", f"{who} stopped by {e.actor}: {e.reason}.",
                                        "stopped")

    @handles(ev.Paused)
    def paused(self, e: ev.Paused, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "studio/session", "warn", f"{who} paused by {e.actor}.", "paused")

    @handles(ev.Resumed)
    def resumed(self, e: ev.Resumed, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "studio/session", "info", f"{who} resumed by {e.actor}.", e.live_status)

    @handles(ev.RequestQueued)
    def request_queued(self, e: ev.RequestQueued, env: Envelope, who: str) -> Shows:
        queued = f"request queued, waking {e.wake_target}" if e.wake_target else "request queued"
        return (_Shown(queued + (f": {e.message}" if e.message else "")),
                _entry(env, "studio/activity", "info", f"{who} request queued by {e.actor}.", "request_queued"))

    @handles(ev.ControlApplied)
    def control_applied(self, e: ev.ControlApplied, env: Envelope, who: str) -> Shows:
        return (_Shown(f"{e.verb} by {e.actor}".strip()),
                _entry(env, "studio/activity", "info", f"{e.verb} on {who} by {e.actor}.", f"control:{e.verb}"))

    @handles(ev.MessageDelivered)
    def message_delivered(self, e: ev.MessageDelivered, env: Envelope, who: str) -> Shows:
        return (_Shown(e.message[:500], thread_id=e.thread_id),
                _entry(env, "studio/activity", "info", f"{e.channel} message to {who}: {e.message[:300]}",
                       f"message:{e.channel}"))

    @handles(ev.ProcessSwitched)
    def process_switched(self, e: ev.ProcessSwitched, env: Envelope, who: str) -> Shows:
        process = e.process or {}
        return None, _entry(env, "sandbox/ownership", "warn",
                            f"{who} switches to {process.get('provider', '')}/{process.get('model', '')}; worktree kept.",
                            "process_switch_pending",
                            warning="A takeover handoff is required before the replacement process starts.")

    @handles(ev.StartFailed)
    def start_failed(self, e: ev.StartFailed, env: Envelope, who: str) -> Shows:
        return (_Shown(f"start failed in {e.workspace_name}: {e.error}"),
                _entry(env, "sandbox/slot", "error", f"{who} start failed in {e.workspace_name}: {e.error}",
                       "start_failed", warning="The provider workspace is treated as a missing binding."))

    @handles(ev.SelfHealed)
    def self_healed(self, e: ev.SelfHealed, env: Envelope, who: str) -> Shows:
        return (_Shown(f"self-heal on {e.signal}: stale workspace identity cleared, fresh launch queued"),
                _entry(env, "sandbox/runner", "warn", f"{who} self-heal on {e.signal}: stale workspace identity cleared.",
                       "self_heal_requeued"))

    @handles(ev.RunnerOutput)
    def runner_output(self, e: ev.RunnerOutput, env: Envelope, who: str) -> Shows:
        return None, _entry(env, "sandbox/runner-stdout", e.level, f"{who} [{e.stream}] {e.text}"[:800],
                            f"runner:{e.stream}",
                            warning="The agent process reported trouble." if e.level == "error" else "")

    @handles(ev.TaskCardChanged)
    def task_card_changed(self, e: ev.TaskCardChanged, env: Envelope, who: str) -> Shows:
        return (_Shown(_named(env), tool_name=e.action, task_card_id=e.task_card_id),
                _entry(env, "studio/activity", "info", f"task card {e.task_card_id} {e.action} on {who}: {e.title}".strip(),
                       f"task_card:{e.action}"))

    # -- the gate's steps of the run (its live event sums a step up by its line) ----------

    @handles(*GATE_EVENTS)
    def gate_step(self, e: Any, env: Envelope, who: str) -> Shows:
        step = gate_steps.line(e)
        return _Shown(step.message), _entry(env, gate_steps.SOURCE, step.level, step.message, step.signal,
                                            warning=step.warning)


SHOWS = _Shows()


def live_event(env: Envelope) -> dict[str, Any] | None:
    """The live event for ``env``, or None when it is not one (ticks, projects, leases)."""
    mapped = LIVE_KINDS.get(env.kind)
    if mapped is None:
        return None
    run_id = live_run_id(env)
    if not run_id:
        return None
    show = SHOWS.handler(type(env.event))
    return _live(env, run_id, mapped, None if show is None else show(SHOWS, env.event, env, env.agent_id)[0])


def _live(env: Envelope, run_id: str, mapped: tuple[str, str], shown: _Shown | None) -> dict[str, Any]:
    event_kind, pixel = mapped
    if shown is None:
        shown = _Shown(_named(env))
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


# -- the read model ----------------------------------------------------------------------------


def sort_key(position: int) -> str:
    return f"{position:012d}"


def chunks_for(limit: int) -> int:
    """Sealed chunks to read for the newest ``limit`` items (the tail comes first)."""
    return -(-limit // CHUNK)


def chunk_key(partition: str, number: int) -> str:
    return f"{partition}/{sort_key(number)}"


def new_lane() -> dict[str, Any]:
    return {"tail": [], "sealed": [], "next": 0}


def push(docs: Docs, lane: dict[str, Any], partition: str, item: dict[str, Any]) -> None:
    """Appends to the lane's tail; a full tail becomes a chunk row; past CAPACITY the oldest go."""
    lane["tail"].append(item)
    if len(lane["tail"]) >= CHUNK:
        number = lane["next"]
        docs.put(chunk_key(partition, number), {"items": lane["tail"]}, partition=partition, sort_key=sort_key(number))
        lane["sealed"].append(number)
        lane["next"] = number + 1
        lane["tail"] = []
        while len(lane["sealed"]) > 1 and (len(lane["sealed"]) - 1) * CHUNK + len(lane["tail"]) >= CAPACITY:
            docs.delete(chunk_key(partition, lane["sealed"].pop(0)))


class LogDockProjector(_Shows, Projector):
    """Folds each event its handler answers for (``_Shows``) into its run's dock: the live
    event, then the runtime log line; a run's dock starts at its launch."""

    name = "log_dock"

    def apply(self, env: Envelope, docs: Docs) -> None:
        show = self.handler(type(env.event))
        if show is None:
            return
        tenant, run_id = env.tenant, live_run_id(env)
        if not run_id:  # a gate step of no studio run
            return
        key = log_dock_doc_key(tenant, run_id)
        if isinstance(env.event, ev.RunLaunched):
            doc: dict[str, Any] | None = {
                "run_id": env.run_id, "tenant_id": env.tenant, "broken": "", "latest_activity_at": env.at,
                "event_count": 0, "live": new_lane(), "logs": new_lane(),
            }
        else:
            doc = docs.get(key)
        if doc is None or doc["broken"]:
            return
        try:
            doc["latest_activity_at"] = max(doc["latest_activity_at"], stamp(env))
            shown, line = show(self, env.event, env, env.agent_id)
            mapped = LIVE_KINDS.get(env.kind)
            if mapped is not None:
                doc["event_count"] += 1
                push(docs, doc["live"], live_partition(tenant, run_id), _live(env, run_id, mapped, shown))
            if line is not None:
                push(docs, doc["logs"], logs_partition(tenant, run_id), line)
        except Exception as exc:  # one malformed event empties this run's log dock, nothing else
            for partition, lane in ((live_partition(tenant, run_id), doc["live"]), (logs_partition(tenant, run_id), doc["logs"])):
                for number in lane["sealed"]:
                    docs.delete(chunk_key(partition, number))
            doc.update(live=new_lane(), logs=new_lane(), event_count=0)
            doc["broken"] = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
            log.warning("log_dock_fold_failed", run_id=run_id, reason=doc["broken"])
        docs.put(key, doc, partition=f"logdock/{tenant}")

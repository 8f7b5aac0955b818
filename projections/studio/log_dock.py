"""Log dock read model: a run's live events and runtime log excerpts, newest first.

Per run, two lanes: ``live_events`` (exactly ``projections.studio.live_events.live_event``, the
mapping the live channel uses too) and ``runtime_logs`` excerpts. The head document
(``logdock/<tenant>/<run_id>``) holds ``event_count`` (every live event of the run so far)
and each lane's newest items (its ``tail``, under ``CHUNK``); a full tail is sealed into a
chunk row (partitions ``logdock-live/<tenant>/<run_id>`` and ``logdock-logs/...``, sorted
by chunk number), and whole oldest chunks go once ``CAPACITY`` newer items are kept. A
batch of events rewrites one document per run (plus a sealed chunk now and then) instead
of the run's whole log; a feed read takes the head and the newest chunks in one scan.

A runtime log excerpt is a diagnostic excerpt of what happened (``evidence_scope``
``diagnostic_excerpt``); the current-state entries (what needs an operator now) come from
the pixel agents read model. Sources: ``studio/session``, ``studio/activity``,
``studio/assistant-message``, ``studio/delivery``, ``sandbox/runner``,
``sandbox/runner-stdout``, ``sandbox/tempo``, ``sandbox/wall``, ``sandbox/slot``,
``sandbox/ownership``, and ``gate`` (the publication gate's steps for the run, from the
GateThread events naming it); levels ``info``, ``warn``, ``error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from domain.gate.events import EVENTS as GATE_EVENTS
from domain.studio import events as ev
from domain.studio.policies.walls import wall_for
from projections.engine.docs import Docs, Projector, folds_with, handles, tenant_scoped
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp
from projections.studio import gate_steps
from projections.studio.live_events import live_event, live_run_id

log = structlog.get_logger("squadops.projections.log_dock")

CAPACITY = 200
CHUNK = 25
SLOT_ACTIONS = frozenset({"acquire_execution_slot", "dispatch_slot_prompt"})


log_dock_doc_key = tenant_scoped("logdock")
live_partition = tenant_scoped("logdock-live")
logs_partition = tenant_scoped("logdock-logs")


def sort_key(position: int) -> str:
    return f"{position:012d}"


Line = Callable[[Envelope, Any, str], "dict[str, Any] | None"]


def _launched(env: Envelope, e: ev.RunLaunched, who: str) -> dict[str, Any]:
    return _entry(env, "studio/session", "info", f"Run launched from {e.template_id} for {e.project_slug}.", "ready")


def _gate_step(env: Envelope, event: Any, who: str) -> dict[str, Any] | None:
    if not gate_steps.run_of(env):  # a step of no studio run leaves no line
        return None
    level, message, signal, warning = gate_steps.line(event)
    return _entry(env, gate_steps.SOURCE, level, message, signal, warning=warning)


def _head(e: ev.PullRequestOpened) -> str:
    """The commit a pull request proposes, when its event names one (older events do not)."""
    if not e.head_sha:
        return ""
    return f" at {e.head_sha[:12]} ({len(e.changed_paths)} changed file{'s' if len(e.changed_paths) != 1 else ''})"


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


# The handler of an event whose ``line(env, e, who)`` answers its runtime log excerpt (or
# None: it leaves no log line); the run's log dock takes it and the event's live event.
_line = folds_with


class LogDockProjector(Projector):
    name = "log_dock"

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        self.fold(e, env, docs, _launched, {
            "run_id": env.run_id,
            "tenant_id": env.tenant,
            "broken": "",
            "latest_activity_at": env.at,
            "event_count": 0,
            "live": new_lane(),
            "logs": new_lane(),
        })


    # -- run events: the run's own lines (Run.Launched's is ``_launched``) ----------------

    @handles(ev.RunSessionOpened)
    @_line
    def run_session_opened(env: Envelope, e: ev.RunSessionOpened, who: str) -> dict[str, Any] | None:
        return None  # its live event only (the session's own event has the line)

    @handles(ev.ExecutionRequested)
    @_line
    def execution_requested(env: Envelope, e: ev.ExecutionRequested, who: str) -> dict[str, Any] | None:
        text = "Follow-up execution kick." if e.follow_up else "Execution scheduled."
        return _entry(env, "studio/session", "info", text, "scheduled")

    @handles(ev.ExecutionStarted)
    @_line
    def execution_started(env: Envelope, e: ev.ExecutionStarted, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "info", "Execution started.", "running")

    @handles(ev.TickRecorded)
    @_line
    def tick_recorded(env: Envelope, e: ev.TickRecorded, who: str) -> dict[str, Any] | None:
        return None  # per-tick reports have their own endpoint

    @handles(ev.HandoffRecorded)
    @_line
    def handoff_recorded(env: Envelope, e: ev.HandoffRecorded, who: str) -> dict[str, Any] | None:
        to = e.to_agent_id
        return _entry(env, "studio/activity", "info", f"Handoff {e.kind} {e.from_agent_id} -> {to}.", f"handoff:{to}")

    @handles(ev.PreviewShared)
    @_line
    def preview_shared(env: Envelope, e: ev.PreviewShared, who: str) -> dict[str, Any] | None:
        preview = e.preview or {}
        return _entry(env, "studio/delivery", "info",
                      f"Preview shared at {preview.get('url') or preview.get('domain_url') or ''}.", "preview_shared")

    @handles(ev.ControlRecorded)
    @_line
    def control_recorded(env: Envelope, e: ev.ControlRecorded, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"{e.verb} on the run by {e.actor}.", f"control:{e.verb}")

    @handles(ev.ProcessAssigned)
    @_line
    def process_assigned(env: Envelope, e: ev.ProcessAssigned, who: str) -> dict[str, Any] | None:
        process = "/".join(p for p in (e.provider, e.model, e.effort, e.speed) if p)
        return _entry(env, "sandbox/ownership", "info",
                      f"Process assignment {e.target} -> {process} by {e.actor} ({e.source}); "
                      "sessions opened later for it take it.", f"process_assigned:{e.target}")

    @handles(ev.RunCompleted)
    @_line
    def run_completed(env: Envelope, e: ev.RunCompleted, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "info", "Run completed.", "completed")

    @handles(ev.RunCleanedUp)
    @_line
    def run_cleaned_up(env: Envelope, e: ev.RunCleanedUp, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "warn", f"Run cleaned up by {e.actor}: {e.reason}.", "cleaned_up")

    # -- session events: ``who`` is the agent -----------------------------------------------

    @handles(ev.SessionOpened)
    @_line
    def session_opened(env: Envelope, e: ev.SessionOpened, who: str) -> dict[str, Any] | None:
        joined = e.joined_via or {}
        via = joined.get("kind", "") or "launch"
        frm = f" from {joined['from_agent_id']}" if joined.get("from_agent_id") else ""
        return _entry(env, "studio/session", "info", f"{who} joined the run ({via}{frm}).", "ready")

    @handles(ev.ProcessStarted)
    @_line
    def process_started(env: Envelope, e: ev.ProcessStarted, who: str) -> dict[str, Any] | None:
        ran = f", model {e.model_ran}" if e.model_ran else ""
        return _entry(env, "sandbox/runner", "info",
                      f"{who} process started (attempt {e.attempt}) in workspace {e.workspace_name}{ran}.",
                      "waiting_first_tool")

    @handles(ev.ToolCallFailed)
    @_line
    def tool_call_failed(env: Envelope, e: ev.ToolCallFailed, who: str) -> dict[str, Any] | None:
        tool = e.tool_name
        return _entry(env, "studio/activity", "warn", f"{who} {tool} failed: {e.reason}"[:800], f"tool_failed:{tool}",
                      warning="A denied or failed tool call is counted apart and is never the first tool.")

    @handles(ev.ModelReported)
    @_line
    def model_reported(env: Envelope, e: ev.ModelReported, who: str) -> dict[str, Any] | None:
        return _entry(env, "sandbox/runner", "info", f"{who} runs model {e.model}.", "model_reported")

    @handles(ev.ProcessRestarted)
    @_line
    def process_restarted(env: Envelope, e: ev.ProcessRestarted, who: str) -> dict[str, Any] | None:
        cleared = e.cleared_blocker
        return _entry(env, "sandbox/runner", "warn", f"{who} process restarted: {e.reason}.", "ready",
                      warning=f"cleared blocker {cleared}" if cleared else "")

    @handles(ev.WorkspaceRestarted)
    @_line
    def workspace_restarted(env: Envelope, e: ev.WorkspaceRestarted, who: str) -> dict[str, Any] | None:
        note = " (recreated)" if e.recreated else ""
        cleared = e.cleared_blocker
        return _entry(env, "sandbox/slot", "warn", f"{who} workspace restarted{note}: {e.reason}.", "ready",
                      warning=f"cleared blocker {cleared}" if cleared else "")

    @handles(ev.ControllerActionObserved)
    @_line
    def controller_action_observed(env: Envelope, e: ev.ControllerActionObserved, who: str) -> dict[str, Any] | None:
        action, label = e.action, e.evidence_label
        source = "sandbox/slot" if action in SLOT_ACTIONS else "studio/activity"
        warning = "A controller action is not the required first tool." if label else ""
        return _entry(env, source, "warn" if label else "info", f"{who} controller action {action}.",
                      f"controller:{action}", warning=warning)

    @handles(ev.ToolCalled)
    @_line
    def tool_called(env: Envelope, e: ev.ToolCalled, who: str) -> dict[str, Any] | None:
        tool = e.tool_name
        if e.first is True:
            return _entry(env, "sandbox/tempo", "info", f"{who} made its first tool call ({tool}); agent running.",
                          f"tool:{tool}")
        return _entry(env, "studio/activity", "info", f"{who} {tool}: {e.summary}".strip(), f"tool:{tool}")

    @handles(ev.AssistantMessage)
    @_line
    def assistant_message(env: Envelope, e: ev.AssistantMessage, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/assistant-message", "info", e.text[:500], "message")

    @handles(ev.Blocked)
    @_line
    def blocked(env: Envelope, e: ev.Blocked, who: str) -> dict[str, Any] | None:
        code, message = e.code, e.message
        wall = wall_for(code, message)
        level = "error" if code.startswith("sandbox_") else "warn"
        return _entry(env, "sandbox/wall", level, f"{who} blocked by {code}: {message}", f"blocked:{code}",
                      warning=wall.message)

    @handles(ev.Unblocked)
    @_line
    def unblocked(env: Envelope, e: ev.Unblocked, who: str) -> dict[str, Any] | None:
        return _entry(env, "sandbox/wall", "info", f"{who} {e.code} cleared: {e.resolution}.", e.resume_status)

    @handles(ev.HandedOff)
    @_line
    def handed_off(env: Envelope, e: ev.HandedOff, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"{who} handed off to {e.target_agent_id}: {e.reason}",
                      f"handoff:{e.target_agent_id}")

    @handles(ev.PullRequestOpened)
    @_line
    def pull_request_opened(env: Envelope, e: ev.PullRequestOpened, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/delivery", "info", f"{who} opened pull request {e.reference}{_head(e)}.",
                      "pull_request_opened")

    @handles(ev.SessionCompleted)
    @_line
    def session_completed(env: Envelope, e: ev.SessionCompleted, who: str) -> dict[str, Any] | None:
        result = e.result or {}
        error = bool(result.get("is_error"))
        text = str(result.get("result", "session completed"))[:500]
        return _entry(env, "sandbox/runner-stdout", "error" if error else "info", text, "session_completed",
                      warning="The runner reported an error result." if error else "")

    @handles(ev.Stopped)
    @_line
    def stopped(env: Envelope, e: ev.Stopped, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "warn", f"{who} stopped by {e.actor}: {e.reason}.", "stopped")

    @handles(ev.Paused)
    @_line
    def paused(env: Envelope, e: ev.Paused, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "warn", f"{who} paused by {e.actor}.", "paused")

    @handles(ev.Resumed)
    @_line
    def resumed(env: Envelope, e: ev.Resumed, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/session", "info", f"{who} resumed by {e.actor}.", e.live_status)

    @handles(ev.RequestQueued)
    @_line
    def request_queued(env: Envelope, e: ev.RequestQueued, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"{who} request queued by {e.actor}.", "request_queued")

    @handles(ev.ControlApplied)
    @_line
    def control_applied(env: Envelope, e: ev.ControlApplied, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"{e.verb} on {who} by {e.actor}.", f"control:{e.verb}")

    @handles(ev.MessageDelivered)
    @_line
    def message_delivered(env: Envelope, e: ev.MessageDelivered, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"{e.channel} message to {who}: {e.message[:300]}",
                      f"message:{e.channel}")

    @handles(ev.ProcessSwitched)
    @_line
    def process_switched(env: Envelope, e: ev.ProcessSwitched, who: str) -> dict[str, Any] | None:
        process = e.process or {}
        return _entry(
            env, "sandbox/ownership", "warn",
            f"{who} switches to {process.get('provider', '')}/{process.get('model', '')}; worktree kept.",
            "process_switch_pending",
            warning="A takeover handoff is required before the replacement process starts.",
        )

    @handles(ev.StartFailed)
    @_line
    def start_failed(env: Envelope, e: ev.StartFailed, who: str) -> dict[str, Any] | None:
        return _entry(env, "sandbox/slot", "error", f"{who} start failed in {e.workspace_name}: {e.error}", "start_failed",
                      warning="The provider workspace is treated as a missing binding.")

    @handles(ev.SelfHealed)
    @_line
    def self_healed(env: Envelope, e: ev.SelfHealed, who: str) -> dict[str, Any] | None:
        return _entry(env, "sandbox/runner", "warn", f"{who} self-heal on {e.signal}: stale workspace identity cleared.",
                      "self_heal_requeued")

    @handles(ev.RunnerOutput)
    @_line
    def runner_output(env: Envelope, e: ev.RunnerOutput, who: str) -> dict[str, Any] | None:
        return _entry(env, "sandbox/runner-stdout", e.level, f"{who} [{e.stream}] {e.text}"[:800], f"runner:{e.stream}",
                      warning="The agent process reported trouble." if e.level == "error" else "")

    @handles(ev.TaskCardChanged)
    @_line
    def task_card_changed(env: Envelope, e: ev.TaskCardChanged, who: str) -> dict[str, Any] | None:
        return _entry(env, "studio/activity", "info", f"task card {e.task_card_id} {e.action} on {who}: {e.title}".strip(),
                      f"task_card:{e.action}")

    # gate steps of the run: lines and live events
    gate_step = handles(*GATE_EVENTS)(_line(_gate_step))

    def fold(self, e: Any, env: Envelope, docs: Docs, line: Line, launched: dict[str, Any] | None = None) -> None:
        tenant, run_id = env.tenant, live_run_id(env)
        if not run_id:  # a gate step of no studio run
            return
        key = log_dock_doc_key(tenant, run_id)
        doc = launched or docs.get(key)
        if doc is None or doc["broken"]:
            return
        try:
            doc["latest_activity_at"] = max(doc["latest_activity_at"], stamp(env))
            item = live_event(env)
            if item is not None:
                doc["event_count"] += 1
                push(docs, doc["live"], live_partition(tenant, run_id), item)
            made = line(env, e, env.agent_id)
            if made is not None:
                push(docs, doc["logs"], logs_partition(tenant, run_id), made)
        except Exception as exc:  # one malformed event empties this run's log dock, nothing else
            for partition, lane in ((live_partition(tenant, run_id), doc["live"]), (logs_partition(tenant, run_id), doc["logs"])):
                for number in lane["sealed"]:
                    docs.delete(chunk_key(partition, number))
            doc.update(live=new_lane(), logs=new_lane(), event_count=0)
            doc["broken"] = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
            log.warning("log_dock_fold_failed", run_id=run_id, reason=doc["broken"])
        docs.put(key, doc, partition=f"logdock/{tenant}")

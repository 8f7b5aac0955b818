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
from projections.engine.by_type import ByType
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp
from projections.studio import gate_steps
from projections.studio.live_events import live_event, live_run_id

log = structlog.get_logger("squadops.projections.log_dock")

CAPACITY = 200
CHUNK = 25
SLOT_ACTIONS = frozenset({"acquire_execution_slot", "dispatch_slot_prompt"})


def log_dock_doc_key(tenant: str, run_id: str) -> str:
    return f"logdock/{tenant}/{run_id}"


def live_partition(tenant: str, run_id: str) -> str:
    return f"logdock-live/{tenant}/{run_id}"


def logs_partition(tenant: str, run_id: str) -> str:
    return f"logdock-logs/{tenant}/{run_id}"


def sort_key(position: int) -> str:
    return f"{position:012d}"


def excerpt(env: Envelope) -> dict[str, Any] | None:
    """The runtime log excerpt for ``env``, or None when it leaves no log line."""
    if env.aggregate_type == "Run":
        return _run_excerpt(env)
    if isinstance(env.event, GATE_EVENTS):
        return _gate_excerpt(env, env.event)
    line = SESSION_LINES.get(env.event)
    return None if line is None else line(env, env.event, env.agent_id)


Line = Callable[[Envelope, Any, str], "dict[str, Any] | None"]


def _opened(env: Envelope, e: ev.SessionOpened, who: str) -> dict[str, Any]:
    joined = e.joined_via or {}
    via = joined.get("kind", "") or "launch"
    frm = f" from {joined['from_agent_id']}" if joined.get("from_agent_id") else ""
    return _entry(env, "studio/session", "info", f"{who} joined the run ({via}{frm}).", "ready")


def _restarted(env: Envelope, e: ev.ProcessRestarted, who: str) -> dict[str, Any]:
    cleared = e.cleared_blocker
    return _entry(env, "sandbox/runner", "warn", f"{who} process restarted: {e.reason}.", "ready",
                  warning=f"cleared blocker {cleared}" if cleared else "")


def _workspace_restarted(env: Envelope, e: ev.WorkspaceRestarted, who: str) -> dict[str, Any]:
    note = " (recreated)" if e.recreated else ""
    cleared = e.cleared_blocker
    return _entry(env, "sandbox/slot", "warn", f"{who} workspace restarted{note}: {e.reason}.", "ready",
                  warning=f"cleared blocker {cleared}" if cleared else "")


def _controller(env: Envelope, e: ev.ControllerActionObserved, who: str) -> dict[str, Any]:
    action, label = e.action, e.evidence_label
    source = "sandbox/slot" if action in SLOT_ACTIONS else "studio/activity"
    warning = "A controller action is not the required first tool." if label else ""
    return _entry(env, source, "warn" if label else "info", f"{who} controller action {action}.",
                  f"controller:{action}", warning=warning)


def _tool(env: Envelope, e: ev.ToolCalled, who: str) -> dict[str, Any]:
    tool = e.tool_name
    if e.first is True:
        return _entry(env, "sandbox/tempo", "info", f"{who} made its first tool call ({tool}); agent running.",
                      f"tool:{tool}")
    return _entry(env, "studio/activity", "info", f"{who} {tool}: {e.summary}".strip(), f"tool:{tool}")


def _tool_failed(env: Envelope, e: ev.ToolCallFailed, who: str) -> dict[str, Any]:
    tool = e.tool_name
    return _entry(env, "studio/activity", "warn", f"{who} {tool} failed: {e.reason}"[:800], f"tool_failed:{tool}",
                  warning="A denied or failed tool call is counted apart and is never the first tool.")


def _started(env: Envelope, e: ev.ProcessStarted, who: str) -> dict[str, Any]:
    ran = f", model {e.model_ran}" if e.model_ran else ""
    return _entry(env, "sandbox/runner", "info",
                  f"{who} process started (attempt {e.attempt}) in workspace {e.workspace_name}{ran}.",
                  "waiting_first_tool")


def _blocked(env: Envelope, e: ev.Blocked, who: str) -> dict[str, Any]:
    code, message = e.code, e.message
    wall = wall_for(code, message)
    level = "error" if code.startswith("sandbox_") else "warn"
    return _entry(env, "sandbox/wall", level, f"{who} blocked by {code}: {message}", f"blocked:{code}",
                  warning=wall.message)


def _completed(env: Envelope, e: ev.SessionCompleted, who: str) -> dict[str, Any]:
    result = e.result or {}
    error = bool(result.get("is_error"))
    text = str(result.get("result", "session completed"))[:500]
    return _entry(env, "sandbox/runner-stdout", "error" if error else "info", text, "session_completed",
                  warning="The runner reported an error result." if error else "")


def _switched(env: Envelope, e: ev.ProcessSwitched, who: str) -> dict[str, Any]:
    process = e.process or {}
    return _entry(
        env, "sandbox/ownership", "warn",
        f"{who} switches to {process.get('provider', '')}/{process.get('model', '')}; worktree kept.",
        "process_switch_pending",
        warning="A takeover handoff is required before the replacement process starts.",
    )


def _runner_output(env: Envelope, e: ev.RunnerOutput, who: str) -> dict[str, Any]:
    return _entry(env, "sandbox/runner-stdout", e.level, f"{who} [{e.stream}] {e.text}"[:800], f"runner:{e.stream}",
                  warning="The agent process reported trouble." if e.level == "error" else "")


# A session event's line, by the event's class (one dict lookup: ``projections.engine.by_type``).
SESSION_LINES: ByType[Line] = ByType(
    {
        ev.SessionOpened: _opened,
        ev.ProcessStarted: _started,
        ev.ToolCallFailed: _tool_failed,
        ev.ModelReported: lambda env, e, who: _entry(
            env, "sandbox/runner", "info", f"{who} runs model {e.model}.", "model_reported"
        ),
        ev.ProcessRestarted: _restarted,
        ev.WorkspaceRestarted: _workspace_restarted,
        ev.ControllerActionObserved: _controller,
        ev.ToolCalled: _tool,
        ev.AssistantMessage: lambda env, e, who: _entry(
            env, "studio/assistant-message", "info", e.text[:500], "message"
        ),
        ev.Blocked: _blocked,
        ev.Unblocked: lambda env, e, who: _entry(
            env, "sandbox/wall", "info", f"{who} {e.code} cleared: {e.resolution}.", e.resume_status
        ),
        ev.HandedOff: lambda env, e, who: _entry(
            env, "studio/activity", "info", f"{who} handed off to {e.target_agent_id}: {e.reason}",
            f"handoff:{e.target_agent_id}",
        ),
        ev.PullRequestOpened: lambda env, e, who: _entry(
            env, "studio/delivery", "info", f"{who} opened pull request {e.pr_url}{_head(e)}.", "pull_request_opened"
        ),
        ev.SessionCompleted: _completed,
        ev.Stopped: lambda env, e, who: _entry(
            env, "studio/session", "warn", f"{who} stopped by {e.actor}: {e.reason}.", "stopped"
        ),
        ev.Paused: lambda env, e, who: _entry(env, "studio/session", "warn", f"{who} paused by {e.actor}.", "paused"),
        ev.Resumed: lambda env, e, who: _entry(
            env, "studio/session", "info", f"{who} resumed by {e.actor}.", e.live_status
        ),
        ev.RequestQueued: lambda env, e, who: _entry(
            env, "studio/activity", "info", f"{who} request queued by {e.actor}.", "request_queued"
        ),
        ev.ControlApplied: lambda env, e, who: _entry(
            env, "studio/activity", "info", f"{e.verb} on {who} by {e.actor}.", f"control:{e.verb}"
        ),
        ev.MessageDelivered: lambda env, e, who: _entry(
            env, "studio/activity", "info", f"{e.channel} message to {who}: {e.message[:300]}", f"message:{e.channel}"
        ),
        ev.ProcessSwitched: _switched,
        ev.StartFailed: lambda env, e, who: _entry(
            env, "sandbox/slot", "error", f"{who} start failed in {e.workspace_name}: {e.error}", "start_failed",
            warning="The provider workspace is treated as a missing binding.",
        ),
        ev.SelfHealed: lambda env, e, who: _entry(
            env, "sandbox/runner", "warn", f"{who} self-heal on {e.signal}: stale workspace identity cleared.",
            "self_heal_requeued",
        ),
        ev.RunnerOutput: _runner_output,
        ev.TaskCardChanged: lambda env, e, who: _entry(
            env, "studio/activity", "info", f"task card {e.task_card_id} {e.action} on {who}: {e.title}".strip(),
            f"task_card:{e.action}",
        ),
    }
)


def _run_excerpt(env: Envelope) -> dict[str, Any] | None:
    match env.event:
        case ev.RunLaunched(template_id=template_id, project_slug=project_slug):
            return _entry(env, "studio/session", "info", f"Run launched from {template_id} for {project_slug}.", "ready")
        case ev.ExecutionRequested(follow_up=follow_up):
            text = "Follow-up execution kick." if follow_up else "Execution scheduled."
            return _entry(env, "studio/session", "info", text, "scheduled")
        case ev.ExecutionStarted():
            return _entry(env, "studio/session", "info", "Execution started.", "running")
        case ev.HandoffRecorded(kind=kind, from_agent_id=frm, to_agent_id=to):
            return _entry(env, "studio/activity", "info", f"Handoff {kind} {frm} -> {to}.", f"handoff:{to}")
        case ev.PreviewShared(preview=preview):
            preview = preview or {}
            return _entry(env, "studio/delivery", "info",
                          f"Preview shared at {preview.get('url') or preview.get('domain_url') or ''}.", "preview_shared")
        case ev.ControlRecorded(verb=verb, actor=actor):
            return _entry(env, "studio/activity", "info", f"{verb} on the run by {actor}.", f"control:{verb}")
        case ev.ProcessAssigned() as a:
            process = "/".join(p for p in (a.provider, a.model, a.effort, a.speed) if p)
            return _entry(env, "sandbox/ownership", "info",
                          f"Process assignment {a.target} -> {process} by {a.actor} ({a.source}); "
                          "sessions opened later for it take it.", f"process_assigned:{a.target}")
        case ev.RunCompleted():
            return _entry(env, "studio/session", "info", "Run completed.", "completed")
        case ev.RunCleanedUp(actor=actor, reason=reason):
            return _entry(env, "studio/session", "warn", f"Run cleaned up by {actor}: {reason}.", "cleaned_up")
    return None


def _gate_excerpt(env: Envelope, event: Any) -> dict[str, Any] | None:
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


class LogDockProjector(Projector):
    name = "log_dock"
    prefixes = ("Run.", "AgentSession.", "GateThread.")  # gate steps of the run: lines and live events

    def wants(self, env: Envelope) -> bool:
        return env.kind.startswith(self.prefixes)

    def apply(self, env: Envelope, docs: Docs) -> None:
        tenant, run_id = env.tenant, live_run_id(env)
        if not run_id:  # a gate step of no studio run
            return
        key = log_dock_doc_key(tenant, run_id)
        if env.kind == "Run.Launched":
            doc: dict[str, Any] | None = {
                "run_id": run_id,
                "tenant_id": tenant,
                "broken": "",
                "latest_activity_at": env.at,
                "event_count": 0,
                "live": new_lane(),
                "logs": new_lane(),
            }
        else:
            doc = docs.get(key)
        if doc is None or doc["broken"]:
            return
        try:
            doc["latest_activity_at"] = max(doc["latest_activity_at"], stamp(env))
            item = live_event(env)
            if item is not None:
                doc["event_count"] += 1
                push(docs, doc["live"], live_partition(tenant, run_id), item)
            line = excerpt(env)
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

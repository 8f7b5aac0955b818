"""Pixel agents read model: every agent of a run as the observability feed shows it.

One document per run (``pixels/<tenant>/<run_id>``) holding, already in the feed's shape,
``pixel_agents`` (in the order agents joined), ``progress``, ``run_cost``,
``coordination_friction`` and ``current_logs`` (the log dock's current-state entries: one
per agent that needs an operator now), and under ``fold`` what the rules need between
events (the feed skips it). Every event touches one agent, so a fold costs the same for 2
or 50 agents, and a batch of events reads and writes one document per run.

A session event moves its agent's status and what the change named for it does; ``refresh``
then derives the rest. Rules (all from session events, never the clock):
- ``pixel_state``/``tempo_phase``/progress bucket come from ``domain.studio.policies.pixel``;
- ``wall`` comes from ``domain.studio.policies.walls``; an empty ``recommended_action`` = not blocked;
- ``process_metrics`` keep 0.0 / -1 / -1 until the runner reports a final result, and only
  numbers it reported are shown;
- ``process_metrics.total_cost_usd`` is the CLI's own report, else (Codex reports none) the
  sum the model proxy metered for the agent (``ModelUsage.Recorded``);
- ``run_cost`` sums the positive per-agent costs, and the meter's sum, and names each
  agent's cost source (``cli_report`` or ``meter``);
- ``coordination_friction`` aggregates only structured session-state fields.
A fold that raises marks the document broken: its surfaces fall back to their empty-typed
defaults (the feed logs why) instead of failing the projector or the feed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import structlog

from domain.studio import events as ev
from domain.studio.policies.pixel import PROGRESS_BUCKETS, pixel_state, progress_bucket, tempo_phase
from domain.studio.policies.walls import wall_for
from domain.studio.session import TERMINAL, SessionState, after_event, moves_status
from domain.workspaces.events import UsageRecorded
from projections.engine.docs import Docs, Projector, folds_with, handles, tenant_scoped
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp
from projections.studio import agent_cost

log = structlog.get_logger("squadops.projections.pixels")

# What a session event changes in its agent's own fields besides its status: ``(agent, private, e)``.
Change = Callable[[dict[str, Any], dict[str, Any], Any], None]

SERVER_BUNDLES = {"errors": "error_tracking", "browser": "browser_proof"}
PROCESS_FIELDS = ("provider", "model", "effort", "speed")  # ``agent_process_<field>``
TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens")
FIRST_TOOL_BLOCKER = "agent_first_tool_required"
NO_WALL = wall_for("")  # the wall of an agent that is not blocked: empty, no recommended action
FRICTION_LISTS = ("first_tool_waiting_agents", "handoff_blocked_agents", "process_switch_handoff_required_agents")
# Where an agent's cost comes from: its CLI's own report (Claude Code), else the model proxy's meter.
CLI_REPORT, METER = "cli_report", "meter"

# Session event -> what the session did last (``last_activity`` of the pixel policy);
# events not named here leave it as it was.
ACTIVITY = {
    "ProcessStarted": "", "ControllerActionObserved": "controller", "ToolCalled": "tool", "AssistantMessage": "say",
    "HandedOff": "handoff", "PullRequestOpened": "", "MessageDelivered": "message", "ProcessRestarted": "",
    "WorkspaceRestarted": "",
}

# Session events after which the agent runs no tool (a tool call names its own).
ENDS_TOOL = (
    ev.ProcessStarted, ev.ControllerActionObserved, ev.AssistantMessage, ev.Blocked, ev.HandedOff,
    ev.PullRequestOpened, ev.SessionCompleted, ev.Stopped, ev.Paused, ev.MessageDelivered,
    ev.WorkspaceRestarted, ev.ProcessRestarted,
)


def activity_after(current: str, event_name: str) -> str:
    return ACTIVITY.get(event_name, current)


pixels_doc_key = tenant_scoped("pixels")


def empty_progress() -> dict[str, int]:
    return {"total_agents": 0, **{bucket: 0 for bucket in PROGRESS_BUCKETS}}


def empty_run_cost() -> dict[str, Any]:
    return {"total_cost_usd": 0.0, "agent_count_with_cost": 0}


def empty_friction() -> dict[str, Any]:
    return {**{name: [] for name in FRICTION_LISTS}, "mailbox_pending_count": 0, "known_duration_ms": 0,
            "known_turn_count": 0}


def new_doc(env: Envelope) -> dict[str, Any]:
    return {
        "run_id": env.run_id,
        "tenant_id": env.tenant,
        "project_slug": env.event.project_slug,
        "broken": "",
        "latest_activity_at": stamp(env),
        **empty_agents(),
    }


def empty_agents() -> dict[str, Any]:
    """The document's agents and what is summed over them, before any agent joined."""
    return {
        "pixel_agent_count": 0,
        "pixel_agents": [],
        "progress": empty_progress(),
        "run_cost": empty_run_cost(),
        "coordination_friction": empty_friction(),
        "current_logs": [],
        "sessions": [],
        "fold": {},
    }


# -- the fold ----------------------------------------------------------------------------------


def fold_opened(doc: dict[str, Any], env: Envelope, change: Change | None) -> None:
    """A session opened: its agent joins (a session reopened keeps its agent as it is)."""
    at = stamp(env)
    doc["latest_activity_at"] = max(doc["latest_activity_at"], at)
    if env.agent_id not in doc["fold"]:
        open_agent(doc, env, at)


def fold_agent(doc: dict[str, Any], env: Envelope, change: Change | None) -> None:
    """A session event: its times, then (``change`` not None) its agent's status (the session
    state machine), what ``change`` does, and what that implies for the run."""
    at = stamp(env)
    doc["latest_activity_at"] = max(doc["latest_activity_at"], at)
    private = doc["fold"].get(env.agent_id)
    if private is None:
        return  # an event of a session this model never saw opened
    agent = doc["pixel_agents"][private["index"]]
    agent["last_update_at"] = max(agent["last_update_at"], at)
    if change is None:
        return  # recorded only (controls, task cards, queued requests): nothing else moves
    cost_before = (private["cost"], private.get("reported"))
    e = env.event
    private["last_activity"] = activity_after(private["last_activity"], env.name)
    if moves_status(e):
        if isinstance(e, ev.Blocked) and agent["live_status"] != "blocked":
            private["interrupted_from"] = agent["live_status"]
        state = after_event(SessionState(agent["live_status"], agent["current_step"], private["blocker"]), e)
        agent["live_status"], agent["current_step"], private["blocker"] = state
    if isinstance(e, ENDS_TOOL):
        agent["current_tool_name"] = ""
    change(agent, private, e)
    refresh(doc, agent, private, env, at)
    if (private["cost"], private.get("reported")) != cost_before:
        doc["run_cost"] = run_cost(doc)


def open_agent(doc: dict[str, Any], env: Envelope, at: str) -> None:
    e: ev.SessionOpened = env.event
    process = e.process or {}
    joined = e.joined_via or {}
    agent = {
        "agent_id": env.agent_id,
        "session_id": env.session_id,
        "role_key": e.role_key,
        "agent_nickname": e.agent_nickname,
        "alias": e.alias,
        "pixel_state": "idle",
        "current_step": "session_warming",
        "current_tool_name": "",
        "live_status": "ready",
        "tempo_phase": "waiting_first_tool",
        "wall_code": "",
        "wall": {"code": "", "message": "", "recommended_action": ""},
        **{f"agent_process_{field}": str(process.get(field, "")) for field in PROCESS_FIELDS},
        "mailbox_count": 0,
        "dialogue_target_agent_id": str(joined.get("from_agent_id", "")),
        "active_thread_id": "",
        "armory_loadout": {"mcp_server_ids": [], "tool_names": {}, "execution_profile": e.execution_profile, "bundles": []},
        "last_update_at": at,
        "process_metrics": {"total_cost_usd": 0.0, "duration_ms": -1, "num_turns": -1},
    }
    private = {  # what the rules need of the agent between events
        "index": len(doc["pixel_agents"]), "last_activity": "", "controller_actions": 0, "delivery_evidence": False,
        "interrupted_from": "", "blocker": "", "wall_detail": "", "joined_kind": str(joined.get("kind", "")),
        "switch_pending": False, "bucket": "idle", "cost": 0.0, "tools": {}, "friction": [False, False, False, 0, -1, -1],
        "attention": None,
    }
    doc["pixel_agents"].append(agent)
    doc["sessions"].append({"agent_id": env.agent_id, "session_id": env.session_id})
    doc["fold"][env.agent_id] = private
    doc["pixel_agent_count"] = len(doc["pixel_agents"])
    doc["progress"]["total_agents"] += 1
    doc["progress"]["idle"] += 1


# -- what each session event changes in its agent (besides its status and current tool) ---------


def _started(agent: dict[str, Any], private: dict[str, Any], e: ev.ProcessStarted) -> None:
    if e.model_ran or "model_ran" in agent:  # (absent until a CLI named the model it ran)
        agent["model_ran"] = e.model_ran
    private["controller_actions"] = 0
    armory = agent["armory_loadout"]
    armory["mcp_server_ids"] = [str(s) for s in e.mcp_server_ids]
    for server in armory["mcp_server_ids"]:
        private["tools"].setdefault(server, [])
    arm(armory, private["tools"])
    if e.confinement:  # how the process is confined (absent from feeds of older events)
        armory["confinement"] = dict(e.confinement)


def _controller(agent: dict[str, Any], private: dict[str, Any], e: ev.ControllerActionObserved) -> None:
    private["controller_actions"] += 1
    if e.action == "agent_mailbox":
        agent["mailbox_count"] = 0


def _tool(agent: dict[str, Any], private: dict[str, Any], e: ev.ToolCalled) -> None:
    tool = e.tool_name
    agent["current_tool_name"] = tool
    server = server_of(tool)
    if server and tool not in private["tools"].get(server, ()):
        seen = private["tools"].setdefault(server, [])
        seen.append(tool)
        seen.sort()
        arm(agent["armory_loadout"], private["tools"])


def _tool_failed(agent: dict[str, Any], private: dict[str, Any], e: ev.ToolCallFailed) -> None:
    """Counted apart (absent until the first one): a failed call is never the current tool."""
    agent["failed_tool_call_count"] = agent.get("failed_tool_call_count", 0) + 1


def _model_reported(agent: dict[str, Any], private: dict[str, Any], e: ev.ModelReported) -> None:
    agent["model_ran"] = e.model


def _status_only(agent: dict[str, Any], private: dict[str, Any], e: Any) -> None:
    """The event moves its agent's status (and current tool) only."""


def _blocked(agent: dict[str, Any], private: dict[str, Any], e: ev.Blocked) -> None:
    private["wall_detail"] = e.message


def clear_wall(agent: dict[str, Any], private: dict[str, Any], e: Any = None) -> None:
    private["blocker"] = private["wall_detail"] = private["interrupted_from"] = ""


def _handed_off(agent: dict[str, Any], private: dict[str, Any], e: ev.HandedOff) -> None:
    agent["dialogue_target_agent_id"] = e.target_agent_id
    if e.thread_id:
        agent["active_thread_id"] = e.thread_id


def _pull_request(agent: dict[str, Any], private: dict[str, Any], e: ev.PullRequestOpened) -> None:
    private["delivery_evidence"] = True


def _completed(agent: dict[str, Any], private: dict[str, Any], e: ev.SessionCompleted) -> None:
    """Copies only the numbers the runner reported in its final result; nothing is made up."""
    metrics, result = agent["process_metrics"], e.result
    cost = agent_cost.cost_in(result)
    if cost is not None:
        metrics["total_cost_usd"] = cost
        agent_cost.reported(private, cost)
    counts = {"duration_ms": result.get("duration_ms"), "num_turns": result.get("num_turns")}
    usage = result.get("usage")
    if isinstance(usage, dict):  # tokens as the CLI counted them (Claude Code and Codex name them alike)
        counts.update((field, usage.get(field)) for field in TOKEN_FIELDS)
    for field, value in counts.items():
        if not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value < math.inf:
            metrics[field] = int(value)


def _paused(agent: dict[str, Any], private: dict[str, Any], e: ev.Paused) -> None:
    private["interrupted_from"] = e.previous_status


def _resumed(agent: dict[str, Any], private: dict[str, Any], e: ev.Resumed) -> None:
    private["interrupted_from"] = ""


def _delivered(agent: dict[str, Any], private: dict[str, Any], e: ev.MessageDelivered) -> None:
    if e.channel == "mailbox":
        agent["mailbox_count"] += 1
    elif e.channel == "thread" and e.thread_id:
        agent["active_thread_id"] = e.thread_id


def _workspace_restarted(agent: dict[str, Any], private: dict[str, Any], e: Any) -> None:
    private["controller_actions"] = 0
    clear_wall(agent, private)


def _process_restarted(agent: dict[str, Any], private: dict[str, Any], e: ev.ProcessRestarted) -> None:
    _workspace_restarted(agent, private, e)
    private["switch_pending"] = False


def _switched(agent: dict[str, Any], private: dict[str, Any], e: ev.ProcessSwitched) -> None:
    for field in PROCESS_FIELDS:
        agent[f"agent_process_{field}"] = str(e.process.get(field, agent[f"agent_process_{field}"]))
    private["switch_pending"] = agent["live_status"] != "ready"


def server_of(tool: str) -> str:
    """``mcp__vcs__read_file`` -> ``vcs``; built-in tools belong to no server."""
    if not tool.startswith("mcp__"):
        return ""
    server, sep, rest = tool[5:].partition("__")
    return server if sep and server and rest else ""


def arm(armory: dict[str, Any], tools: dict[str, list[str]]) -> None:
    """Tool names per server, with the wildcard ``mcp__<server>__*`` where none were seen;
    a bundle is carried when the server that provides it is in the loadout."""
    armory["tool_names"] = {server: list(names) or [f"mcp__{server}__*"] for server, names in tools.items()}
    armory["bundles"] = sorted({SERVER_BUNDLES[s] for s in tools if s in SERVER_BUNDLES})


# -- what an agent's own fields imply for the run ----------------------------------------------


def refresh(doc: dict[str, Any], agent: dict[str, Any], private: dict[str, Any], env: Envelope, at: str) -> None:
    """Recomputes the agent's wall, pixel state, tempo phase and progress bucket, moves its
    share of the run's ``coordination_friction``, and keeps ``current_logs``."""
    status = agent["live_status"]
    wall = wall_for(private["blocker"], private["wall_detail"]) if status == "blocked" else NO_WALL
    agent["wall_code"] = wall.code
    agent["wall"] = {"code": wall.code, "message": wall.message, "recommended_action": wall.recommended_action}
    agent["pixel_state"] = pixel_state(status, private["last_activity"])
    agent["tempo_phase"] = tempo_phase(
        status, private["controller_actions"], private["delivery_evidence"], private["interrupted_from"]
    )
    bucket = progress_bucket(agent["pixel_state"], status)
    if bucket != private["bucket"]:
        doc["progress"][private["bucket"]] -= 1
        doc["progress"][bucket] += 1
        private["bucket"] = bucket
    metrics = agent["process_metrics"]
    friction = [
        status == "waiting_first_tool" or (status == "blocked" and agent["wall_code"] == FIRST_TOOL_BLOCKER),
        status == "blocked" and private["joined_kind"] not in ("", "launch"),
        private["switch_pending"] and status not in TERMINAL,
        agent["mailbox_count"],
        metrics["duration_ms"],
        metrics["num_turns"],
    ]
    if friction != private["friction"]:
        update_friction(doc, agent["agent_id"], private["friction"], friction)
        private["friction"] = friction
    entry, kept = attention(agent, private, env, at), private["attention"]
    # an agent still in the state its current entry describes keeps that entry (its first time)
    if entry != kept and not (
        entry is not None and kept is not None
        and (entry["current_signal"], entry["message"]) == (kept["current_signal"], kept["message"])
    ):
        private["attention"] = entry
        fold = doc["fold"]
        doc["current_logs"] = [e for a in doc["pixel_agents"] if (e := fold[a["agent_id"]]["attention"]) is not None]


def update_friction(doc: dict[str, Any], agent_id: str, old: list[Any], new: list[Any]) -> None:
    """Moves one agent's share of the friction block (agents listed in the order they joined)."""
    block = doc["coordination_friction"]
    for flag, name in enumerate(FRICTION_LISTS):
        if old[flag] != new[flag]:
            listed = block[name]
            if new[flag]:
                listed.append(agent_id)
                listed.sort(key=lambda a: doc["fold"][a]["index"])
            else:
                listed.remove(agent_id)
    block["mailbox_pending_count"] += new[3] - old[3]
    block["known_duration_ms"] += max(new[4], 0) - max(old[4], 0)
    block["known_turn_count"] += max(new[5], 0) - max(old[5], 0)


def attention(agent: dict[str, Any], private: dict[str, Any], env: Envelope, at: str) -> dict[str, Any] | None:
    """The current-state log entry of an agent that needs an operator now, else None."""
    status, agent_id = agent["live_status"], agent["agent_id"]
    if status == "blocked":
        wall = agent["wall"]
        code = wall["code"]
        source, level = "sandbox/wall", "error" if code.startswith("sandbox_") else "warn"
        signal, warning = f"blocked:{code}", wall["message"]
        message = f"{agent_id} is blocked by {code}; recommended action: {wall['recommended_action']}."
    elif private["switch_pending"] and status not in TERMINAL:
        source, level, signal = "sandbox/ownership", "warn", "process_switch_pending"
        message = f"{agent_id} switches to {agent['agent_process_provider']}/{agent['agent_process_model']} at its next turn."
        warning = "A takeover handoff is required before the replacement process starts."
    elif status == "paused":
        source, level, signal = "studio/session", "warn", "paused"
        message = f"{agent_id} is paused by the operator."
        warning = "The session waits for a queued request with a wake target."
    elif status == "waiting_first_tool":
        source, level, signal, warning = "sandbox/tempo", "info", agent["tempo_phase"], ""
        message = f"{agent_id} waits for its required first tool call" + (
            " (controller actions so far are not the first tool)." if signal == "prompt_dispatching" else "."
        )
    else:
        return None
    return {"source": source, "level": level, "message": message, "created_at": at, "evidence_scope": "current_state",
            "current_signal": signal, "warning": warning, "agent_id": agent_id, "event_id": env.event_id}


def run_cost(doc: dict[str, Any]) -> dict[str, Any]:
    """The run's cost: each agent's as shown (its CLI's own report, else the meter's); once
    the model proxy metered any of its agents, also the meter's whole sum and where each
    agent's cost came from (a run of agents never metered keeps the shape it always had)."""
    total, count = agent_cost.shown(doc["fold"].values())  # every agent of the run has its private fold
    cost = {"total_cost_usd": total, "agent_count_with_cost": count}
    if not any("metered" in private for private in doc["fold"].values()):
        return cost
    sources = [
        {"agent_id": agent_id, "session_id": doc["pixel_agents"][private["index"]]["session_id"],
         "source": METER if "metered" in private and not private["reported"] else CLI_REPORT,
         "total_cost_usd": round(private["cost"], 6)}
        for agent_id, private in sorted(doc["fold"].items(), key=lambda item: item[1]["index"])
        if "metered" in private or private["cost"] > 0
    ]
    metered = math.fsum(private.get("metered", 0.0) for private in doc["fold"].values())
    return {**cost, "metered_cost_usd": round(metered, 6), "cost_sources": sources}


class PixelsProjector(Projector):
    name = "pixels"

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        docs.put(pixels_doc_key(env.tenant, env.run_id), new_doc(env), partition=f"pixels/{env.tenant}")

    session_opened = handles(ev.SessionOpened)(folds_with(fold_opened))

    # Session events that change their agent's fields: its status (the session state
    # machine) and what the change named for the event does.
    process_started = handles(ev.ProcessStarted)(folds_with(fold_agent, _started))
    controller_action_observed = handles(ev.ControllerActionObserved)(folds_with(fold_agent, _controller))
    tool_called = handles(ev.ToolCalled)(folds_with(fold_agent, _tool))
    tool_call_failed = handles(ev.ToolCallFailed)(folds_with(fold_agent, _tool_failed))
    model_reported = handles(ev.ModelReported)(folds_with(fold_agent, _model_reported))
    assistant_message = handles(ev.AssistantMessage)(folds_with(fold_agent, _status_only))
    blocked = handles(ev.Blocked)(folds_with(fold_agent, _blocked))
    unblocked = handles(ev.Unblocked)(folds_with(fold_agent, clear_wall))
    handed_off = handles(ev.HandedOff)(folds_with(fold_agent, _handed_off))
    pull_request_opened = handles(ev.PullRequestOpened)(folds_with(fold_agent, _pull_request))
    session_completed = handles(ev.SessionCompleted)(folds_with(fold_agent, _completed))
    stopped = handles(ev.Stopped)(folds_with(fold_agent, clear_wall))
    paused = handles(ev.Paused)(folds_with(fold_agent, _paused))
    resumed = handles(ev.Resumed)(folds_with(fold_agent, _resumed))
    message_delivered = handles(ev.MessageDelivered)(folds_with(fold_agent, _delivered))
    process_restarted = handles(ev.ProcessRestarted)(folds_with(fold_agent, _process_restarted))
    workspace_restarted = handles(ev.WorkspaceRestarted)(folds_with(fold_agent, _workspace_restarted))
    process_switched = handles(ev.ProcessSwitched)(folds_with(fold_agent, _switched))

    # Session events that only move their agent's times.
    runner_output = handles(ev.RunnerOutput)(folds_with(fold_agent))
    control_applied = handles(ev.ControlApplied)(folds_with(fold_agent))
    request_queued = handles(ev.RequestQueued)(folds_with(fold_agent))
    start_failed = handles(ev.StartFailed)(folds_with(fold_agent))
    self_healed = handles(ev.SelfHealed)(folds_with(fold_agent))
    task_card_changed = handles(ev.TaskCardChanged)(folds_with(fold_agent))

    @handles(UsageRecorded)
    def usage_recorded(self, e: UsageRecorded, env: Envelope, docs: Docs) -> None:
        """A metered model request of an agent: its cost, unless its CLI reports its own."""
        key = pixels_doc_key(e.tenant, e.run_id)
        doc = docs.get(key) if e.run_id else None
        if doc is None or doc["broken"] or e.agent_id not in doc["fold"]:
            return
        private = doc["fold"][e.agent_id]
        agent_cost.metered(private, e.cost_usd)
        if not private["reported"]:
            doc["pixel_agents"][private["index"]]["process_metrics"]["total_cost_usd"] = round(private["metered"], 6)
        doc["run_cost"] = run_cost(doc)
        docs.put(key, doc, partition=f"pixels/{e.tenant}")

    def fold(
        self, e: Any, env: Envelope, docs: Docs, fold_doc: Callable[[dict[str, Any], Envelope, Change | None], None],
        change: Change | None = None,
    ) -> None:
        """``fold_doc(doc, env, change)`` on the event's run's document; a fold that raises
        breaks only this run's pixel surfaces."""
        key = pixels_doc_key(env.tenant, env.run_id)
        doc = docs.get(key)
        if doc is None or doc["broken"]:
            return
        try:
            fold_doc(doc, env, change)
        except Exception as exc:
            doc.update(empty_agents())
            doc["broken"] = f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})"
            log.warning("pixels_fold_failed", run_id=env.run_id, reason=doc["broken"])
        docs.put(key, doc, partition=f"pixels/{env.tenant}")

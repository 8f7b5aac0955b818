"""Pixel agents read model: every agent of a run as the observability feed shows it.

One document per run (``pixels/<tenant>/<run_id>``) holding, already in the feed's shape,
``pixel_agents`` (in the order agents joined), ``progress``, ``run_cost``,
``coordination_friction`` and ``current_logs`` (the log dock's current-state entries: one
per agent that needs an operator now), and under ``fold`` what the rules need between
events (the feed skips it). Every event touches one agent, so a fold costs the same for 2
or 50 agents, and a batch of events reads and writes one document per run.

Rules (all from session events, never the clock):
- ``pixel_state``/``tempo_phase``/progress bucket come from ``domain.studio.policies.pixel``;
- ``wall`` comes from ``domain.studio.policies.walls``; an empty ``recommended_action`` = not blocked;
- ``process_metrics`` keep 0.0 / -1 / -1 until the runner reports a final result, and only
  numbers it reported are shown;
- ``run_cost`` sums the positive per-agent costs;
- ``coordination_friction`` aggregates only structured session-state fields.
A fold that raises marks the document broken: its surfaces fall back to their empty-typed
defaults (the feed logs why) instead of failing the projector or the feed.
"""

from __future__ import annotations

import math
from typing import Any

import structlog

from domain.studio.policies.pixel import PROGRESS_BUCKETS, pixel_state, progress_bucket, tempo_phase
from domain.studio.policies.walls import wall_for
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp

log = structlog.get_logger("squadops.projections.pixels")

TERMINAL = ("session_completed", "stopped")
SERVER_BUNDLES = {"errors": "error_tracking", "browser": "browser_proof"}
FIRST_TOOL_BLOCKER = "agent_first_tool_required"

# Session event -> what the session did last (``last_activity`` of the pixel policy);
# events not named here leave it as it was.
ACTIVITY = {
    "ProcessStarted": "",
    "ControllerActionObserved": "controller",
    "ToolCalled": "tool",
    "AssistantMessage": "say",
    "HandedOff": "handoff",
    "PullRequestOpened": "",
    "MessageDelivered": "message",
    "ProcessRestarted": "",
    "WorkspaceRestarted": "",
}


# Session events that change an agent's fields (the others only move last_update_at).
STEPS = frozenset(
    {
        "ProcessStarted", "ControllerActionObserved", "ToolCalled", "AssistantMessage", "Blocked",
        "Unblocked", "HandedOff", "PullRequestOpened", "Completed", "Stopped", "Paused", "Resumed",
        "MessageDelivered", "ProcessRestarted", "WorkspaceRestarted", "ProcessSwitched",
    }
)


def activity_after(current: str, event_name: str) -> str:
    return ACTIVITY.get(event_name, current)


def pixels_doc_key(tenant: str, run_id: str) -> str:
    return f"pixels/{tenant}/{run_id}"


def empty_progress() -> dict[str, int]:
    return {"total_agents": 0, **{bucket: 0 for bucket in PROGRESS_BUCKETS}}


def empty_run_cost() -> dict[str, Any]:
    return {"total_cost_usd": 0.0, "agent_count_with_cost": 0}


def empty_friction() -> dict[str, Any]:
    return {
        "first_tool_waiting_agents": [],
        "handoff_blocked_agents": [],
        "process_switch_handoff_required_agents": [],
        "mailbox_pending_count": 0,
        "known_duration_ms": 0,
        "known_turn_count": 0,
    }


def empty_wall() -> dict[str, str]:
    return {"code": "", "message": "", "recommended_action": ""}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


class PixelsProjector(Projector):
    name = "pixels"
    # Every run and session event: kinds added later still move the times and counts.
    prefixes = ("AgentSession.", "Run.Launched")

    def wants(self, env: Envelope) -> bool:
        return env.kind.startswith(self.prefixes)

    def apply(self, env: Envelope, docs: Docs) -> None:
        key = pixels_doc_key(env.tenant, env.run_id)
        if env.kind == "Run.Launched":
            docs.put(key, new_doc(env), p=f"pixels/{env.tenant}")
            return
        doc = docs.get(key)
        if doc is None or doc["broken"]:
            return
        try:
            fold(doc, env)
        except Exception as exc:  # a malformed event breaks only this run's pixel surfaces
            break_doc(doc, f"{type(exc).__name__}: {exc} (event {env.position} {env.kind})")
            log.warning("pixels_fold_failed", run_id=env.run_id, reason=doc["broken"])
        docs.put(key, doc, p=f"pixels/{env.tenant}")


def new_doc(env: Envelope) -> dict[str, Any]:
    return {
        "run_id": env.run_id,
        "tenant_id": env.tenant,
        "project_slug": env.data.get("project_slug", ""),
        "broken": "",
        "latest_activity_at": stamp(env),
        "pixel_agent_count": 0,
        "pixel_agents": [],
        "progress": empty_progress(),
        "run_cost": empty_run_cost(),
        "coordination_friction": empty_friction(),
        "current_logs": [],
        "sessions": [],
        "fold": {},
    }


def break_doc(doc: dict[str, Any], reason: str) -> None:
    fresh = {
        "pixel_agent_count": 0,
        "pixel_agents": [],
        "progress": empty_progress(),
        "run_cost": empty_run_cost(),
        "coordination_friction": empty_friction(),
        "current_logs": [],
        "sessions": [],
        "fold": {},
    }
    doc.update(fresh)
    doc["broken"] = reason


# -- the fold ----------------------------------------------------------------------------------


def fold(doc: dict[str, Any], env: Envelope) -> None:
    at = stamp(env)
    doc["latest_activity_at"] = max(doc["latest_activity_at"], at)
    agent_id = env.agent_id
    if env.name == "Opened":
        if agent_id not in doc["fold"]:
            open_agent(doc, env, at)
        return
    private = doc["fold"].get(agent_id)
    if private is None:
        return  # an event of a session this model never saw opened
    agent = doc["pixel_agents"][private["index"]]
    agent["last_update_at"] = max(agent["last_update_at"], at)
    if env.name not in STEPS:
        return  # recorded only (controls, task cards, queued requests): nothing else moves
    cost_before = private["cost"]
    step(agent, private, env)
    refresh(doc, agent, private, env, at)
    if private["cost"] != cost_before:
        doc["run_cost"] = run_cost(doc)


def open_agent(doc: dict[str, Any], env: Envelope, at: str) -> None:
    d = env.data
    process = d.get("process") or {}
    joined = d.get("joined_via") or {}
    agent = {
        "agent_id": env.agent_id,
        "session_id": env.session_id,
        "role_key": d.get("role_key", ""),
        "agent_nickname": d.get("agent_nickname", ""),
        "alias": d.get("alias", ""),
        "pixel_state": "idle",
        "current_step": "session_warming",
        "current_tool_name": "",
        "live_status": "ready",
        "tempo_phase": "waiting_first_tool",
        "wall_code": "",
        "wall": empty_wall(),
        "agent_process_provider": str(process.get("provider", "")),
        "agent_process_model": str(process.get("model", "")),
        "agent_process_effort": str(process.get("effort", "")),
        "agent_process_speed": str(process.get("speed", "")),
        "mailbox_count": 0,
        "dialogue_target_agent_id": str(joined.get("from_agent_id", "")),
        "active_thread_id": "",
        "armory_loadout": {
            "mcp_server_ids": [],
            "tool_names": {},
            "execution_profile": d.get("execution_profile", ""),
            "bundles": [],
        },
        "last_update_at": at,
        "process_metrics": {"total_cost_usd": 0.0, "duration_ms": -1, "num_turns": -1},
    }
    private = {
        "index": len(doc["pixel_agents"]),
        "last_activity": "",
        "controller_actions": 0,
        "delivery_evidence": False,
        "interrupted_from": "",
        "blocker": "",
        "wall_detail": "",
        "joined_kind": str(joined.get("kind", "")),
        "switch_pending": False,
        "bucket": "idle",
        "cost": 0.0,
        "tools": {},
        "friction": [False, False, False, 0, -1, -1],
        "attention": None,
    }
    doc["pixel_agents"].append(agent)
    doc["sessions"].append({"agent_id": env.agent_id, "session_id": env.session_id})
    doc["fold"][env.agent_id] = private
    doc["pixel_agent_count"] = len(doc["pixel_agents"])
    doc["progress"]["total_agents"] += 1
    doc["progress"]["idle"] += 1


def step(agent: dict[str, Any], private: dict[str, Any], env: Envelope) -> None:
    """What one session event changes in the agent's own fields."""
    d, name = env.data, env.name
    private["last_activity"] = activity_after(private["last_activity"], name)
    if name == "ProcessStarted":
        agent["live_status"] = agent["current_step"] = "waiting_first_tool"
        agent["current_tool_name"] = ""
        private["controller_actions"] = 0
        armory = agent["armory_loadout"]
        armory["mcp_server_ids"] = [str(s) for s in d.get("mcp_server_ids", [])]
        for server in armory["mcp_server_ids"]:
            private["tools"].setdefault(server, [])
        arm(armory, private["tools"])
    elif name == "ControllerActionObserved":
        private["controller_actions"] += 1
        agent["current_tool_name"] = ""
        if d.get("action") == "agent_mailbox":
            agent["mailbox_count"] = 0
    elif name == "ToolCalled":
        tool = str(d.get("tool_name", ""))
        agent["current_step"] = f"tool:{tool}"
        agent["current_tool_name"] = tool
        if d.get("first"):
            agent["live_status"] = "working"
        server = server_of(tool)
        if server and tool not in private["tools"].get(server, ()):
            seen = private["tools"].setdefault(server, [])
            seen.append(tool)
            seen.sort()
            arm(agent["armory_loadout"], private["tools"])
    elif name == "AssistantMessage":
        agent["current_tool_name"] = ""
    elif name == "Blocked":
        if agent["live_status"] != "blocked":
            private["interrupted_from"] = agent["live_status"]
        code = str(d.get("code", ""))
        agent["live_status"] = "blocked"
        agent["current_step"] = f"blocked:{code}"
        private["blocker"] = code
        agent["current_tool_name"] = ""
        private["wall_detail"] = str(d.get("message", ""))
    elif name == "Unblocked":
        resume = str(d.get("resume_status", "working"))
        agent["live_status"] = agent["current_step"] = resume
        clear_wall(agent, private)
    elif name == "HandedOff":
        target = str(d.get("target_agent_id", ""))
        agent["current_step"] = f"handoff:{target}"
        agent["current_tool_name"] = ""
        agent["dialogue_target_agent_id"] = target
        if d.get("thread_id"):
            agent["active_thread_id"] = str(d["thread_id"])
    elif name == "PullRequestOpened":
        agent["current_step"] = "pull_request_opened"
        agent["current_tool_name"] = ""
        private["delivery_evidence"] = True
    elif name == "Completed":
        agent["live_status"] = agent["current_step"] = "session_completed"
        agent["current_tool_name"] = ""
        report_metrics(agent, private, d.get("result") or {})
    elif name == "Stopped":
        agent["live_status"] = agent["current_step"] = "stopped"
        agent["current_tool_name"] = ""
        clear_wall(agent, private)
    elif name == "Paused":
        private["interrupted_from"] = str(d.get("previous_status", agent["live_status"]))
        agent["live_status"] = agent["current_step"] = "paused"
        agent["current_tool_name"] = ""
    elif name == "Resumed":
        agent["live_status"] = str(d.get("live_status", agent["live_status"]))
        agent["current_step"] = str(d.get("current_step", agent["live_status"]))
        private["interrupted_from"] = ""
    elif name == "MessageDelivered":
        channel = d.get("channel")
        if channel == "mailbox":
            agent["mailbox_count"] += 1
        elif channel == "thread" and d.get("thread_id"):
            agent["active_thread_id"] = str(d["thread_id"])
        agent["current_tool_name"] = ""
    elif name in ("ProcessRestarted", "WorkspaceRestarted"):
        agent["live_status"] = "ready"
        default_step = "process_restarting" if name == "ProcessRestarted" else "workspace_restarting"
        agent["current_step"] = str(d.get("current_step") or default_step)
        agent["current_tool_name"] = ""
        private["controller_actions"] = 0
        clear_wall(agent, private)
        if name == "ProcessRestarted":
            private["switch_pending"] = False
    elif name == "ProcessSwitched":
        process = d.get("process") or {}
        agent["agent_process_provider"] = str(process.get("provider", agent["agent_process_provider"]))
        agent["agent_process_model"] = str(process.get("model", agent["agent_process_model"]))
        agent["agent_process_effort"] = str(process.get("effort", agent["agent_process_effort"]))
        agent["agent_process_speed"] = str(process.get("speed", agent["agent_process_speed"]))
        private["switch_pending"] = agent["live_status"] != "ready"


def clear_wall(agent: dict[str, Any], private: dict[str, Any]) -> None:
    private["blocker"] = ""
    private["wall_detail"] = ""
    private["interrupted_from"] = ""


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


def report_metrics(agent: dict[str, Any], private: dict[str, Any], result: dict[str, Any]) -> None:
    """Copies only the numbers the runner reported; nothing is made up."""
    metrics = agent["process_metrics"]
    cost = _number(result.get("total_cost_usd"))
    if cost is not None:
        metrics["total_cost_usd"] = float(cost)
        private["cost"] = float(cost) if cost > 0 else 0.0
    duration = _number(result.get("duration_ms"))
    if duration is not None and duration >= 0:
        metrics["duration_ms"] = int(duration)
    turns = _number(result.get("num_turns"))
    if turns is not None and turns >= 0:
        metrics["num_turns"] = int(turns)


# -- derived fields ------------------------------------------------------------------------------


def refresh(doc: dict[str, Any], agent: dict[str, Any], private: dict[str, Any], env: Envelope, at: str) -> None:
    """Recomputes the agent's derived fields and the run-level figures they feed."""
    status = agent["live_status"]
    if status == "blocked":
        wall = wall_for(private["blocker"], private["wall_detail"])
        agent["wall_code"] = wall.code
        agent["wall"] = {"code": wall.code, "message": wall.message, "recommended_action": wall.recommended_action}
    else:
        agent["wall_code"] = ""
        agent["wall"] = empty_wall()
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
    inputs = [
        status == "waiting_first_tool" or (status == "blocked" and agent["wall_code"] == FIRST_TOOL_BLOCKER),
        status == "blocked" and private["joined_kind"] not in ("", "launch"),
        private["switch_pending"] and status not in TERMINAL,
        agent["mailbox_count"],
        metrics["duration_ms"],
        metrics["num_turns"],
    ]
    if inputs != private["friction"]:
        update_friction(doc, agent["agent_id"], private["friction"], inputs)
        private["friction"] = inputs
    entry = attention(agent, private, env, at)
    if entry != private["attention"]:
        if entry is not None and private["attention"] is not None and same_state(entry, private["attention"]):
            return
        private["attention"] = entry
        doc["current_logs"] = [
            doc["fold"][a["agent_id"]]["attention"]
            for a in doc["pixel_agents"]
            if doc["fold"][a["agent_id"]]["attention"] is not None
        ]


def same_state(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """The agent is still in the state its current entry describes (keep its first time)."""
    return new["current_signal"] == old["current_signal"] and new["message"] == old["message"]


FRICTION_LISTS = ("first_tool_waiting_agents", "handoff_blocked_agents", "process_switch_handoff_required_agents")


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


def run_cost(doc: dict[str, Any]) -> dict[str, Any]:
    costs = [doc["fold"][a["agent_id"]]["cost"] for a in doc["pixel_agents"]]
    positive = [c for c in costs if c > 0]
    return {"total_cost_usd": round(math.fsum(positive), 6), "agent_count_with_cost": len(positive)}


def attention(agent: dict[str, Any], private: dict[str, Any], env: Envelope, at: str) -> dict[str, Any] | None:
    """The current-state log entry of an agent that needs an operator now, else None."""
    status, agent_id = agent["live_status"], agent["agent_id"]
    if status == "blocked":
        wall = agent["wall"]
        code = wall["code"]
        return log_entry(
            "sandbox/wall",
            "error" if code.startswith("sandbox_") else "warn",
            f"{agent_id} is blocked by {code}; recommended action: {wall['recommended_action']}.",
            at,
            f"blocked:{code}",
            wall["message"],
            agent_id,
            env,
        )
    if private["switch_pending"] and status not in TERMINAL:
        return log_entry(
            "sandbox/ownership",
            "warn",
            f"{agent_id} switches to {agent['agent_process_provider']}/{agent['agent_process_model']} at its next turn.",
            at,
            "process_switch_pending",
            "A takeover handoff is required before the replacement process starts.",
            agent_id,
            env,
        )
    if status == "paused":
        return log_entry(
            "studio/session", "warn", f"{agent_id} is paused by the operator.", at, "paused",
            "The session waits for a queued request with a wake target.", agent_id, env,
        )
    if status == "waiting_first_tool":
        dispatching = agent["tempo_phase"] == "prompt_dispatching"
        return log_entry(
            "sandbox/tempo",
            "info",
            f"{agent_id} waits for its required first tool call"
            + (" (controller actions so far are not the first tool)." if dispatching else "."),
            at,
            agent["tempo_phase"],
            "",
            agent_id,
            env,
        )
    return None


def log_entry(
    source: str,
    level: str,
    message: str,
    created_at: str,
    signal: str,
    warning: str,
    agent_id: str,
    env: Envelope,
    scope: str = "current_state",
) -> dict[str, Any]:
    return {
        "source": source,
        "level": level,
        "message": message,
        "created_at": created_at,
        "evidence_scope": scope,
        "current_signal": signal,
        "warning": warning,
        "agent_id": agent_id,
        "event_id": env.event_id,
    }

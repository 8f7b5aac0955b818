"""Pixel agents read model, derived fields: what an agent's own fields imply for the run.

After each step of an agent (``projections.studio.pixels``), ``refresh`` recomputes its
wall, pixel state, tempo phase and progress bucket, moves its share of the run's
``coordination_friction``, and keeps ``current_logs`` (the log dock's current-state
entries: one per agent that needs an operator now).
"""

from __future__ import annotations

import math
from typing import Any

from domain.studio.policies.pixel import pixel_state, progress_bucket, tempo_phase
from domain.studio.policies.walls import wall_for
from domain.studio.session import TERMINAL
from projections.engine.envelope import Envelope
from projections.studio import agent_cost

FIRST_TOOL_BLOCKER = "agent_first_tool_required"


def empty_wall() -> dict[str, str]:
    return {"code": "", "message": "", "recommended_action": ""}



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
        fold = doc["fold"]
        doc["current_logs"] = [
            entry for a in doc["pixel_agents"] if (entry := fold[a["agent_id"]]["attention"]) is not None
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


# Where an agent's cost comes from: its CLI's own report (Claude Code), else the model proxy's meter.
CLI_REPORT, METER = "cli_report", "meter"


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

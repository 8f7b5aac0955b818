"""Fleet board read model: one comparable row per run, newest first.

``fleet/<tenant>/<run_id>`` rows live in partition ``fleet/<tenant>`` (group = project
slug, sort = ``created_at|run_id``, status = the board status), so the board pages with a
key range and filters by project and status in the index. Each row: status, progress
(the feed's six buckets, by the same pixel rules), blockers, cost (sum of positive
per-agent costs), time to the first pull request (-1 before one) and latest activity.
"""

from __future__ import annotations

import math
from typing import Any

from domain.studio import events as ev
from domain.studio.policies.pixel import PROGRESS_BUCKETS, pixel_state, progress_bucket
from domain.studio.session_state import SessionState, after_event
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope
from projections.engine.stamps import seconds_between, stamp
from projections.studio.pixels import activity_after

BOARD_STATUSES = ("ready", "scheduled", "running", "blocked", "completed", "cleaned_up")
ENDED = ("completed", "cleaned_up")


def fleet_doc_key(tenant: str, run_id: str) -> str:
    return f"fleet/{tenant}/{run_id}"


def fleet_partition(tenant: str) -> str:
    return f"fleet/{tenant}"


def sort_key(row: dict[str, Any]) -> str:
    return f"{row['created_at']}|{row['run_id']}"


class FleetProjector(Projector):
    name = "fleet"
    # Every run and session event: kinds added later still move the times and counts.
    prefixes = ("Run.", "AgentSession.")

    def wants(self, env: Envelope) -> bool:
        return env.kind.startswith(self.prefixes)

    def apply(self, env: Envelope, docs: Docs) -> None:
        tenant, run_id = env.tenant, env.run_id
        key = fleet_doc_key(tenant, run_id)
        launched = env.event
        if isinstance(launched, ev.RunLaunched):
            row: dict[str, Any] | None = {
                "run_id": run_id,
                "tenant_id": tenant,
                "project_slug": launched.project_slug,
                "template_id": launched.template_id,
                "launched_by": launched.launched_by,
                "status": "ready",
                "execution_status": "ready",
                "created_at": env.at,
                "started_at": "",
                "ended_at": "",
                "latest_activity_at": stamp(env),
                "tick": 0,
                "progress": {"total_agents": 0, **{b: 0 for b in PROGRESS_BUCKETS}},
                "blocker_count": 0,
                "blockers": [],
                "total_cost_usd": 0.0,
                "agent_count_with_cost": 0,
                "pr_count": 0,
                "first_pr_at": "",
                "time_to_first_pr_seconds": -1,
                "agents": {},
            }
        else:
            row = docs.get(key)
            if row is None:
                return
            row["latest_activity_at"] = max(row["latest_activity_at"], stamp(env))
            if env.aggregate_type == "Run":
                self._run_event(row, env)
            else:
                self._session_event(row, env)
        assert row is not None
        row["status"] = board_status(row)
        docs.put(key, row, partition=fleet_partition(tenant), group=row["project_slug"], sort_key=sort_key(row), status=row["status"])

    @staticmethod
    def _run_event(row: dict[str, Any], env: Envelope) -> None:
        match env.event:
            case ev.ExecutionRequested(follow_up=False):
                row["execution_status"] = "scheduled"
            case ev.ExecutionStarted(started_at=started_at):
                row["execution_status"] = "running"
                row["started_at"] = started_at
            case ev.TickRecorded(tick=tick):
                row["tick"] = tick
            case ev.RunCompleted(at=at) | ev.RunCleanedUp(at=at) as ended:
                row["execution_status"] = "completed" if isinstance(ended, ev.RunCompleted) else "cleaned_up"
                row["ended_at"] = at or env.at

    @staticmethod
    def _session_event(row: dict[str, Any], env: Envelope) -> None:
        e, name, agent_id = env.event, env.name, env.agent_id
        agents = row["agents"]
        if isinstance(e, ev.SessionOpened):
            if agent_id in agents:
                return
            agents[agent_id] = {
                "live_status": "ready", "activity": "", "bucket": "idle", "code": "", "blocker": "", "cost": 0.0,
            }
            row["progress"]["total_agents"] += 1
            row["progress"]["idle"] += 1
            return
        agent = agents.get(agent_id)
        if agent is None:
            return
        agent["live_status"], _, agent["code"] = after_event(SessionState(agent["live_status"], "", agent["code"]), e)
        agent["activity"] = activity_after(agent["activity"], name)
        blocker_before = agent["blocker"]
        agent["blocker"] = agent["code"] if agent["live_status"] == "blocked" else ""
        bucket = progress_bucket(pixel_state(agent["live_status"], agent["activity"]), agent["live_status"])
        if bucket != agent["bucket"]:
            row["progress"][agent["bucket"]] -= 1
            row["progress"][bucket] += 1
            agent["bucket"] = bucket
        if agent["blocker"] != blocker_before:
            row["blockers"] = [
                {"agent_id": a, "blocker_code": s["blocker"]} for a, s in sorted(agents.items()) if s["blocker"]
            ]
            row["blocker_count"] = len(row["blockers"])
        if isinstance(e, ev.PullRequestOpened):
            row["pr_count"] += 1
            if not row["first_pr_at"]:
                row["first_pr_at"] = stamp(env)
                row["time_to_first_pr_seconds"] = seconds_between(row["created_at"], row["first_pr_at"])
        elif isinstance(e, ev.SessionCompleted):
            cost = (e.result or {}).get("total_cost_usd")
            positive = isinstance(cost, (int, float)) and not isinstance(cost, bool) and 0 < cost < float("inf")
            agent["cost"] = float(cost) if positive else 0.0
            costs = [s["cost"] for _, s in sorted(agents.items()) if s["cost"] > 0]
            row["total_cost_usd"] = round(math.fsum(costs), 6)
            row["agent_count_with_cost"] = len(costs)


def board_status(row: dict[str, Any]) -> str:
    """A run is blocked if any agent is blocked (while it is not ended)."""
    status = row["execution_status"]
    if status not in ENDED and row["blocker_count"]:
        return "blocked"
    return status


def board_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the board answers it (without the fold's per-agent state)."""
    return {k: v for k, v in row.items() if k != "agents"}

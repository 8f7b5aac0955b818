"""Fleet board read model: one comparable row per run, newest first.

``fleet/<tenant>/<run_id>`` rows live in partition ``fleet/<tenant>`` (group = project
slug, sort = ``created_at|run_id``, status = the board status), so the board pages with a
key range and filters by project and status in the index. Each row: status, progress
(the feed's six buckets, by the same pixel rules), blockers, cost (the feed's ``run_cost``
total: each agent's CLI report, else what the model proxy metered), time to the first pull request (-1 before one) and latest activity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from domain.studio import events as ev
from domain.studio.policies.pixel import PROGRESS_BUCKETS, pixel_state, progress_bucket
from domain.studio.session import SessionState, after_event
from domain.workspaces.events import UsageRecorded
from projections.engine.docs import Docs, Projector, handles, tenant_scoped
from projections.engine.envelope import Envelope
from projections.engine.stamps import seconds_between, stamp
from projections.studio import agent_cost
from projections.studio.pixels import activity_after

BOARD_STATUSES = ("ready", "scheduled", "running", "blocked", "completed", "cleaned_up")
ENDED = ("completed", "cleaned_up")


fleet_doc_key = tenant_scoped("fleet")


def fleet_partition(tenant: str) -> str:
    return f"fleet/{tenant}"


def sort_key(row: dict[str, Any]) -> str:
    return f"{row['created_at']}|{row['run_id']}"


Change = Callable[..., None]


def _nothing_else(*_: Any) -> None:
    """The event moves nothing but the times (and a session's status, by the state machine)."""


def _run_event(change: Change) -> Change:
    """The handler of a run event: ``change(row, e, env)`` on the run's row, saved after."""

    @functools.wraps(change)
    def handler(self: FleetProjector, e: Any, env: Envelope, docs: Docs) -> None:
        row = self._touched(env, docs)
        if row is not None:
            change(row, e, env)
            self._save(docs, row)

    return handler


def _session_event(change: Change) -> Change:
    """The handler of a session event: its agent's status, activity, progress bucket and
    blocker moved, then ``change(row, agent, e, env)``; the row saved after."""

    @functools.wraps(change)
    def handler(self: FleetProjector, e: Any, env: Envelope, docs: Docs) -> None:
        row = self._touched(env, docs)
        if row is None:
            return
        agent = row["agents"].get(env.agent_id)
        if agent is not None:
            _moved(row, agent, e, env.name)
            change(row, agent, e, env)
        self._save(docs, row)

    return handler


def _moved(row: dict[str, Any], agent: dict[str, Any], e: Any, name: str) -> None:
    agents = row["agents"]
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


class FleetProjector(Projector):
    name = "fleet"

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        self._save(docs, {
            "run_id": env.run_id,
            "tenant_id": env.tenant,
            "project_slug": e.project_slug,
            "template_id": e.template_id,
            "launched_by": e.launched_by,
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
        })

    # -- run events -------------------------------------------------------------------------

    @handles(ev.ExecutionRequested)
    @_run_event
    def execution_requested(row: dict[str, Any], e: ev.ExecutionRequested, env: Envelope) -> None:
        if not e.follow_up:
            row["execution_status"] = "scheduled"

    @handles(ev.ExecutionStarted)
    @_run_event
    def execution_started(row: dict[str, Any], e: ev.ExecutionStarted, env: Envelope) -> None:
        row["execution_status"] = "running"
        row["started_at"] = e.started_at

    @handles(ev.TickRecorded)
    @_run_event
    def tick_recorded(row: dict[str, Any], e: ev.TickRecorded, env: Envelope) -> None:
        row["tick"] = e.tick

    @handles(ev.RunCompleted)
    @_run_event
    def run_completed(row: dict[str, Any], e: ev.RunCompleted, env: Envelope) -> None:
        row["execution_status"] = "completed"
        row["ended_at"] = e.at or env.at

    @handles(ev.RunCleanedUp)
    @_run_event
    def run_cleaned_up(row: dict[str, Any], e: ev.RunCleanedUp, env: Envelope) -> None:
        row["execution_status"] = "cleaned_up"
        row["ended_at"] = e.at or env.at

    # Run events that move only the row's latest activity.
    run_session_opened = handles(ev.RunSessionOpened)(_run_event(_nothing_else))
    handoff_recorded = handles(ev.HandoffRecorded)(_run_event(_nothing_else))
    preview_shared = handles(ev.PreviewShared)(_run_event(_nothing_else))
    control_recorded = handles(ev.ControlRecorded)(_run_event(_nothing_else))
    process_assigned = handles(ev.ProcessAssigned)(_run_event(_nothing_else))

    # -- session events ---------------------------------------------------------------------

    @handles(ev.SessionOpened)
    def session_opened(self, e: ev.SessionOpened, env: Envelope, docs: Docs) -> None:
        row = self._touched(env, docs)
        if row is None:
            return
        if env.agent_id not in row["agents"]:
            row["agents"][env.agent_id] = {
                "live_status": "ready", "activity": "", "bucket": "idle", "code": "", "blocker": "", "cost": 0.0,
            }
            row["progress"]["total_agents"] += 1
            row["progress"]["idle"] += 1
        self._save(docs, row)

    @handles(ev.PullRequestOpened)
    @_session_event
    def pull_request_opened(row: dict[str, Any], agent: dict[str, Any], e: ev.PullRequestOpened, env: Envelope) -> None:
        row["pr_count"] += 1
        if not row["first_pr_at"]:
            row["first_pr_at"] = stamp(env)
            row["time_to_first_pr_seconds"] = seconds_between(row["created_at"], row["first_pr_at"])

    @handles(ev.SessionCompleted)
    @_session_event
    def session_completed(row: dict[str, Any], agent: dict[str, Any], e: ev.SessionCompleted, env: Envelope) -> None:
        cost = agent_cost.cost_in(e.result)
        if cost is not None:
            agent_cost.reported(agent, cost)
            _total(row)

    @handles(UsageRecorded)
    def usage_recorded(self, e: UsageRecorded, env: Envelope, docs: Docs) -> None:
        """A metered model request of an agent: its cost, unless its CLI reports its own."""
        row = docs.get(fleet_doc_key(e.tenant, e.run_id)) if e.run_id else None
        if row is None or e.agent_id not in row["agents"]:
            return
        agent_cost.metered(row["agents"][e.agent_id], e.cost_usd)
        _total(row)
        self._save(docs, row)

    # Session events that move only their agent (status, activity, bucket, blocker) and the times.
    process_started = handles(ev.ProcessStarted)(_session_event(_nothing_else))
    controller_action_observed = handles(ev.ControllerActionObserved)(_session_event(_nothing_else))
    tool_called = handles(ev.ToolCalled)(_session_event(_nothing_else))
    tool_call_failed = handles(ev.ToolCallFailed)(_session_event(_nothing_else))
    model_reported = handles(ev.ModelReported)(_session_event(_nothing_else))
    assistant_message = handles(ev.AssistantMessage)(_session_event(_nothing_else))
    runner_output = handles(ev.RunnerOutput)(_session_event(_nothing_else))
    blocked = handles(ev.Blocked)(_session_event(_nothing_else))
    unblocked = handles(ev.Unblocked)(_session_event(_nothing_else))
    handed_off = handles(ev.HandedOff)(_session_event(_nothing_else))
    control_applied = handles(ev.ControlApplied)(_session_event(_nothing_else))
    paused = handles(ev.Paused)(_session_event(_nothing_else))
    request_queued = handles(ev.RequestQueued)(_session_event(_nothing_else))
    resumed = handles(ev.Resumed)(_session_event(_nothing_else))
    message_delivered = handles(ev.MessageDelivered)(_session_event(_nothing_else))
    process_restarted = handles(ev.ProcessRestarted)(_session_event(_nothing_else))
    start_failed = handles(ev.StartFailed)(_session_event(_nothing_else))
    self_healed = handles(ev.SelfHealed)(_session_event(_nothing_else))
    workspace_restarted = handles(ev.WorkspaceRestarted)(_session_event(_nothing_else))
    process_switched = handles(ev.ProcessSwitched)(_session_event(_nothing_else))
    task_card_changed = handles(ev.TaskCardChanged)(_session_event(_nothing_else))
    stopped = handles(ev.Stopped)(_session_event(_nothing_else))

    # -- finding and storing ----------------------------------------------------------------

    @staticmethod
    def _touched(env: Envelope, docs: Docs) -> dict[str, Any] | None:
        """The run's row, its latest activity moved to the event's, or None (a run this
        model never saw launched)."""
        row = docs.get(fleet_doc_key(env.tenant, env.run_id))
        if row is not None:
            row["latest_activity_at"] = max(row["latest_activity_at"], stamp(env))
        return row

    @staticmethod
    def _save(docs: Docs, row: dict[str, Any]) -> None:
        row["status"] = board_status(row)
        tenant = row["tenant_id"]
        docs.put(fleet_doc_key(tenant, row["run_id"]), row, partition=fleet_partition(tenant), group=row["project_slug"],
                 sort_key=sort_key(row), status=row["status"])


def _total(row: dict[str, Any]) -> None:
    """The run's cost as its feed's ``run_cost`` sums it (each agent's CLI report, else the meter's)."""
    row["total_cost_usd"], row["agent_count_with_cost"] = agent_cost.shown(row["agents"].values())


def board_status(row: dict[str, Any]) -> str:
    """A run is blocked if any agent is blocked (while it is not ended)."""
    status = row["execution_status"]
    if status not in ENDED and row["blocker_count"]:
        return "blocked"
    return status


def board_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the board answers it (without the fold's per-agent state)."""
    return {k: v for k, v in row.items() if k != "agents"}

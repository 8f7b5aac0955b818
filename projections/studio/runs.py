"""Runs read model: run records with session state, per-tick reports, handoff trail, queue.

Documents (table ``rm_runs``):
- ``run/<tenant>/<run_id>``: the run record and its sessions (partition ``runs/<tenant>``,
  group = project slug, sort = created_at, status = the run's derived status);
- ``report/<tenant>/<run_id>/<tick>``: one report per recorded tick (a tick that changed
  something; ``quiet_ticks`` counts the unrecorded ones before it);
- ``handoff/<tenant>/<run_id>/<n>``: the handoff trail in order;
- ``queue/<tenant>/<run_id>``: ``pendingRunExecution`` entries (partition ``queue``, sorted
  by the first unserved ``requested_at``), removed when the run ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from domain.studio import events as ev
from domain.studio.session import BLOCKED, OPENED, SessionState, after_event, moves_status
from projections.engine.docs import Docs, Projector, handles, tenant_scoped
from projections.engine.envelope import Envelope

ENDED = ("completed", "cleaned_up")
SESSION_FIELDS = (
    "agent_id",
    "role_key",
    "agent_nickname",
    "session_id",
    "llm_session_id",
    "live_status",
    "current_step",
    "blocker_code",
    "tool_call_count",
)


run_doc_key = tenant_scoped("run")
report_partition = tenant_scoped("reports")
handoff_partition = tenant_scoped("handoffs")


def derived_status(run: dict[str, Any]) -> str:
    """A run is blocked if any agent is blocked (while it is scheduled or running)."""
    status = run["execution_status"]
    if status in ENDED:
        return status
    if run["blocker_count"]:
        return "blocked"
    return status


Change = Callable[..., None]


def _run_event(change: Change) -> Change:
    """The handler of a run event: ``change(self, e, env, docs, run)`` on the run's record
    (touched at the event's time), saved after; the queue entry, which holds nothing else,
    is rewritten only when the run's status or request time moved."""

    @functools.wraps(change)
    def handler(self: RunsProjector, e: Any, env: Envelope, docs: Docs) -> None:
        run = self._touched(env, docs)
        if run is None:
            return
        queued = run["execution_status"], run["requested_at"]
        change(self, e, env, docs, run)
        self._save(docs, run, queue=(run["execution_status"], run["requested_at"]) != queued)

    return handler


def _session_event(change: Change) -> Change:
    """The handler of a session event: its status moved by the session state machine, then
    ``change(session, e)`` on the session's record; session events never move the queue."""

    @functools.wraps(change)
    def handler(self: RunsProjector, e: Any, env: Envelope, docs: Docs) -> None:
        run = self._touched(env, docs)
        if run is None:
            return
        session = run["sessions"].get(env.agent_id)
        if session is not None:
            session["last_event_at"] = max(session["last_event_at"], env.at)
            if moves_status(e):
                blocked_before = session["live_status"] == BLOCKED
                state = after_event(SessionState(session["live_status"], session["current_step"], session["blocker_code"]), e)
                session["live_status"], session["current_step"], session["blocker_code"] = state
                # ``blocker_count`` (the sessions blocked now) moves with the one session that moved
                run["blocker_count"] += (state.live_status == BLOCKED) - blocked_before
            change(session, e)
        self._save(docs, run, queue=False)

    return handler


def _status_only(session: dict[str, Any], e: Any) -> None:
    """The event changes the session's record by its status and times only."""


class RunsProjector(Projector):
    name = "runs"

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        run = {
            "run_id": env.run_id,
            "tenant_id": env.tenant,
            "project_slug": e.project_slug,
            "template_id": e.template_id,
            "agent_process_kind": e.agent_process_kind,
            "work_scope": e.work_scope,
            "next_goal": e.next_goal,
            "agent_roster": e.roster,
            "source_ref": e.source_ref,
            "proposal": e.proposal,
            "launched_by": e.launched_by,
            "source_run_id": e.source_run_id,
            "execution_status": "ready",
            "status": "ready",
            "created_at": env.at,
            "updated_at": env.at,
            "requested_at": "",
            "last_requested_at": "",
            "execution_requests": 0,
            "started_at": "",
            "ended_at": "",
            "tick": 0,
            "report_count": 0,
            "handoff_count": 0,
            "control_count": 0,
            "preview": None,
            "sessions": {},
            "session_order": [],
            "blocker_count": 0,
            "latest_activity_at": env.at,
            "summary": {},
        }
        self._save(docs, run)

    # -- run events -------------------------------------------------------------------------

    @handles(ev.RunSessionOpened)
    @_run_event
    def run_session_opened(self, e: ev.RunSessionOpened, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        if e.agent_id not in run["session_order"]:
            run["session_order"].append(e.agent_id)

    @handles(ev.ExecutionRequested)
    @_run_event
    def execution_requested(self, e: ev.ExecutionRequested, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["execution_requests"] += 1
        run["last_requested_at"] = e.requested_at
        if not e.follow_up:
            run["execution_status"] = "scheduled"
            run["requested_at"] = e.requested_at

    @handles(ev.ExecutionStarted)
    @_run_event
    def execution_started(self, e: ev.ExecutionStarted, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["execution_status"] = "running"
        run["started_at"] = e.started_at

    @handles(ev.TickRecorded)
    @_run_event
    def tick_recorded(self, e: ev.TickRecorded, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        tenant, run_id, tick = run["tenant_id"], run["run_id"], e.tick
        run["tick"] = tick
        run["report_count"] += 1
        docs.put(
            f"report/{tenant}/{run_id}/{tick:09d}",
            {"run_id": run_id, **e.report},
            partition=report_partition(tenant, run_id),
            sort_key=f"{tick:09d}",
            status=str(e.report.get("status", "")),
        )

    @handles(ev.HandoffRecorded)
    @_run_event
    def handoff_recorded(self, e: ev.HandoffRecorded, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        tenant, run_id = run["tenant_id"], run["run_id"]
        run["handoff_count"] += 1
        seq = run["handoff_count"]
        docs.put(
            f"handoff/{tenant}/{run_id}/{seq:06d}",
            {
                "sequence": seq,
                "handoff_id": e.handoff_id,
                "from_agent_id": e.from_agent_id,
                "to_agent_id": e.to_agent_id,
                "to_session_id": e.to_session_id,
                "kind": e.kind,
                "reason": e.reason,
                "thread_id": e.thread_id,
                "actor": e.actor,
                "created_at": env.at,
            },
            partition=handoff_partition(tenant, run_id),
            sort_key=f"{seq:06d}",
        )

    @handles(ev.PreviewShared)
    @_run_event
    def preview_shared(self, e: ev.PreviewShared, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["preview"] = {**e.preview, "run_id": run["run_id"], "updated_at": e.updated_at}

    @handles(ev.ControlRecorded)
    @_run_event
    def control_recorded(self, e: ev.ControlRecorded, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["control_count"] += 1

    @handles(ev.RunCompleted)
    @_run_event
    def run_completed(self, e: ev.RunCompleted, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["execution_status"] = "completed"
        run["ended_at"] = e.at
        run["summary"] = e.summary

    @handles(ev.RunCleanedUp)
    @_run_event
    def run_cleaned_up(self, e: ev.RunCleanedUp, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        run["execution_status"] = "cleaned_up"
        run["ended_at"] = e.at
        run["summary"] = {"actor": e.actor, "reason": e.reason}

    # -- session events ---------------------------------------------------------------------

    @handles(ev.SessionOpened)
    def session_opened(self, e: ev.SessionOpened, env: Envelope, docs: Docs) -> None:
        run = self._touched(env, docs)
        if run is None:
            return
        process = e.process
        reopened = run["sessions"].get(e.agent_id)
        if reopened is not None and reopened["live_status"] == BLOCKED:
            run["blocker_count"] -= 1
        run["sessions"][e.agent_id] = {
            "agent_id": e.agent_id,
            "role_key": e.role_key,
            "agent_nickname": e.agent_nickname,
            "alias": e.alias,
            "title": e.title,
            "session_id": e.session_id,
            "llm_session_id": "",
            "live_status": OPENED.live_status,
            "current_step": OPENED.current_step,
            "blocker_code": OPENED.blocker_code,
            "tool_call_count": 0,
            "agent_provider": process.get("provider", ""),
            "agent_model": process.get("model", ""),
            "agent_effort": process.get("effort", ""),
            "agent_speed": process.get("speed", ""),
            "joined_via": e.joined_via,
            "created_at": env.at,
            "last_event_at": env.at,
        }
        self._save(docs, run, queue=False)

    @handles(ev.ProcessStarted)
    @_session_event
    def process_started(session: dict[str, Any], e: ev.ProcessStarted) -> None:
        session["llm_session_id"] = e.llm_session_id
        if e.model_ran or "model_ran" in session:
            session["model_ran"] = e.model_ran
        if e.confinement:  # (absent from records of events stored before the sandbox)
            session["confinement"] = dict(e.confinement)

    @handles(ev.ToolCalled)
    @_session_event
    def tool_called(session: dict[str, Any], e: ev.ToolCalled) -> None:
        session["tool_call_count"] += 1

    # Fields a session record gains only once there is something to say (a record projected
    # from events older than them stays byte for byte what it was): failed tool calls, and
    # the model the agent CLI says it ran.
    @handles(ev.ToolCallFailed)
    @_session_event
    def tool_call_failed(session: dict[str, Any], e: ev.ToolCallFailed) -> None:
        session["failed_tool_call_count"] = session.get("failed_tool_call_count", 0) + 1

    @handles(ev.ModelReported)
    @_session_event
    def model_reported(session: dict[str, Any], e: ev.ModelReported) -> None:
        session["model_ran"] = e.model

    @handles(ev.ProcessRestarted)
    @_session_event
    def process_restarted(session: dict[str, Any], e: ev.ProcessRestarted) -> None:
        session["llm_session_id"] = e.llm_session_id

    @handles(ev.WorkspaceRestarted)
    @_session_event
    def workspace_restarted(session: dict[str, Any], e: ev.WorkspaceRestarted) -> None:
        session["llm_session_id"] = ""

    @handles(ev.ProcessSwitched)
    @_session_event
    def process_switched(session: dict[str, Any], e: ev.ProcessSwitched) -> None:
        process = e.process
        session["agent_provider"] = process.get("provider", session["agent_provider"])
        session["agent_model"] = process.get("model", session["agent_model"])
        session["agent_effort"] = process.get("effort", session["agent_effort"])
        session["agent_speed"] = process.get("speed", session["agent_speed"])

    # Events that change a session's record only by its status, step and blocker (the
    # session state machine, ``domain.studio.session``) and its last event's time.
    blocked = handles(ev.Blocked)(_session_event(_status_only))
    unblocked = handles(ev.Unblocked)(_session_event(_status_only))
    handed_off = handles(ev.HandedOff)(_session_event(_status_only))
    pull_request_opened = handles(ev.PullRequestOpened)(_session_event(_status_only))
    session_completed = handles(ev.SessionCompleted)(_session_event(_status_only))
    stopped = handles(ev.Stopped)(_session_event(_status_only))
    paused = handles(ev.Paused)(_session_event(_status_only))
    resumed = handles(ev.Resumed)(_session_event(_status_only))
    controller_action_observed = handles(ev.ControllerActionObserved)(_session_event(_status_only))
    message_delivered = handles(ev.MessageDelivered)(_session_event(_status_only))
    control_applied = handles(ev.ControlApplied)(_session_event(_status_only))
    # -- finding ----------------------------------------------------------------------------

    @staticmethod
    def _touched(env: Envelope, docs: Docs) -> dict[str, Any] | None:
        """The record of the event's run, its times moved to the event's, or None: events of
        a run this model never saw launched have nothing to attach to."""
        run = docs.get(run_doc_key(env.tenant, env.run_id))
        if run is not None:
            run["updated_at"] = max(run["updated_at"], env.at)
            run["latest_activity_at"] = max(run["latest_activity_at"], env.at)
        return run

    # -- storing ----------------------------------------------------------------------------

    @staticmethod
    def _save(docs: Docs, run: dict[str, Any], *, queue: bool = True) -> None:
        run["status"] = derived_status(run)
        tenant, run_id = run["tenant_id"], run["run_id"]
        docs.put(
            run_doc_key(tenant, run_id),
            run,
            partition=f"runs/{tenant}",
            group=run["project_slug"],
            sort_key=f"{run['created_at']}|{run_id}",
            status=run["status"],
        )
        if not queue:
            return
        queue_key = f"queue/{tenant}/{run_id}"
        status = run["execution_status"]
        if status in ("scheduled", "running"):
            docs.put(
                queue_key,
                {"tenant": tenant, "run_id": run_id, "status": status, "requested_at": run["requested_at"]},
                partition="queue",
                sort_key=f"{run['requested_at']}|{tenant}|{run_id}",
                status=status,
            )
        elif status in ENDED:
            docs.delete(queue_key)

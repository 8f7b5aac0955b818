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

from collections.abc import Callable
from typing import Any

from domain.studio import events as ev
from domain.studio.session_state import BLOCKED, OPENED, SessionState, after_event, moves_status
from projections.engine.by_type import ByType
from projections.engine.docs import Docs, Projector
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


def run_doc_key(tenant: str, run_id: str) -> str:
    return f"run/{tenant}/{run_id}"


def report_partition(tenant: str, run_id: str) -> str:
    return f"reports/{tenant}/{run_id}"


def handoff_partition(tenant: str, run_id: str) -> str:
    return f"handoffs/{tenant}/{run_id}"


def derived_status(run: dict[str, Any]) -> str:
    """A run is blocked if any agent is blocked (while it is scheduled or running)."""
    status = run["execution_status"]
    if status in ENDED:
        return status
    if run["blocker_count"]:
        return "blocked"
    return status


def _switched(session: dict[str, Any], e: ev.ProcessSwitched) -> None:
    process = e.process
    session["agent_provider"] = process.get("provider", session["agent_provider"])
    session["agent_model"] = process.get("model", session["agent_model"])
    session["agent_effort"] = process.get("effort", session["agent_effort"])
    session["agent_speed"] = process.get("speed", session["agent_speed"])


def _tool_called(session: dict[str, Any], e: ev.ToolCalled) -> None:
    session["tool_call_count"] += 1


# Fields a session record gains only once there is something to say (a record projected
# from events older than them stays byte for byte what it was): failed tool calls, and the
# model the agent CLI says it ran.
def _tool_call_failed(session: dict[str, Any], e: ev.ToolCallFailed) -> None:
    session["failed_tool_call_count"] = session.get("failed_tool_call_count", 0) + 1


def _process_started(session: dict[str, Any], e: ev.ProcessStarted) -> None:
    session["llm_session_id"] = e.llm_session_id
    if e.model_ran or "model_ran" in session:
        session["model_ran"] = e.model_ran
    if e.confinement:  # (absent from records of events stored before the sandbox)
        session["confinement"] = dict(e.confinement)


def _model_reported(session: dict[str, Any], e: ev.ModelReported) -> None:
    session["model_ran"] = e.model


# What a session event changes in the session's record besides its status, by event class.
SESSION_CHANGES: ByType[Callable[[dict[str, Any], Any], None]] = ByType(
    {
        ev.ProcessStarted: _process_started,
        ev.ToolCalled: _tool_called,
        ev.ToolCallFailed: _tool_call_failed,
        ev.ModelReported: _model_reported,
        ev.ProcessRestarted: lambda session, e: session.__setitem__("llm_session_id", e.llm_session_id),
        ev.WorkspaceRestarted: lambda session, e: session.__setitem__("llm_session_id", ""),
        ev.ProcessSwitched: _switched,
    }
)


class RunsProjector(Projector):
    name = "runs"
    topics = frozenset(
        {
            "Run.Launched",
            "Run.SessionOpened",
            "Run.ExecutionRequested",
            "Run.ExecutionStarted",
            "Run.TickRecorded",
            "Run.HandoffRecorded",
            "Run.PreviewShared",
            "Run.ControlRecorded",
            "Run.Completed",
            "Run.CleanedUp",
            "AgentSession.Opened",
            "AgentSession.ProcessStarted",
            "AgentSession.ToolCalled",
            "AgentSession.ToolCallFailed",
            "AgentSession.ModelReported",
            "AgentSession.ControllerActionObserved",
            "AgentSession.Blocked",
            "AgentSession.Unblocked",
            "AgentSession.HandedOff",
            "AgentSession.PullRequestOpened",
            "AgentSession.Completed",
            "AgentSession.Stopped",
            "AgentSession.Paused",
            "AgentSession.Resumed",
            "AgentSession.ProcessSwitched",
            "AgentSession.MessageDelivered",
            "AgentSession.ControlApplied",
            "AgentSession.ProcessRestarted",
            "AgentSession.WorkspaceRestarted",
        }
    )

    def apply(self, env: Envelope, docs: Docs) -> None:
        tenant, run_id = env.tenant, env.run_id
        key = run_doc_key(tenant, run_id)
        e = env.event
        if isinstance(e, ev.RunLaunched):
            run = {
                "run_id": run_id,
                "tenant_id": tenant,
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
            self._save(docs, key, run)
            return
        if e is None:
            return  # a payload that fits no contract: nothing typed to fold
        run = docs.get(key)
        if run is None:
            return  # events of a run this model never saw launched: nothing to attach to
        run["updated_at"] = max(run["updated_at"], env.at)
        run["latest_activity_at"] = max(run["latest_activity_at"], env.at)
        if env.aggregate_type == "Run":
            queued = run["execution_status"], run["requested_at"]
            self._run_event(env, docs, run)
            # The queue entry holds nothing else: rewritten only when one of them moved.
            self._save(docs, key, run, queue=(run["execution_status"], run["requested_at"]) != queued)
        else:
            self._session_event(env, run)
            self._save(docs, key, run, queue=False)  # session events never move the queue

    # -- run events -------------------------------------------------------------------------

    def _run_event(self, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        tenant, run_id = run["tenant_id"], run["run_id"]
        match env.event:
            case ev.RunSessionOpened(agent_id=agent_id):
                if agent_id not in run["session_order"]:
                    run["session_order"].append(agent_id)
            case ev.ExecutionRequested(requested_at=requested_at, follow_up=follow_up):
                run["execution_requests"] += 1
                run["last_requested_at"] = requested_at
                if not follow_up:
                    run["execution_status"] = "scheduled"
                    run["requested_at"] = requested_at
            case ev.ExecutionStarted(started_at=started_at):
                run["execution_status"] = "running"
                run["started_at"] = started_at
            case ev.TickRecorded(tick=tick, report=report):
                run["tick"] = tick
                run["report_count"] += 1
                docs.put(
                    f"report/{tenant}/{run_id}/{tick:09d}",
                    {"run_id": run_id, **report},
                    partition=report_partition(tenant, run_id),
                    sort_key=f"{tick:09d}",
                    status=str(report.get("status", "")),
                )
            case ev.HandoffRecorded() as h:
                run["handoff_count"] += 1
                seq = run["handoff_count"]
                docs.put(
                    f"handoff/{tenant}/{run_id}/{seq:06d}",
                    {
                        "sequence": seq,
                        "handoff_id": h.handoff_id,
                        "from_agent_id": h.from_agent_id,
                        "to_agent_id": h.to_agent_id,
                        "to_session_id": h.to_session_id,
                        "kind": h.kind,
                        "reason": h.reason,
                        "thread_id": h.thread_id,
                        "actor": h.actor,
                        "created_at": env.at,
                    },
                    partition=handoff_partition(tenant, run_id),
                    sort_key=f"{seq:06d}",
                )
            case ev.PreviewShared(preview=preview, updated_at=updated_at):
                run["preview"] = {**preview, "run_id": run_id, "updated_at": updated_at}
            case ev.ControlRecorded():
                run["control_count"] += 1
            case ev.RunCompleted(at=at, summary=summary):
                run["execution_status"] = "completed"
                run["ended_at"] = at
                run["summary"] = summary
            case ev.RunCleanedUp(at=at, actor=actor, reason=reason):
                run["execution_status"] = "cleaned_up"
                run["ended_at"] = at
                run["summary"] = {"actor": actor, "reason": reason}

    # -- session events ---------------------------------------------------------------------

    def _session_event(self, env: Envelope, run: dict[str, Any]) -> None:
        e = env.event
        if isinstance(e, ev.SessionOpened):
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
            return
        session = self._session(run, env)
        if session is None:
            return
        session["last_event_at"] = max(session["last_event_at"], env.at)
        if moves_status(e):
            blocked_before = session["live_status"] == BLOCKED
            state = after_event(SessionState(session["live_status"], session["current_step"], session["blocker_code"]), e)
            session["live_status"], session["current_step"], session["blocker_code"] = state
            # ``blocker_count`` (the sessions blocked now) moves with the one session that moved
            run["blocker_count"] += (state.live_status == BLOCKED) - blocked_before
        change = SESSION_CHANGES.get(e)
        if change is not None:
            change(session, e)

    @staticmethod
    def _session(run: dict[str, Any], env: Envelope) -> dict[str, Any] | None:
        return run["sessions"].get(env.agent_id)

    # -- storing ----------------------------------------------------------------------------

    @staticmethod
    def _save(docs: Docs, key: str, run: dict[str, Any], *, queue: bool = True) -> None:
        run["status"] = derived_status(run)
        tenant, run_id = run["tenant_id"], run["run_id"]
        docs.put(
            key,
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

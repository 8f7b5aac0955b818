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

from typing import Any

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
    if any(s["live_status"] == "blocked" for s in run["sessions"].values()):
        return "blocked"
    return status


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
        }
    )

    def apply(self, env: Envelope, docs: Docs) -> None:
        tenant, run_id = env.tenant, env.run_id
        key = run_doc_key(tenant, run_id)
        d = env.data
        if env.kind == "Run.Launched":
            run = {
                "run_id": run_id,
                "tenant_id": tenant,
                "project_slug": d["project_slug"],
                "template_id": d["template_id"],
                "agent_process_kind": d["agent_process_kind"],
                "work_scope": d["work_scope"],
                "next_goal": d["next_goal"],
                "agent_roster": d["roster"],
                "source_ref": d["source_ref"],
                "proposal": d["proposal"],
                "launched_by": d["launched_by"],
                "source_run_id": d.get("source_run_id", ""),
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
        run = docs.get(key)
        if run is None:
            return  # events of a run this model never saw launched: nothing to attach to
        run["updated_at"] = max(run["updated_at"], env.at)
        run["latest_activity_at"] = max(run["latest_activity_at"], env.at)
        if env.aggregate_type == "Run":
            self._run_event(env, docs, run)
        else:
            self._session_event(env, run)
        self._save(docs, key, run)

    # -- run events -------------------------------------------------------------------------

    def _run_event(self, env: Envelope, docs: Docs, run: dict[str, Any]) -> None:
        d, name = env.data, env.name
        tenant, run_id = run["tenant_id"], run["run_id"]
        if name == "SessionOpened":
            if d["agent_id"] not in run["session_order"]:
                run["session_order"].append(d["agent_id"])
        elif name == "ExecutionRequested":
            run["execution_requests"] += 1
            run["last_requested_at"] = d["requested_at"]
            if not d["follow_up"]:
                run["execution_status"] = "scheduled"
                run["requested_at"] = d["requested_at"]
        elif name == "ExecutionStarted":
            run["execution_status"] = "running"
            run["started_at"] = d["started_at"]
        elif name == "TickRecorded":
            run["tick"] = d["tick"]
            run["report_count"] += 1
            docs.put(
                f"report/{tenant}/{run_id}/{d['tick']:09d}",
                {"run_id": run_id, **d["report"]},
                p=report_partition(tenant, run_id),
                s=f"{d['tick']:09d}",
                st=str(d["report"].get("status", "")),
            )
        elif name == "HandoffRecorded":
            run["handoff_count"] += 1
            seq = run["handoff_count"]
            docs.put(
                f"handoff/{tenant}/{run_id}/{seq:06d}",
                {
                    "sequence": seq,
                    "handoff_id": d["handoff_id"],
                    "from_agent_id": d["from_agent_id"],
                    "to_agent_id": d["to_agent_id"],
                    "to_session_id": d["to_session_id"],
                    "kind": d["kind"],
                    "reason": d["reason"],
                    "thread_id": d.get("thread_id", ""),
                    "actor": d.get("actor", ""),
                    "created_at": env.at,
                },
                p=handoff_partition(tenant, run_id),
                s=f"{seq:06d}",
            )
        elif name == "PreviewShared":
            run["preview"] = {**d["preview"], "run_id": run_id, "updated_at": d["updated_at"]}
        elif name == "ControlRecorded":
            run["control_count"] += 1
        elif name == "Completed":
            run["execution_status"] = "completed"
            run["ended_at"] = d["at"]
            run["summary"] = d.get("summary", {})
        elif name == "CleanedUp":
            run["execution_status"] = "cleaned_up"
            run["ended_at"] = d["at"]
            run["summary"] = {"actor": d.get("actor", ""), "reason": d.get("reason", "")}

    # -- session events ---------------------------------------------------------------------

    def _session_event(self, env: Envelope, run: dict[str, Any]) -> None:
        d, name = env.data, env.name
        if name == "Opened":
            process = d.get("process", {})
            run["sessions"][d["agent_id"]] = {
                "agent_id": d["agent_id"],
                "role_key": d["role_key"],
                "agent_nickname": d["agent_nickname"],
                "alias": d["alias"],
                "title": d["title"],
                "session_id": d["session_id"],
                "llm_session_id": "",
                "live_status": "ready",
                "current_step": "session_warming",
                "blocker_code": "",
                "tool_call_count": 0,
                "agent_provider": process.get("provider", ""),
                "agent_model": process.get("model", ""),
                "agent_effort": process.get("effort", ""),
                "agent_speed": process.get("speed", ""),
                "joined_via": d.get("joined_via", {}),
                "created_at": env.at,
                "last_event_at": env.at,
            }
            return
        session = self._session(run, env)
        if session is None:
            return
        session["last_event_at"] = max(session["last_event_at"], env.at)
        if name == "ProcessStarted":
            session["llm_session_id"] = d["llm_session_id"]
            session["live_status"] = "waiting_first_tool"
            session["current_step"] = "waiting_first_tool"
        elif name == "ToolCalled":
            session["tool_call_count"] += 1
            session["current_step"] = f"tool:{d['tool_name']}"
            if d.get("first"):
                session["live_status"] = "working"
        elif name == "Blocked":
            session["live_status"] = "blocked"
            session["blocker_code"] = d["code"]
            session["current_step"] = f"blocked:{d['code']}"
        elif name == "Unblocked":
            session["live_status"] = d["resume_status"]
            session["blocker_code"] = ""
            session["current_step"] = d["resume_status"]
        elif name == "HandedOff":
            session["current_step"] = f"handoff:{d['target_agent_id']}"
        elif name == "PullRequestOpened":
            session["current_step"] = "pull_request_opened"
        elif name == "Completed":
            session["live_status"] = "session_completed"
            session["current_step"] = "session_completed"
        elif name == "Stopped":
            session["live_status"] = "stopped"
            session["current_step"] = "stopped"
            session["blocker_code"] = ""
        elif name in ("Paused", "Resumed", "ProcessRestarted"):
            session["live_status"] = d.get("live_status", session["live_status"])
            session["current_step"] = d.get("current_step", session["current_step"])
            if "llm_session_id" in d:
                session["llm_session_id"] = d["llm_session_id"]
            if name == "ProcessRestarted":
                session["blocker_code"] = ""
        elif name == "ProcessSwitched":
            process = d.get("process", {})
            session["agent_provider"] = process.get("provider", session["agent_provider"])
            session["agent_model"] = process.get("model", session["agent_model"])
            session["agent_effort"] = process.get("effort", session["agent_effort"])
            session["agent_speed"] = process.get("speed", session["agent_speed"])

    @staticmethod
    def _session(run: dict[str, Any], env: Envelope) -> dict[str, Any] | None:
        return run["sessions"].get(env.agent_id)

    # -- storing ----------------------------------------------------------------------------

    @staticmethod
    def _save(docs: Docs, key: str, run: dict[str, Any]) -> None:
        run["status"] = derived_status(run)
        run["blocker_count"] = sum(1 for s in run["sessions"].values() if s["live_status"] == "blocked")
        tenant, run_id = run["tenant_id"], run["run_id"]
        docs.put(
            key,
            run,
            p=f"runs/{tenant}",
            g=run["project_slug"],
            s=f"{run['created_at']}|{run_id}",
            st=run["status"],
        )
        queue_key = f"queue/{tenant}/{run_id}"
        status = run["execution_status"]
        if status in ("scheduled", "running"):
            docs.put(
                queue_key,
                {"tenant": tenant, "run_id": run_id, "status": status, "requested_at": run["requested_at"]},
                p="queue",
                s=f"{run['requested_at']}|{tenant}|{run_id}",
                st=status,
            )
        elif status in ENDED:
            docs.delete(queue_key)

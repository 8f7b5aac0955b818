"""Studio run endpoints under ``/v1/admin/studio`` (super_admin only, C2)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import structlog
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import JSONBody, QueryParameter

from api.auth import EdgeJwt
from api.context import CallerDep, caller_dependency, studio_commands, studio_reads
from api.openapi import COMMAND_ERRORS, READ_ERRORS, answers, link
from api.read_your_writes import command
from api.studio.runs_dto import (
    CleanupRequest,
    CleanupResponse,
    ExecuteResponse,
    HandoffTrail,
    LaunchRequest,
    LaunchResponse,
    PreviewRecord,
    PreviewRequest,
    RosterAgentOut,
    RunId,
    RunRecord,
    SessionStateResponse,
    TickReport,
)
from domain.studio.squad import Template

log = structlog.get_logger("squadops.api.studio")


# Links from an answer naming a run to what can be done with the run next.
RUN_ID = "$response.body#/run_id"
RUN_LINKS = {
    "GetRun": link("get_run", run_id=RUN_ID),
    "ExecuteRun": link("execute_run", run_id=RUN_ID),
    "GetSessionState": link("session_state", run_id=RUN_ID),
    "GetReports": link("reports", run_id=RUN_ID),
    "GetHandoffTrail": link("handoff_trail", run_id=RUN_ID),
    "SharePreview": link("share_preview", run_id=RUN_ID),
    "CleanupRun": link("cleanup_run", run_id=RUN_ID),
    "ReplayRun": link("replay_run", run_id=RUN_ID),
    "ControlRun": link("control_run", run_id=RUN_ID),
    "AdminControl": link("admin_control", run_id=RUN_ID),
}
READ = answers(*READ_ERRORS, links={"GetRun": link("get_run", run_id="$request.path.run_id")})
COMMAND = answers(*COMMAND_ERRORS, links={"GetRun": link("get_run", run_id=RUN_ID)})

def launch_answer(run: Any) -> LaunchResponse:
    return LaunchResponse(
        run_id=run.run_id,
        status=run.status,
        agent_roster=[msgspec.convert(a, RosterAgentOut) for a in run.roster],
        source_run_id=run.source_run_id,
    )


@get("/templates", sync_to_thread=False, summary="Studio templates", opt=answers(401, 403, 422))
def list_templates(state: State, caller: CallerDep) -> list[Template]:
    return studio_commands(state).templates.all()


@command(
    "/runs",
    status_code=201,
    summary="Launch a run",
    opt=answers(
        *COMMAND_ERRORS,
        links={
            **RUN_LINKS,
            "GetFeed": link("observability_feed", run_id=RUN_ID, project_slug="$request.body#/project_slug"),
        },
        examples={"demo": {"project_slug": "demo", "template_id": "delivery-core"}},
    ),
)
def launch_run(data: JSONBody[LaunchRequest], state: State, caller: CallerDep) -> LaunchResponse:
    run, _ = studio_commands(state).runs.launch_run(
        tenant=caller.tenant,
        template_id=data.template_id,
        project_slug=data.project_slug,
        agent_process_kind=data.agent_process_kind or data.runtime_kind,
        work_scope=data.work_scope,
        next_goal=data.next_goal,
        launched_by=caller.subject_key,
    )
    structlog.contextvars.bind_contextvars(run_id=run.run_id)
    log.info("run_launched", project_slug=run.project_slug, template_id=run.template_id)
    return launch_answer(run)


@get(
    "/runs/{run_id:str}",
    sync_to_thread=True,
    summary="Run record",
    opt=answers(
        *READ_ERRORS,
        links={
            "GetFeed": link("observability_feed", run_id=RUN_ID, project_slug="$response.body#/project_slug"),
            "GetBoard": link("fleet_board", project_slug="$response.body#/project_slug"),
            "ControlSession": link(
                "control_session", run_id=RUN_ID, session_id="$response.body#/sessions/0/session_id"
            ),
        },
    ),
)
def get_run(run_id: RunId, state: State, caller: CallerDep) -> RunRecord:
    return studio_reads(state).run_record(caller.tenant, run_id)


@command(
    "/runs/{run_id:str}/execute",
    status_code=202,
    wakes_ticker=True,
    summary="Schedule execution",
    opt=answers(
        *COMMAND_ERRORS,
        links={
            "GetRun": link("get_run", run_id=RUN_ID),
            "GetSessionState": link("session_state", run_id=RUN_ID),
        },
    ),
)
def execute_run(run_id: RunId, state: State, caller: CallerDep) -> ExecuteResponse:
    run, requested_at, follow_up = studio_commands(state).runs.request_execution(
        tenant=caller.tenant, run_id=run_id, requested_by=caller.subject_key
    )
    return ExecuteResponse(run_id=run.run_id, status="scheduled", requested_at=requested_at, follow_up=follow_up)


@get(
    "/runs/{run_id:str}/session-state",
    sync_to_thread=True,
    summary="Per-agent session state",
    opt=answers(
        *READ_ERRORS,
        links={
            "ControlSession": link(
                "control_session", run_id=RUN_ID, session_id="$response.body#/sessions/0/session_id"
            ),
        },
    ),
)
def session_state(run_id: RunId, state: State, caller: CallerDep) -> SessionStateResponse:
    return studio_reads(state).session_state(caller.tenant, run_id)


@get("/runs/{run_id:str}/reports", sync_to_thread=True, summary="One report per tick", opt=READ)
def reports(
    run_id: RunId,
    state: State,
    caller: CallerDep,
    # Litestar's OpenAPI drops a bound of 0 (falsy); schema_extra states it.
    after_tick: Annotated[int, QueryParameter(ge=0, le=10**9, schema_extra={"minimum": 0})] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 500,
) -> list[TickReport]:
    return studio_reads(state).reports(caller.tenant, run_id, after_tick=after_tick, limit=limit)


@get("/runs/{run_id:str}/handoff-trail", sync_to_thread=True, summary="Handoff trail", opt=READ)
def handoff_trail(run_id: RunId, state: State, caller: CallerDep) -> HandoffTrail:
    return studio_reads(state).handoff_trail(caller.tenant, run_id)


@command(
    "/runs/{run_id:str}/preview",
    status_code=200,
    summary="Upsert the shared preview",
    opt=COMMAND,
)
def share_preview(
    run_id: RunId, data: JSONBody[PreviewRequest], state: State, caller: CallerDep
) -> PreviewRecord:
    fields = msgspec.structs.asdict(data)
    preview, updated_at = studio_commands(state).runs.share_preview(tenant=caller.tenant, run_id=run_id, fields=fields)
    return msgspec.convert({**preview, "run_id": run_id, "updated_at": updated_at}, PreviewRecord)


@command(
    "/runs/{run_id:str}/cleanup",
    status_code=200,
    summary="Clean up and end the run",
    opt=COMMAND,
)
def cleanup_run(
    run_id: RunId,
    state: State,
    caller: CallerDep,
    data: JSONBody[CleanupRequest | None] = None,
) -> CleanupResponse:
    run, stopped = studio_commands(state).runs.cleanup_run(
        tenant=caller.tenant, run_id=run_id, actor=caller.subject_key, reason=data.reason if data else ""
    )
    return CleanupResponse(run_id=run.run_id, status=run.status, stopped_sessions=stopped)


@command(
    "/runs/{run_id:str}/replay",
    status_code=201,
    summary="Launch again from the same inputs",
    opt=answers(*COMMAND_ERRORS, links=RUN_LINKS),
)
def replay_run(run_id: RunId, state: State, caller: CallerDep) -> LaunchResponse:
    run, _ = studio_commands(state).runs.replay_run(tenant=caller.tenant, run_id=run_id, launched_by=caller.subject_key)
    return launch_answer(run)


def runs_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/v1/admin/studio",
        route_handlers=[
            list_templates,
            launch_run,
            get_run,
            execute_run,
            session_state,
            reports,
            handoff_trail,
            share_preview,
            cleanup_run,
            replay_run,
        ],
        dependencies=caller_dependency(edge, admin=True),
        tags=["studio"],
    )

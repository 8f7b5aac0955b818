"""Studio run endpoints under ``/v1/admin/studio`` (super_admin only, C2)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import structlog
from litestar import Router, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody, PathParameter, QueryParameter

from api.auth import Principal, principal_provider, provide_tenant
from api.reads import Reads
from api.studio_dto import (
    CleanupRequest,
    CleanupResponse,
    ExecuteResponse,
    HandoffTrail,
    LaunchRequest,
    LaunchResponse,
    PreviewRecord,
    PreviewRequest,
    RosterAgentOut,
    RunRecord,
    SessionStateResponse,
    TickReport,
)
from domain.application import SquadOps
from domain.ids import ID_PATTERN
from domain.templates import Template

log = structlog.get_logger("squadops.api.studio")

RunId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="run id")]
App = NamedDependency[SquadOps]
ReadModels = NamedDependency[Reads]
Tenant = NamedDependency[str]
Caller = NamedDependency[Principal]


def launch_answer(run: Any) -> LaunchResponse:
    return LaunchResponse(
        run_id=run.run_id,
        status=run.status,
        agent_roster=[msgspec.convert(a, RosterAgentOut) for a in run.roster],
        source_run_id=run.source_run_id,
    )


@get("/templates", sync_to_thread=False, summary="Studio templates")
def list_templates(app: App, tenant: Tenant, principal: Caller) -> list[Template]:
    return app.templates.all()


@post("/runs", status_code=201, sync_to_thread=True, summary="Launch a run")
def launch_run(
    data: JSONBody[LaunchRequest], app: App, reads: ReadModels, tenant: Tenant, principal: Caller
) -> LaunchResponse:
    run, _ = app.launch_run(
        tenant=tenant,
        template_id=data.template_id,
        project_slug=data.project_slug,
        agent_process_kind=data.agent_process_kind or data.runtime_kind,
        work_scope=data.work_scope,
        next_goal=data.next_goal,
        launched_by=principal.subject_key,
    )
    structlog.contextvars.bind_contextvars(run_id=run.run_id)
    reads.settle()
    log.info("run_launched", project_slug=run.project_slug, template_id=run.template_id)
    return launch_answer(run)


@get("/runs/{run_id:str}", sync_to_thread=True, summary="Run record")
def get_run(run_id: RunId, reads: ReadModels, tenant: Tenant, principal: Caller) -> RunRecord:
    return reads.run_record(tenant, run_id)


@post("/runs/{run_id:str}/execute", status_code=202, sync_to_thread=True, summary="Schedule execution")
def execute_run(
    run_id: RunId, app: App, reads: ReadModels, tenant: Tenant, principal: Caller
) -> ExecuteResponse:
    run, requested_at, follow_up = app.request_execution(
        tenant=tenant, run_id=run_id, requested_by=principal.subject_key
    )
    reads.settle()
    reads.wake_ticker()
    return ExecuteResponse(run_id=run.run_id, status="scheduled", requested_at=requested_at, follow_up=follow_up)


@get("/runs/{run_id:str}/session-state", sync_to_thread=True, summary="Per-agent session state")
def session_state(run_id: RunId, reads: ReadModels, tenant: Tenant, principal: Caller) -> SessionStateResponse:
    return reads.session_state(tenant, run_id)


@get("/runs/{run_id:str}/reports", sync_to_thread=True, summary="One report per tick")
def reports(
    run_id: RunId,
    reads: ReadModels,
    tenant: Tenant,
    principal: Caller,
    after_tick: Annotated[int, QueryParameter(ge=0, le=10**9)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 500,
) -> list[TickReport]:
    return reads.reports(tenant, run_id, after_tick=after_tick, limit=limit)


@get("/runs/{run_id:str}/handoff-trail", sync_to_thread=True, summary="Handoff trail")
def handoff_trail(run_id: RunId, reads: ReadModels, tenant: Tenant, principal: Caller) -> HandoffTrail:
    return reads.handoff_trail(tenant, run_id)


@post("/runs/{run_id:str}/preview", status_code=200, sync_to_thread=True, summary="Upsert the shared preview")
def share_preview(
    run_id: RunId, data: JSONBody[PreviewRequest], app: App, reads: ReadModels, tenant: Tenant, principal: Caller
) -> PreviewRecord:
    fields = msgspec.structs.asdict(data)
    preview, updated_at = app.share_preview(tenant=tenant, run_id=run_id, fields=fields)
    reads.settle()
    return msgspec.convert({**preview, "run_id": run_id, "updated_at": updated_at}, PreviewRecord)


@post("/runs/{run_id:str}/cleanup", status_code=200, sync_to_thread=True, summary="Clean up and end the run")
def cleanup_run(
    run_id: RunId,
    app: App,
    reads: ReadModels,
    tenant: Tenant,
    principal: Caller,
    data: JSONBody[CleanupRequest | None] = None,
) -> CleanupResponse:
    run, stopped = app.cleanup_run(
        tenant=tenant, run_id=run_id, actor=principal.subject_key, reason=data.reason if data else ""
    )
    reads.settle()
    return CleanupResponse(run_id=run.run_id, status=run.status, stopped_sessions=stopped)


@post("/runs/{run_id:str}/replay", status_code=201, sync_to_thread=True, summary="Launch again from the same inputs")
def replay_run(
    run_id: RunId, app: App, reads: ReadModels, tenant: Tenant, principal: Caller
) -> LaunchResponse:
    run, _ = app.replay_run(tenant=tenant, run_id=run_id, launched_by=principal.subject_key)
    reads.settle()
    return launch_answer(run)


def studio_router(jwt_key: str) -> Router:
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
        dependencies={
            "principal": Provide(principal_provider(jwt_key, admin=True), sync_to_thread=False),
            "tenant": Provide(provide_tenant, sync_to_thread=False),
        },
        tags=["studio"],
    )

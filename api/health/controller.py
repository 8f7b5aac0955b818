"""Health and discovery: ``/healthz``, ``/readyz`` and ``/openapi.json``.

``/healthz`` always answers 200 with where the log and each read model stand; its
``status`` is ``degraded`` while a projector is behind or not running (C19). ``/readyz``
answers 200 then, and 503 with the C3 body and ``Retry-After`` while degraded.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.response import Response

from api.context import part, read_store
from api.errors import error_body
from api.openapi import documented_schema
from projections.engine.health import HealthProbe, ReadModelHealth

RETRY_AFTER_SECONDS = 5


class ProjectorState(msgspec.Struct, kw_only=True):
    position: int
    lag: int  # log position minus the projector's position
    lag_seconds: float  # age of the oldest event it has not folded yet
    running: bool  # a runner beat for it within SQUADOPS_PROJECTOR_STALE_SECONDS
    heartbeat_age_seconds: float  # -1 when no runner ever beat for it
    state: str  # ok | behind | not_running


class Health(msgspec.Struct, kw_only=True):
    status: str  # ok | degraded
    database: str
    log_position: int
    projections: dict[str, int]
    projectors: dict[str, ProjectorState] = {}
    detail: str = ""


class ReadModelsDegraded(msgspec.Struct, kw_only=True):
    detail: str
    code: str


def health_of(state: State) -> tuple[Health, ReadModelHealth]:
    probe: HealthProbe = part(state, "health")
    report = probe.check()
    _, detail = report.problem()
    health = Health(
        status="degraded" if report.degraded else "ok",
        database=read_store(state).dialect,
        log_position=report.log_position,
        projections=report.positions,
        projectors={
            p.name: ProjectorState(
                position=p.position,
                lag=p.lag,
                lag_seconds=round(p.lag_seconds, 3),
                running=p.running,
                heartbeat_age_seconds=round(p.heartbeat_age_seconds, 3),
                state=p.state,
            )
            for p in report.projectors
        },
        detail=detail,
    )
    return health, report


@get("/healthz", sync_to_thread=True, summary="Liveness, read-model positions, projector lag and liveness")
def healthz(state: State) -> Health:
    return health_of(state)[0]


@get(
    "/readyz",
    sync_to_thread=True,
    summary="Ready to answer reads: 503 while read models lag or no projector runs",
    responses={503: ResponseSpec(data_container=ReadModelsDegraded, description="read models lag the log")},
)
def readyz(state: State) -> Response[Health]:
    health, report = health_of(state)
    if not report.degraded:
        return Response(health)
    code, detail = report.problem()
    response = error_body(503, detail, code)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@get("/openapi.json", include_in_schema=False, sync_to_thread=False)
def openapi_json(request: Request[Any, Any, Any]) -> Response[Any]:
    return Response(documented_schema(request.app), media_type="application/json")

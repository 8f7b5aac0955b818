"""Health and discovery: ``/healthz`` and ``/openapi.json``."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.response import Response

from api.context import read_models
from api.openapi import documented_schema


class Health(msgspec.Struct, kw_only=True):
    status: str
    database: str
    log_position: int
    projections: dict[str, int]


@get("/healthz", sync_to_thread=True, summary="Liveness and read-model positions")
def healthz(state: State) -> Health:
    reads = read_models(state)
    positions = reads.store.positions()
    return Health(
        status="ok",
        database=reads.store.dialect,
        log_position=reads.log_position(),
        projections=positions,
    )


@get("/openapi.json", include_in_schema=False, sync_to_thread=False)
def openapi_json(request: Request[Any, Any, Any]) -> Response[Any]:
    return Response(documented_schema(request.app), media_type="application/json")

"""A run's feed and the fleet board, read under ``/control-plane/studio`` (C2: participants).

- ``GET /observability-feed?project_slug=&run_id=&limit=``: the run's feed, the stored
  document the ``feed`` read model keeps (access is checked first; ``limit`` slices it);
  ``as_of_event=N`` or ``as_of=<ISO time>`` answers it as it was then, computed from the
  event log (header ``X-Squadops-As-Of-Event``).
- ``GET /runs``: the fleet board, newest first, filtered by project and status, paged with
  an opaque cursor.
"""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import QueryParameter
from litestar.response import Response

from api.access import READ, Access, access_hook, guarded, project_in
from api.auth import EdgeJwt
from api.context import Caller, CallerDep, caller_dependency, part
from api.errors import RequestInvalid
from api.openapi import answers
from api.studio.feed_dto import FleetBoard, ObservabilityFeed
from api.studio.feed_reads import CURSOR_PATTERN, FeedReads
from domain.shared.ids import ID_PATTERN
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT
from projections.studio.time_travel import parse_moment

AS_OF_HEADER = "X-Squadops-As-Of-Event"
JSON = "application/json"

Slug = Annotated[str, QueryParameter(pattern=ID_PATTERN, description="exact project slug")]
RunId = Annotated[str, QueryParameter(pattern=ID_PATTERN, description="run id")]
Limit = Annotated[
    int,
    QueryParameter(ge=1, le=MAX_LIMIT, description="bounds live_events and runtime_logs (most recent first)"),
]
BoardStatus = Literal["ready", "scheduled", "running", "blocked", "completed", "cleaned_up"]


@get(
    "/observability-feed",
    summary="Observability feed of one run",
    opt=guarded(Access(READ, project_in("query", "project_slug")), **answers(401, 403, 404, 409, 422)),
)
async def observability_feed(
    state: State,
    caller: CallerDep,
    project_slug: Slug,
    run_id: RunId,
    limit: Limit = DEFAULT_LIMIT,
    as_of_event: Annotated[
        int | None, QueryParameter(ge=1, required=False, description="answer the feed as it was at this log position")
    ] = None,
    as_of: Annotated[
        str | None,
        QueryParameter(
            max_length=64,
            required=False,
            description="answer the feed as it was at this time (RFC 3339)",
            schema_extra={"format": "date-time"},
        ),
    ] = None,
) -> Response[ObservabilityFeed]:
    if as_of_event is not None and as_of is not None:
        raise RequestInvalid(["query", "as_of"], "give as_of_event or as_of, not both", "value_error", as_of)
    moment = ""
    if as_of is not None:
        try:
            moment = parse_moment(as_of)
        except ValueError as exc:
            raise RequestInvalid(["query", "as_of"], f"as_of is not an ISO 8601 timestamp: {exc}", "datetime_parsing", as_of) from None
    body, headers = await read_feed(state, caller, project_slug, run_id, limit, as_of_event, moment)
    return Response(body, media_type=JSON, headers=headers)


async def read_feed(
    state: State, caller: Caller, project_slug: str, run_id: str, limit: int, as_of_event: int | None = None, moment: str = ""
) -> tuple[bytes, dict[str, str]]:
    """The feed's body and headers, live or as of a past position (also the office page's)."""
    feeds: FeedReads = part(state, "feed_reads")
    tenant = caller.tenant  # who may read the project: the access guard decided
    if as_of_event is None and not moment:
        # A copy in memory that is known current answers at once; else the store, which is
        # blocking I/O: a worker thread reads it.
        body = feeds.feed_copy(tenant, project_slug, run_id, limit, caller.min_position)
        if body is None:
            body = await anyio.to_thread.run_sync(feeds.feed, tenant, project_slug, run_id, limit)
        return body, {}
    body, position = await anyio.to_thread.run_sync(
        lambda: feeds.feed_at(tenant, project_slug, run_id, limit, position=as_of_event, moment=moment)
    )
    return body, {AS_OF_HEADER: str(position)}


@get(
    "/runs",
    sync_to_thread=True,
    summary="Fleet board comparing runs",
    opt=guarded(Access(READ, project_in("query", "project_slug")), **answers(401, 403, 404, 422)),
)
def fleet_board(
    state: State,
    caller: CallerDep,
    project_slug: Annotated[str | None, QueryParameter(pattern=ID_PATTERN, required=False)] = None,
    status: Annotated[BoardStatus | None, QueryParameter(required=False)] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        QueryParameter(max_length=512, required=False, pattern=CURSOR_PATTERN, description="next_cursor of the page before"),
    ] = None,
) -> FleetBoard:
    feeds: FeedReads = part(state, "feed_reads")
    return feeds.fleet(
        caller.principal, caller.tenant, project_slug=project_slug, status=status, limit=limit, cursor=cursor
    )


def feed_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/control-plane/studio",
        route_handlers=[observability_feed, fleet_board],
        dependencies=caller_dependency(edge, admin=False),
        before_request=access_hook,  # the access guard, run as a hook (see ``access_hook``)
        tags=["control-plane"],
    )

"""A run's feed and the fleet board, read under ``/control-plane/studio`` (C2: participants).

- ``GET /observability-feed?project_slug=&run_id=&limit=``: the run's feed, the stored
  document the ``feed`` read model keeps (access is checked first; ``limit`` slices it);
  ``as_of_event=N`` or ``as_of=<ISO time>`` answers it as it was then, computed from the
  event log (header ``X-Squadops-As-Of-Event``).
- ``GET /runs``: the fleet board, newest first, filtered by project and status, paged with
  an opaque cursor.

``FeedReads`` answers them (the web pages read the board and the feed through it too). C2:
who may read a project is decided before these queries run, by the access guard
(``api.access``) on every request, cached composition or not; the fleet board without a
project lists the projects the permission graph lets the caller read. Keys carry the
tenant, so another tenant's run is a 404.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Annotated, Literal

import anyio
import msgspec
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import QueryParameter
from litestar.response import Response

from api.access import READ, Access, access_hook, guarded, project_in
from api.auth import EdgeJwt, Principal
from api.context import Caller, CallerDep, caller_dependency, part
from api.errors import ApiError, RequestInvalid
from api.openapi import answers
from api.studio.feed_dto import BoardRow, FleetBoard, ObservabilityFeed
from domain.portal.graph import ListObjectsRequest, PermissionGraph, identity_tuples, user_ref
from domain.shared.errors import project_not_found, run_not_found
from domain.shared.ids import END, ID_PATTERN
from projections.engine.copies import ReadCopies
from projections.engine.lookups import fetch
from projections.engine.store import DocStore
from projections.portal.relations import NAME as RELATIONS
from projections.portal.relations import store_graph
from projections.projects.projects import project_doc_key
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT, StoreView, feed_reads, run_feed
from projections.studio.feed_doc import FEED, answer, stored_feed_key
from projections.studio.fleet import fleet_doc_key, fleet_partition
from projections.studio.runs import run_doc_key
from projections.studio.time_travel import RunNotYet, TimeTravel, parse_moment, workspace_names

SCAN_PAGES = 20
PROJECTS = "projects"
# The read models a live feed answer is made of (and who may read it): the API keeps copies
# of their documents (``projections.engine.copies``); their projectors announce changes.
COPIED = (PROJECTS, FEED, RELATIONS)


class _Participant(msgspec.Struct):
    subject_key: str = ""
    project_role: str = ""


class _ProjectAccess(msgspec.Struct):
    project_slug: str = ""
    participants: list[_Participant] = []


class _RunHead(msgspec.Struct):
    project_slug: str = ""


_access = msgspec.json.Decoder(_ProjectAccess)
_run_head = msgspec.json.Decoder(_RunHead)
_row = msgspec.json.Decoder(BoardRow)
_encode = msgspec.json.Encoder().encode


# A cursor is a position on the board: the unpadded base64url of the sort key the next page
# starts after. Any such string is a position (the board is ordered by sort key), so a
# well-formed cursor always answers; the OpenAPI document publishes the pattern.
CURSOR_PATTERN = rf"^(?:[A-Za-z0-9_-]{{4}})*(?:[A-Za-z0-9_-]{{2,3}})?{END}"
_CURSOR = re.compile(r"(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?")


def encode_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(sort_key.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    if not _CURSOR.fullmatch(cursor):
        raise RequestInvalid(["query", "cursor"], "cursor is not a board position (base64url)", "value_error", cursor)
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    # NUL cannot be stored in PostgreSQL text; no sort key holds one.
    return raw.decode("utf-8", "replace").replace("\x00", "")


class FeedReads:
    """A run's feed (stored, composed, or as of a past position) and the fleet board."""

    def __init__(
        self,
        store: DocStore,
        time_travel: TimeTravel,
        log_position: Callable[[], int],
        *,
        graph: PermissionGraph | None = None,
        copies: ReadCopies | None = None,
    ) -> None:
        self.store = store
        self.copies = copies
        self.graph = graph if graph is not None else store_graph(store)
        self.time_travel = time_travel
        self.log_position = log_position

    # -- existence ------------------------------------------------------------------------

    def _check_project(self, raw: bytes | None, project_slug: str) -> _ProjectAccess:
        if raw is None:
            raise project_not_found(project_slug)
        return _access.decode(raw)

    def _run_project(self, raw: bytes | None, tenant: str, run_id: str) -> str | None:
        """The run's project, from its board row (the runs model, if the row lags); None: no run."""
        if raw is None:
            raw = self.store.get("runs", run_doc_key(tenant, run_id))
        return _run_head.decode(raw).project_slug if raw is not None else None

    def _check_run(self, raw: bytes | None, tenant: str, run_id: str, project_slug: str) -> None:
        if self._run_project(raw, tenant, run_id) != project_slug:
            raise run_not_found(run_id)

    # -- the feed -------------------------------------------------------------------------

    def feed_copy(self, tenant: str, project_slug: str, run_id: str, limit: int, at_least: int = 0) -> bytes | None:
        """The run's stored feed from memory, current at ``at_least`` or later (access: the
        caller's guard); None: ``feed`` reads the store. No I/O: fit for the event loop."""
        copies = self.copies
        if copies is None or copies.get(PROJECTS, project_doc_key(tenant, project_slug), at_least) is None:
            return None
        key = stored_feed_key(tenant, project_slug, run_id, limit)
        copy = copies.get(FEED, key, at_least)
        if copy is None:
            return None
        if limit in (DEFAULT_LIMIT, MAX_LIMIT):
            return copy.body
        body = copy.derived.get(limit)
        if body is None:
            body = answer(copy.body, limit)
            copies.derive(FEED, key, copy, limit, body)
        return body

    def feed(self, tenant: str, project_slug: str, run_id: str, limit: int) -> bytes:
        """The run's feed: its stored document (access: the caller's guard), else composed now.
        What it read is kept in memory (``feed_copy``) while nothing has replaced it."""
        key, project_key = stored_feed_key(tenant, project_slug, run_id, limit), project_doc_key(tenant, project_slug)
        mark = self.copies.mark() if self.copies is not None else None
        parts = fetch(self.store, {"project": (PROJECTS, project_key), "feed": (FEED, key)})
        project = parts["project"]
        self._check_project(project, project_slug)
        body = parts["feed"]
        if body is not None:
            if self.copies is not None and project is not None:
                self.copies.keep(mark, {(PROJECTS, project_key): project, (FEED, key): body})
            return answer(body, limit)
        # Not stored (the run is unknown, or in another project, or its feed is not
        # projected yet): the composition answers, with the same rules.
        return self.composed_feed(tenant, project_slug, run_id, limit)

    def composed_feed(self, tenant: str, project_slug: str, run_id: str, limit: int) -> bytes:
        """The run's feed produced from its read models now, as the stored one is (what the
        stored one equals)."""
        reads = {"project": (PROJECTS, project_doc_key(tenant, project_slug)), "run": ("fleet", fleet_doc_key(tenant, run_id))}
        parts = fetch(self.store, reads)
        self._check_project(parts["project"], project_slug)
        self._check_run(parts["run"], tenant, run_id, project_slug)
        return run_feed(StoreView(self.store), tenant, run_id, project_slug, limit)

    def feed_at(
        self,
        tenant: str,
        project_slug: str,
        run_id: str,
        limit: int,
        *,
        position: int | None = None,
        moment: str = "",
    ) -> tuple[bytes, int]:
        """The feed as it was at log ``position`` (or at ``moment``), from the event log."""
        reads = {
            "project": (PROJECTS, project_doc_key(tenant, project_slug)),
            "run": ("fleet", fleet_doc_key(tenant, run_id)),
            **feed_reads(tenant, run_id, project_slug),
        }
        wanted = {part: reads[part] for part in ("project", "run", "mirror") if part in reads}
        parts = fetch(self.store, wanted)
        self._check_project(parts["project"], project_slug)
        self._check_run(parts.get("run"), tenant, run_id, project_slug)
        head = self.log_position()
        if position is not None and position > head:
            raise ApiError(
                409, f"as_of_event is beyond the end of the event log (position {head}).", "position_ahead_of_log"
            )
        try:
            return self.time_travel.feed(
                tenant,
                run_id,
                project_slug,
                position=position,
                moment=moment,
                limit=limit,
                workspaces=workspace_names(parts.get("mirror")),
            )
        except RunNotYet:
            when = f"event {position}" if position is not None else moment
            raise ApiError(404, f"Run {run_id!r} did not exist yet at {when}.", "run_not_found") from None

    # -- the fleet board ------------------------------------------------------------------

    def fleet(
        self,
        principal: Principal,
        tenant: str,
        *,
        project_slug: str | None,
        status: str | None,
        limit: int,
        cursor: str | None,
    ) -> FleetBoard:
        before = decode_cursor(cursor) if cursor else ""
        allowed: set[str] | None = None
        if project_slug is not None:  # the guard decided who may read it
            self._check_project(self.store.get("projects", project_doc_key(tenant, project_slug)), project_slug)
        elif not principal.is_super_admin:
            allowed = self._readable_projects(principal, tenant)
            if not allowed:
                return FleetBoard(runs=[], count=0, next_cursor="")
        batch = limit + 1 if allowed is None else max(4 * limit, 200)
        rows: list[BoardRow] = []
        last, more = before, False
        for _ in range(SCAN_PAGES):
            page = self.store.scan(
                "fleet", partition=fleet_partition(tenant), before=last, group=project_slug, status=status, limit=batch, descending=True
            )
            for row in page:
                if allowed is not None and row.group not in allowed:
                    last = row.sort_key
                    continue
                if len(rows) == limit:
                    more = True
                    break
                rows.append(_row.decode(row.body))
                last = row.sort_key
            if more or len(page) < batch:
                break
        else:
            more = True  # the scan bound was reached: the cursor lets the client go on
        return FleetBoard(runs=rows, count=len(rows), next_cursor=encode_cursor(last) if more else "")

    def _readable_projects(self, principal: Principal, tenant: str) -> set[str]:
        """The projects the graph lets ``principal`` read (its list-objects)."""
        request = ListObjectsRequest(
            store=tenant,
            user=user_ref(principal.subject_key),
            relation="viewer",
            type="project",
            contextual_tuples=identity_tuples(principal.subject_key, principal.groups),
        )
        return {obj.partition(":")[2] for obj in self.graph.list_objects(request)}


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

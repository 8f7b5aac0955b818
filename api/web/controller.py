"""The pages (C20): ``/`` fleet board, ``/runs/{run_id}`` a run's office, ``/portal``.

Served by the service itself, no build step: an HTML shell per page plus static ES
modules and CSS under ``/static/``. A page asks for the edge identity exactly as the API
does (C2: no email claim, 401), and the office for the same read right as the feed, so
a page never tells more than the endpoints it is built on. Errors are pages too, carrying
the C3 ``code`` and sentence.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, Router, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import PathParameter, QueryParameter
from litestar.response import Template

from api.access import (
    READ,
    Access,
    access_guard,
    access_hook,
    guarded,
    located_run,
    may_steer,
    project_in,
    run_doc_in_path,
)
from api.auth import EMAIL_HEADER, GROUPS_HEADER, EdgeJwt
from api.context import CallerDep, caller_dependency, part
from api.errors import STATUS_BY_ERROR, ApiError, RequestInvalid
from api.studio.feed import JSON, FeedReads, Limit, Slug, read_feed
from api.studio.feed import RunId as RunQuery
from api.web.launch import launch_form, launchable, templates
from api.web.office_view import BLANK, rooms, with_views
from api.web.pages import asset, page, render
from api.web.portal_view import blocked_runs, pending_reviews, your_projects
from api.web.projects import project_page, pull_page
from api.web.transcript_view import FOLD_CHARS, FOLD_LINES, KEPT_BYTES, reported, transcript
from api.web.verbs import verb_config
from domain.shared.access import ROLES
from domain.shared.errors import DomainError, NotFound
from domain.shared.ids import ID_PATTERN
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT, live_channel_topic

RunId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="run id")]


@get("/", name="web_board", sync_to_thread=True)
def board_page(request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    context = {"launch_projects": launchable(state, caller), "launch_templates": templates(state)}
    return page("board", "Fleet board", caller, request, context=context)


@get("/portal", name="web_portal", sync_to_thread=True)
def portal_page(request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    context = {"projects": your_projects(state, caller), "blocked": blocked_runs(state, caller), "reviews": pending_reviews(state, caller)}
    return page("portal", "Portal", caller, request, context=context)


@get("/portal/projects/new", name="web_project_new", sync_to_thread=False)
def project_new_page(request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    """The project factory's form (anyone signed in may create a project, as the API allows)."""
    context = {"templates": templates(state), "roles": ROLES, "bindings": 3, "participants": 4}
    return page("project_new", "Project factory", caller, request, context=context)


@get(
    "/runs/{run_id:str}",
    name="web_office",
    sync_to_thread=True,
    opt=guarded(Access(READ, run_doc_in_path("run_id"))),  # the same read right as the feed
)
def office_page(run_id: RunId, request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    run = located_run(request, state, caller.tenant, run_id)  # read once, by the access guard
    slug = run["project_slug"]
    # The feed the office starts from rides in the page: the first agents paint without
    # a second round trip (the same read, and the same rule, as the feed endpoint).
    feeds: FeedReads = part(state, "feed_reads")
    initial, views = with_views(feeds.feed(caller.tenant, slug, run_id, DEFAULT_LIMIT))  # the rest comes after
    return page(
        "office",
        f"Office of {run_id}",
        caller,
        request,
        initial,
        {"zones": rooms(views), "blank": BLANK},
        run_id=run_id,
        project_slug=slug,
        topic=live_channel_topic(caller.tenant, run_id),
        may_control=may_steer(state, caller.principal, caller.tenant, slug),
        feed_limit=MAX_LIMIT,
        verbs=verb_config(),
    )


@get(
    "/office-feed",
    name="web_office_feed",
    opt=guarded(Access(READ, project_in("query", "project_slug"))),  # the same read right as the feed
)
async def office_feed(
    state: State,
    caller: CallerDep,
    project_slug: Slug,
    run_id: RunQuery,
    limit: Limit = DEFAULT_LIMIT,
    as_of_event: Annotated[int | None, QueryParameter(ge=1, required=False)] = None,
) -> Response[bytes]:
    """What the office reads after its first paint: the run's feed (live, or as of a past
    position), with what its agents show (``agent_views``) computed as for the first paint."""
    body, headers = await read_feed(state, caller, project_slug, run_id, limit, as_of_event)
    return Response(with_views(body)[0], media_type=JSON, headers=headers)


AgentId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="agent id")]
BLANK_ENTRY = {"kind": "", "text": "", "tool_name": "", "input": "", "failed": False, "target_agent_id": "", "position": 0, "at": "", "folded": False, "first_line": "",
               "result": "", "result_folded": False, "result_label": ""}


@get(
    "/runs/{run_id:str}/agents/{agent_id:str}",
    name="web_transcript",
    sync_to_thread=True,
    opt=guarded(Access(READ, run_doc_in_path("run_id"))),  # the same read right as the feed
)
def transcript_page(
    run_id: RunId, agent_id: AgentId, request: Request[Any, Any, Any], state: State, caller: CallerDep
) -> Template:
    run = located_run(request, state, caller.tenant, run_id)
    read = transcript(part(state, "store"), caller.tenant, run_id, agent_id)
    if read is None:
        raise NotFound(f"Run {run_id} has no agent {agent_id!r}.", code="agent_not_found")
    return page(
        "transcript",
        f"{agent_id} in {run_id}",
        caller,
        request,
        context={
            "head": read["head"], "entries": read["entries"], "blank": BLANK_ENTRY, "reported": reported(read["head"]),
        },
        run_id=run_id,
        agent_id=agent_id,
        project_slug=run["project_slug"],
        topic=live_channel_topic(caller.tenant, run_id),
        position=read["head"]["position"],
        fold={"chars": FOLD_CHARS, "lines": FOLD_LINES, "kept_bytes": KEPT_BYTES},
    )


@get("/{path:path}", name="web_static", sync_to_thread=False)
def static_file(path: Annotated[str, PathParameter()], request: Request[Any, Any, Any]) -> Response[bytes]:
    """The pages' modules and styles, from memory (revalidated by ETag, re-read when changed)."""
    found = asset(path.lstrip("/"))
    if found is None:
        raise NotFoundException(f"No static file {path!r}.")
    headers = {"etag": found.etag, "cache-control": "no-cache", "x-content-type-options": "nosniff"}
    if request.headers.get("if-none-match") == found.etag:
        return Response(b"", status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


# -- errors as pages ----------------------------------------------------------------------------


def error_page(status: int, code: str, detail: str) -> Template:
    hint = ""
    if status == 401:
        hint = (
            f"These pages rely on the edge proxy's identity headers ({EMAIL_HEADER}, {GROUPS_HEADER}). "
            "In development, `make run` serves them with a dev identity at http://127.0.0.1:8080/ "
            "(the first address it prints); `squadops open` does the same for a service started otherwise."
        )
    return render(
        "error",
        title=f"{status} {code}",
        config={"status": status, "code": code},
        status_code=status,
        script=False,
        status=status,
        code=code,
        detail=detail,
        hint=hint,
    )


def on_api_error(request: Request[Any, Any, Any], exc: ApiError) -> Template:
    return error_page(exc.status, exc.code, exc.detail)


def on_domain_error(request: Request[Any, Any, Any], exc: DomainError) -> Template:
    status = next((s for kind, s in STATUS_BY_ERROR if isinstance(exc, kind)), 400)
    return error_page(status, exc.code, exc.message)


def on_invalid(request: Request[Any, Any, Any], exc: RequestInvalid | ValidationException) -> Template:
    detail = "; ".join(item["msg"] for item in exc.items) if isinstance(exc, RequestInvalid) else str(exc.detail)
    return error_page(422, "request_invalid", detail)


def web_router(edge: EdgeJwt) -> list[Router]:
    """The pages (behind the edge identity) and their static assets (no data in them).

    None of them is an API operation: each router keeps its routes out of /openapi.json."""
    pages = Router(
        path="/",
        route_handlers=[board_page, office_page, transcript_page, portal_page, project_new_page, project_page, pull_page],
        dependencies=caller_dependency(edge, admin=False),
        guards=[access_guard],
        exception_handlers={
            ApiError: on_api_error,
            DomainError: on_domain_error,
            RequestInvalid: on_invalid,
            ValidationException: on_invalid,
        },
        include_in_schema=False,
    )
    # What the pages' forms send (JSON in, JSON out: their errors are the API's C3 bodies).
    actions = Router(
        path="/",
        route_handlers=[launch_form],
        dependencies=caller_dependency(edge, admin=False),
        include_in_schema=False,
    )
    # The office's reads after its first paint (JSON: their errors are the API's C3 bodies).
    reads = Router(
        path="/",
        route_handlers=[office_feed],
        dependencies=caller_dependency(edge, admin=False),
        before_request=access_hook,  # the access guard, as on the feed it reads
        include_in_schema=False,
    )
    static = Router(path="/static", route_handlers=[static_file], include_in_schema=False)
    return [pages, actions, reads, static]

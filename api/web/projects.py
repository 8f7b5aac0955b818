"""A project's page and its pull requests' pages (issue 27), read on the server with the
caller's rights: the page asks the permission graph as the endpoints do (the access guard
on the project, then the reads' own checks), and offers Launch, Comment and Publish only
to whom the graph allows them; a forbidden page is the 403 page."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.params import PathParameter
from litestar.response import Template

from api.access import READ, Access, guarded, project_in
from api.context import CallerDep, part, read_models
from api.control_plane.reads import ControlPlaneReads
from api.project_factory.pulls import list_pulls, pull_detail
from api.web.diff_view import files_view
from api.web.launch import launch_allowed, templates
from api.web.pages import page
from domain.portal.graph import CheckRequest, project_ref, user_ref
from domain.portal.relations import graph_grants
from domain.shared.access import ROLES
from domain.shared.errors import project_not_found
from domain.shared.ids import ID_PATTERN

Slug = Annotated[str, PathParameter(pattern=ID_PATTERN, description="project slug")]
Number = Annotated[int, PathParameter(ge=1, le=1_000_000_000, description="pull request number")]
RUNS_SHOWN = 50


def participants(state: State, tenant: str, slug: str, doc: dict[str, Any]) -> list[dict[str, str]]:
    """Each participant with the highest role the permission graph gives them on the project."""
    graph = part(state, "permission_graph")
    found = []
    for p in doc.get("participants") or []:
        key = str(p.get("subject_key") or "")
        held = [r for r in ROLES if graph.check(CheckRequest(store=tenant, user=user_ref(key), relation=r, object=project_ref(slug))).allowed]
        found.append({"subject_key": key, "role": held[-1] if held else "none"})
    return found


@get(
    "/projects/{project_slug:str}",
    name="web_project",
    sync_to_thread=True,
    include_in_schema=False,
    opt=guarded(Access(READ, project_in("path", "project_slug"))),
)
def project_page(project_slug: Slug, request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    tenant = caller.tenant
    doc = read_models(state).project_doc(tenant, project_slug)
    if doc is None:  # who may read it: the access guard decided
        raise project_not_found(project_slug)
    fleet: ControlPlaneReads = part(state, "control_plane")
    runs = fleet.fleet(caller.principal, tenant, project_slug=project_slug, status=None, limit=RUNS_SHOWN, cursor=None).runs
    grants = graph_grants(part(state, "permission_graph"), tenant, project_slug)
    context = {
        "project": doc,
        "project_slug": project_slug,
        "participants": participants(state, tenant, project_slug, doc),
        "runs": runs,
        "pulls": list_pulls(state, caller, project_slug, open_only=True).items,
        "may_launch": launch_allowed(caller, grants),
        "launch_templates": templates(state),
    }
    return page("project", doc.get("display_name") or project_slug, caller, request, context=context, project_slug=project_slug)


@get(
    "/projects/{project_slug:str}/pulls/{number:int}",
    name="web_pull",
    sync_to_thread=True,
    include_in_schema=False,
    opt=guarded(Access(READ, project_in("path", "project_slug"))),
)
def pull_page(project_slug: Slug, number: Number, request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    detail = msgspec.to_builtins(pull_detail(state, caller, project_slug, number))
    context = {"project_slug": project_slug, "pull": detail["pull"], "detail": detail, "files": files_view(detail["files"]), "may": detail["may"]}
    return page("pull", f"Pull request #{number} · {project_slug}", caller, request, context=context, project_slug=project_slug, number=number)


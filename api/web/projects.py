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
from api.context import CallerDep
from api.project_factory.overview import project_overview
from api.project_factory.pulls import pull_detail
from api.web.diff_view import diff_of
from api.web.launch import templates
from api.web.pages import page
from domain.shared.ids import ID_PATTERN

Slug = Annotated[str, PathParameter(pattern=ID_PATTERN, description="project slug")]
Number = Annotated[int, PathParameter(ge=1, le=1_000_000_000, description="pull request number")]


@get(
    "/projects/{project_slug:str}",
    name="web_project",
    sync_to_thread=True,
    opt=guarded(Access(READ, project_in("path", "project_slug"))),
)
def project_page(project_slug: Slug, request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    overview = msgspec.to_builtins(project_overview(state, caller, project_slug))
    project = overview["project"]
    context = {**overview, "project_slug": project_slug, "launch_templates": templates(state)}
    return page("project", project.get("display_name") or project_slug, caller, request, context=context, project_slug=project_slug)


@get(
    "/projects/{project_slug:str}/pulls/{number:int}",
    name="web_pull",
    sync_to_thread=True,
    opt=guarded(Access(READ, project_in("path", "project_slug"))),
)
def pull_page(project_slug: Slug, number: Number, request: Request[Any, Any, Any], state: State, caller: CallerDep) -> Template:
    detail = msgspec.to_builtins(pull_detail(state, caller, project_slug, number))
    files = diff_of(detail["base_sha"], detail["head_sha"], detail["files"])
    context = {"project_slug": project_slug, "pull": detail["pull"], "detail": detail, "files": files, "may": detail["may"]}
    return page("pull", f"Pull request #{number} · {project_slug}", caller, request, context=context, project_slug=project_slug, number=number)


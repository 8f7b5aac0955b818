"""``GET /v1/portal/workspace`` (the dashboard) and ``GET /v1/portal/workspace/graph``
(the dynamic dashboard), each composed for the caller from the projects the permission
graph lets it read (projections.portal.dashboard)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.params import QueryParameter

from api.context import Caller, CallerDep, part, studio_commands, studio_reads
from api.errors import RequestInvalid
from api.openapi import answers
from domain.portal.graph import ListObjectsRequest, identity_tuples, user_ref
from domain.shared.access import ROLES
from domain.shared.ids import END
from projections.portal.dashboard import (
    NoAgenda,
    Viewer,
    onboarding_checks,
    recent_launches,
    repositories,
    role_workbench,
    scaffolding,
    solutions,
    workspace_graph,
)

Flag = Annotated[bool, QueryParameter(required=False)]
ReturnTo = Annotated[str | None, QueryParameter(required=False, max_length=2000)]
Limit = Annotated[int, QueryParameter(ge=1, le=100, required=False)]


class PrincipalOut(msgspec.Struct, kw_only=True):
    subject_id: str
    subject_key: str
    email: str = ""
    principal_type: str = "human"
    group_paths: list[str] = []
    capabilities: list[str] = []
    vcs_user_id: str = ""
    vcs_username: str = ""
    vcs_linked: bool = False
    vcs_link_required: bool = False


class SessionWidget(msgspec.Struct, kw_only=True):
    subject_key: str
    email: str = ""
    principal_type: str = "human"
    display_name: str = ""
    avatar_url: str = ""
    portal_url: str = ""
    profile_url: str = ""
    vcs_linked: bool = False
    vcs_username: str = ""
    vcs_link_required: bool = False
    vcs_link_start_url: str = ""
    login_url: str = ""
    logout_url: str = ""
    switch_account_url: str = ""


class ExperienceSnapshot(msgspec.Struct, kw_only=True):
    readiness_score: int = 0
    ready_checks: int = 0
    needs_action_checks: int = 0
    accessible_solutions: int = 0
    project_scopes: int = 0
    team_scopes: int = 0


class PortalDashboardOut(msgspec.Struct, kw_only=True):
    principal: PrincipalOut
    session_widget: SessionWidget
    experience_snapshot: ExperienceSnapshot
    direct_entry: bool = True
    return_to: str = ""
    continue_url: str = ""
    login_url: str = ""
    logout_url: str = ""
    solutions: list[dict[str, Any]] = []
    repository_feed: dict[str, Any] = {}
    onboarding_checks: list[dict[str, Any]] = []
    role_scenarios: list[dict[str, Any]] = []
    edit_surfaces: list[dict[str, Any]] = []
    interaction_flows: list[dict[str, Any]] = []
    journey_lanes: list[dict[str, Any]] = []
    group_clusters: list[dict[str, Any]] = []
    guided_actions: list[dict[str, Any]] = []
    role_workbench: list[dict[str, Any]] = []
    project_factory_templates: list[dict[str, Any]] = []
    recent_launches: list[dict[str, Any]] = []
    work_agenda: dict[str, Any] = {}


class DynamicDashboardOut(msgspec.Struct, kw_only=True):
    overview: dict[str, Any]
    sections: list[dict[str, Any]]


def viewer(state: State, caller: Caller) -> Viewer:
    """The caller, its readable projects and its strongest role on each, from the graph."""
    graph, principal = part(state, "permission_graph"), caller.principal
    context = identity_tuples(principal.subject_key, principal.groups)
    roles: dict[str, str] = {}
    for role in ROLES:  # weakest first: a stronger role overwrites
        for obj in graph.list_objects(ListObjectsRequest(
            store=caller.tenant, user=user_ref(principal.subject_key), relation=role, type="project",
            contextual_tuples=context,
        )):
            roles[obj.partition(":")[2]] = role
    reads = studio_reads(state)
    projects = [doc for slug in sorted(roles) if (doc := reads.project_doc(caller.tenant, slug)) is not None]
    return Viewer(caller.tenant, principal.subject_key, principal.email, principal.groups,
                  principal.is_super_admin, projects, roles)


def _base_url(request: Request) -> str:
    proto = request.headers.get("x-forwarded-proto") or request.url.scheme
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or request.url.netloc
    return f"{proto.split(',')[0].strip()}://{host.split(',')[0].strip()}"


def _templates(state: State) -> list[dict[str, Any]]:
    return [
        {"template_id": t.template_id, "title": t.title, "template_family": t.template_id.split("-")[0],
         "summary": t.work_scope, "private_repo": True, "create_vcs_repo": True}
        for t in studio_commands(state).templates.all()
    ]


# A path on this portal: one slash, then neither a slash nor a backslash (browsers read
# ``/\\host`` as ``//host``, another site), and no backslash, space or control character
# anywhere (browsers drop tabs and newlines from a URL: ``/\t/host`` is ``//host`` too).
_PATH_CHAR = r"[^\\\x00-\x20\x7f]"
_RETURN_TO = re.compile(rf"/(?:(?!/){_PATH_CHAR}{_PATH_CHAR}*)?")
RETURN_TO_PATTERN = rf"^{_RETURN_TO.pattern}{END}"


@get(
    "/workspace",
    sync_to_thread=True,
    summary="The portal dashboard for the caller",
    # return_to: a path on this portal (no scheme, no host, not protocol-relative).
    opt=answers(401, 403, 404, 409, 422, parameters={"return_to": {"schema": {"pattern": RETURN_TO_PATTERN}}}),
)
def workspace(
    request: Request, state: State, caller: CallerDep, return_to: ReturnTo = None,
    include_forks: Flag = False, include_repository_feed: Flag = True, include_onboarding: Flag = True,
    include_project_factory_templates: Flag = True, include_work_agenda: Flag = True,
    include_recent_launches: Flag = True, include_experience_scaffolding: Flag = True,
) -> PortalDashboardOut:
    if return_to is not None and not _RETURN_TO.fullmatch(return_to):
        raise RequestInvalid(["query", "return_to"], "return_to must be a path on this portal", "value_error", return_to)
    v = viewer(state, caller)
    base = _base_url(request)
    checks = onboarding_checks(v)
    ready = sum(c["status"] == "ready" for c in checks)
    capabilities = sorted({f"project:{s}#{r}" for s, r in v.roles.items()} | ({"super_admin"} if v.is_super_admin else set()))
    out = PortalDashboardOut(
        principal=PrincipalOut(subject_id=v.subject_key, subject_key=v.subject_key, email=v.email,
                               group_paths=list(v.groups), capabilities=capabilities),
        session_widget=SessionWidget(subject_key=v.subject_key, email=v.email,
                                     display_name=v.email.split("@")[0] or v.subject_key,
                                     portal_url=f"{base}/v1/portal/workspace"),
        experience_snapshot=ExperienceSnapshot(
            readiness_score=round(100 * ready / len(checks)), ready_checks=ready, needs_action_checks=len(checks) - ready,
            accessible_solutions=len(v.projects), project_scopes=len(v.roles),
            team_scopes=len({g for g in v.groups if "/teams/" in g}),
        ),
        return_to=return_to or "",
        continue_url=f"{base}{return_to or '/v1/portal/workspace'}",
        solutions=solutions(v),
        role_workbench=role_workbench(v),
    )
    if include_onboarding:
        out.onboarding_checks = checks
    if include_repository_feed:
        repos = repositories(v.projects, include_forks=include_forks)
        out.repository_feed = {"repositories": repos, "count": len(repos), "include_forks": include_forks}
    if include_project_factory_templates:
        out.project_factory_templates = _templates(state)
    if include_recent_launches:
        out.recent_launches = recent_launches(v)
    if include_work_agenda:
        out.work_agenda = (part(state, "agenda") if "agenda" in state else NoAgenda()).agenda(v.subject_key)
    if include_experience_scaffolding:
        for name, items in scaffolding(v, checks).items():
            setattr(out, name, items)
    return out


@get("/workspace/graph", sync_to_thread=True, summary="The dynamic dashboard for the caller")
def workspace_graph_view(state: State, caller: CallerDep, limit: Limit = 8) -> DynamicDashboardOut:
    return msgspec.convert(workspace_graph(viewer(state, caller), limit), DynamicDashboardOut)

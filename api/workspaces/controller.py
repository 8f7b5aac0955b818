"""The ``dev_workspace`` launch provider (Portal); the per-employee meter is ``api.workspaces.proxy``.

Access is decided in one place, ``domain.workspaces.policies.require_workspace_role``, over
the project's grants as the permission graph answers them (``graph_grants``: participants,
member teams and group paths, nested roles, super_admin). Reads serve read models; launch
and DELETE are commands.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import structlog
from litestar import Response, Router, delete, get
from litestar.datastructures import State
from litestar.params import PathParameter, QueryParameter

from api.auth import EdgeJwt
from api.browser import CHANGES_STATE
from api.context import CallerDep, caller_dependency, part, read_store, studio_reads
from api.errors import ApiError
from api.read_your_writes import command
from api.workspaces.dto import WorkspaceList, WorkspaceOut, record_of, workspace_out
from domain.portal.relations import graph_grants
from domain.projects.project import delivery_lanes
from domain.shared.errors import NotFound, project_not_found
from domain.shared.ids import BRANCH_PATTERN, ID_PATTERN
from domain.workspaces import material
from domain.workspaces.commands import WorkspaceCommands, workspace_not_found
from domain.workspaces.policies import PROVIDER_NAME, require_workspace_role
from projections.workspaces.workspaces import TABLE, employee_partition, record_key

PathId = Annotated[str, PathParameter(pattern=ID_PATTERN)]
Slug = Annotated[str, QueryParameter(pattern=ID_PATTERN, description="exact project slug")]
Key = Annotated[str | None, QueryParameter(pattern=ID_PATTERN, required=False)]
Branch = Annotated[str | None, QueryParameter(pattern=BRANCH_PATTERN, max_length=200, required=False)]
Scope = Annotated[str, QueryParameter(pattern=ID_PATTERN, description="the workspace_scope of a launch")]
YAML = "application/yaml"
log = structlog.get_logger("squadops.workspaces")
_decode = msgspec.json.Decoder(dict).decode


def commands(state: State) -> WorkspaceCommands:
    return part(state, "workspaces")


def config(state: State) -> material.MaterialConfig:
    return part(state, "workspace_material")


def _record(state: State, tenant: str, scope: str) -> dict[str, Any] | None:
    raw = read_store(state).get(TABLE, record_key(tenant, scope))
    return _decode(raw) if raw is not None else None


def owned_record(state: State, caller: CallerDep, scope: str) -> dict[str, Any]:
    """The caller's own record in the caller's tenant: 404 when absent, 403 when another's."""
    record = _record(state, caller.tenant, scope)
    if record is None:
        raise workspace_not_found(scope)
    if record["employee"] != caller.subject_key.lower():
        raise ApiError(403, "This developer workspace belongs to another employee.", "dev_workspace_not_owner")
    # The material is only handed out while the graph still grants a workspace on the
    # project: removing a participant removes the access derived from it.
    grants = graph_grants(part(state, "permission_graph"), caller.tenant, record["project_slug"])
    require_workspace_role(caller.principal, grants)
    return record


def _binding(project: dict[str, Any], repository_key: str | None) -> tuple[str, str]:
    bindings = project.get("repository_bindings", [])
    if repository_key:
        found = next((b for b in bindings if b["repository_key"] == repository_key), None)
        if found is None:
            raise NotFound(f"Project has no repository {repository_key!r}.", code="repository_not_found")
        return repository_key, found["default_branch"]
    lanes = delivery_lanes({"repository_bindings": bindings})
    chosen = next((b for b in bindings if lanes and b["repository_key"] == lanes[0]), bindings[0] if bindings else None)
    return (chosen["repository_key"], chosen["default_branch"]) if chosen else ("default", "main")


@get("/{solution_id:str}", sync_to_thread=False, summary="Shared launch path of other providers")
def launch_other(solution_id: PathId, caller: CallerDep) -> None:
    # ``dev_workspace`` is matched by its static route below (it shares a prefix with the
    # material routes); no other provider is launched by this service.
    raise NotFound(f"No launch provider {solution_id!r}.", code="solution_not_found")


@command(
    f"/{PROVIDER_NAME}",
    status_code=200,
    method=get,
    summary="Shared launch path: dev_workspace connection material",
    opt={CHANGES_STATE: True},  # it launches: another site's page must not (api/browser.py)
)
def launch(
    state: State, caller: CallerDep, project_slug: Slug, repository_key: Key = None, branch: Branch = None
) -> WorkspaceOut:
    project = studio_reads(state).project_doc(caller.tenant, project_slug)
    if project is None:
        raise project_not_found(project_slug)
    repo, default_branch = _binding(project, repository_key)
    grants = graph_grants(part(state, "permission_graph"), caller.tenant, project_slug)
    ws = commands(state).launch(
        caller.principal, grants, tenant=caller.tenant, repository_key=repo, branch=branch or default_branch
    )
    return workspace_out(record_of(ws), config(state))


@get("/dev_workspace/workspaces", sync_to_thread=True, summary="The caller's own workspace records")
def list_workspaces(state: State, caller: CallerDep) -> WorkspaceList:
    rows = read_store(state).scan(TABLE, partition=employee_partition(caller.tenant, caller.subject_key), limit=500)
    cfg = config(state)
    return WorkspaceList(items=[workspace_out(_decode(r.body), cfg) for r in rows])


@command("/dev_workspace/workspaces/{workspace_scope:str}", status_code=200, method=delete, summary="Release")
def release_workspace(workspace_scope: PathId, state: State, caller: CallerDep) -> WorkspaceOut:
    ws = commands(state).release(caller.tenant, workspace_scope, caller.subject_key)
    return workspace_out(record_of(ws), config(state))


@get("/dev_workspace/provider.yaml", sync_to_thread=True, summary="Workspace tool provider definition")
def provider_yaml(state: State, caller: CallerDep, workspace_scope: Scope) -> Response[bytes]:
    record = owned_record(state, caller, workspace_scope)
    body = material.provider_definition(record, config(state))
    return Response(msgspec.yaml.encode(body), media_type=YAML)


@get("/dev_workspace/kubeconfig", sync_to_thread=True, summary="Kubeconfig with an OIDC exec login")
def kubeconfig(state: State, caller: CallerDep, workspace_scope: Scope) -> Response[bytes]:
    record = owned_record(state, caller, workspace_scope)
    return Response(msgspec.yaml.encode(material.kubeconfig(record, config(state))), media_type=YAML)


def workspace_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/v1/portal/launches",
        route_handlers=[list_workspaces, release_workspace, provider_yaml, kubeconfig, launch, launch_other],
        dependencies=caller_dependency(edge, admin=False),
        tags=["portal", "dev_workspace"],
    )

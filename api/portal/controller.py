"""Portal endpoints under ``/v1/portal``.

- ``GET /permissions/check?object=&relation=``: the permission graph's answer for the
  caller, as an explain view: ``allowed`` and the path of tuples (and the caller's group
  or team membership, and any nested role) that granted it. ``object`` is
  ``<type>:<id>`` (``project:<slug>``); ``relation`` one of the project roles.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import QueryParameter

from api.auth import EdgeJwt
from api.context import CallerDep, caller_dependency, part
from api.errors import RequestInvalid
from api.openapi import answers
from api.portal.copilot import copilot_action
from api.portal.dto import PathStep, PermissionCheckOut
from api.portal.impact import impact_view
from api.portal.notifications import inbox, mark_read, novu_config, send_test
from api.portal.workspace import workspace, workspace_graph_view
from domain.portal.graph import PermissionGraph
from domain.portal.relations import subject_request
from domain.shared.access import ROLES

OBJECT = re.compile(r"\A[a-z_]{1,40}:[A-Za-z0-9._/@#-]{1,200}\Z")

ObjectQuery = Annotated[str | None, QueryParameter(name="object", required=False, description="<type>:<id>")]
RelationQuery = Annotated[str | None, QueryParameter(name="relation", required=False, description="a project role")]


def permission_graph(state: State) -> PermissionGraph:
    """The ``PermissionGraph`` the composition root chose (built-in or an OpenFGA adapter)."""
    return part(state, "permission_graph")


@get(
    "/permissions/check",
    sync_to_thread=True,
    summary="Explain the caller's access to an object",
    opt=answers(
        401, 403, 404, 409, 422,
        parameters={
            "object": {"required": True, "schema": {"pattern": OBJECT.pattern}},
            "relation": {"schema": {"enum": list(ROLES)}},
        },
    ),
)
def permission_check(
    state: State, caller: CallerDep, object_: ObjectQuery = None, relation: RelationQuery = None
) -> PermissionCheckOut:
    if not object_:
        raise RequestInvalid(["query", "object"], "Field required", "missing")
    if not OBJECT.match(object_):
        raise RequestInvalid(["query", "object"], "object must be <type>:<id>", "string_pattern_mismatch", object_)
    relation = relation or "viewer"
    if relation not in ROLES:
        raise RequestInvalid(
            ["query", "relation"], f"relation must be one of {', '.join(ROLES)}", "enum", relation, {"expected": list(ROLES)}
        )
    principal = caller.principal
    request = subject_request(principal, caller.tenant, relation, object_)
    answer = permission_graph(state).check(request)
    return PermissionCheckOut(
        tenant_id=caller.tenant,
        subject_key=principal.subject_key,
        user=request.user,
        object=object_,
        relation=relation,
        allowed=answer.allowed,
        path=[msgspec.convert(msgspec.to_builtins(step), PathStep) for step in answer.path],
        group_paths=list(principal.groups),
    )


def portal_router(edge: EdgeJwt) -> Router:
    return Router(
        path="/v1/portal",
        route_handlers=[
            permission_check, workspace, workspace_graph_view, novu_config, send_test, inbox, mark_read,
            copilot_action, impact_view,
        ],
        dependencies=caller_dependency(edge, admin=False),
        tags=["portal"],
    )

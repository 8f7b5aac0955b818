"""One Litestar guard applying the access rules of ``domain.shared.access`` (C2, C14).

A route that reads or steers one project names what it needs in its ``opt``::

    @get("/…", opt={ACCESS: Access(READ, project_in("query", "project_slug"))})

and its router lists ``guards=[access_guard]``. The guard runs before Litestar parses the
handler's parameters, so it first resolves the caller itself (401, the admin path's 403,
the tenant's 422, ``X-Squadops-Min-Position``) exactly as the ``caller`` dependency does,
and leaves it on the connection for that dependency to hand on (``api.context``): the
edge assertion verifies once. Then the rule:

- super_admin reaches every project: nothing is looked up (unless the route's locator
  must find its run anyway, ``locate_always``);
- the locator names the project (a path or query parameter, or the run a path or topic
  names, 404 ``run_not_found`` when there is none); a value that is not an id leaves the
  decision to the handler, whose parameter check answers 422;
- the project's grants come from the permission graph (``graph_grants``) and
  ``may_read``/``may_control`` decide; refused on a project that does not exist is 404
  ``project_not_found``, otherwise 403 ``not_a_participant``/``control_role_required``.

The lookups are the ones the handlers made before (a refused caller costs one more: the
project's existence), run in a worker thread; but a caller the API's copies of the
project's tuples allow (``projections.engine.copies``, current at the caller's position)
is let through in the event loop, with no lookup and no thread hop. Refusals are always
decided in the thread, from the store. The live WebSocket, which refuses through
its own close codes, and the copilot, whose run is named in the body, call ``check``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.exceptions import ClientException, SerializationException
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Empty

from api.auth import (
    ASSERTION_HEADER,
    EMAIL_HEADER,
    GROUPS_HEADER,
    TENANT_HEADER,
    EdgeJwt,
    Principal,
    admit,
    provide_tenant,
    resolve_principal_async,
)
from api.context import CALLER_SCOPE_KEY, Caller, part, studio_commands, studio_reads
from api.errors import ApiError, RequestInvalid
from api.read_your_writes import MIN_POSITION_HEADER, parse_min_position, read_your_writes
from domain.portal.relations import graph_grants
from domain.shared.access import (
    ProjectGrants,
    may_contribute,
    may_control,
    may_read,
    require_contribute,
    require_control,
    require_read,
)
from domain.shared.errors import DomainError, project_not_found
from domain.shared.ids import is_valid_id
from projections.engine.copies import NotInMemory

ACCESS = "access"  # the ``opt`` key a guarded route names its need under
READ, CONTRIBUTE, CONTROL = "read", "contribute", "control"
# Each need's rule and its refusal (C2, C14).
RULES = {
    READ: (may_read, require_read),
    CONTRIBUTE: (may_contribute, require_contribute),
    CONTROL: (may_control, require_control),
}

# A locator: (app state, the connection, the caller) -> the project slug, or None when
# a parameter it reads is not an id (the handler's own check answers 422).
Locator = Callable[[State, ASGIConnection, Caller], str | None]


@dataclass(frozen=True)
class Access:
    need: str  # READ, CONTRIBUTE or CONTROL
    locate: Locator
    locate_always: bool = False  # look the project up for super_admin too (its 404 comes first)


def project_in(where: str, name: str) -> Locator:
    """The project slug is the ``where`` ("path" or "query") parameter ``name``."""

    def locate(state: State, connection: ASGIConnection, caller: Caller) -> str | None:
        params = connection.path_params if where == "path" else connection.query_params
        value = params.get(name)
        return value if isinstance(value, str) and is_valid_id(value) else None

    locate.in_memory = True  # type: ignore[attr-defined]  # no I/O: fit for the event loop
    return locate


def run_in_path(name: str = "run_id") -> Locator:
    """The project of the run the path names, from the run itself (404 when there is none)."""

    def locate(state: State, connection: ASGIConnection, caller: Caller) -> str | None:
        run_id = connection.path_params.get(name)
        if not isinstance(run_id, str) or not is_valid_id(run_id):
            return None
        return studio_commands(state).runs.get_run(caller.tenant, run_id).project_slug

    return locate


def run_project(state: State, tenant: str, run_id: str) -> str:
    """The project of a run, from its read model (404 ``run_not_found``)."""
    return str(studio_reads(state).run_doc(tenant, run_id)["project_slug"])


RUN_DOC_SCOPE_KEY = "squadops.run_doc"  # the run document a locator read, for its handler


def run_doc_in_path(name: str = "run_id") -> Locator:
    """The project of the run the path names, from the runs read model (404 when none);
    the document stays on the connection (``located_run``): the handler reads it once."""

    def locate(state: State, connection: ASGIConnection, caller: Caller) -> str | None:
        run_id = connection.path_params.get(name)
        if not isinstance(run_id, str) or not is_valid_id(run_id):
            return None
        doc = studio_reads(state).run_doc(caller.tenant, run_id)
        connection.scope[RUN_DOC_SCOPE_KEY] = doc  # type: ignore[literal-required]
        return str(doc["project_slug"])

    return locate


def located_run(connection: ASGIConnection, state: State, tenant: str, run_id: str) -> dict[str, Any]:
    """The run document the guard read for this request, else read now (super_admin)."""
    doc = connection.scope.get(RUN_DOC_SCOPE_KEY)
    return doc if doc is not None else studio_reads(state).run_doc(tenant, run_id)  # type: ignore[return-value]


def may_steer(state: State, principal: Principal, tenant: str, project_slug: str) -> bool:
    """Whether ``principal`` may use control verbs on the project (for pages that offer them)."""
    return principal.is_super_admin or may_control(principal, graph_grants(part(state, "permission_graph"), tenant, project_slug))


def check(state: State, principal: Principal, tenant: str, project_slug: str, need: str = READ) -> None:
    """The rule for one project: allowed, or 404 (no such project) / 403."""
    if principal.is_super_admin:
        return
    grants = graph_grants(part(state, "permission_graph"), tenant, project_slug)
    may, require = RULES[need]
    if may(principal, grants):
        return
    if studio_reads(state).project_doc(tenant, project_slug) is None:
        raise project_not_found(project_slug)
    refused = ProjectGrants(project_slug, {}, lambda _subject, _role: False)  # decided above: no second check
    require(principal, refused)


def _allowed_in_memory(access: Access, state: State, connection: ASGIConnection, caller: Caller) -> bool:
    """Whether the copies in memory alone allow the request (no I/O, so no thread hop);
    False: ``_decide`` decides in a thread, refusals with their exact answer included."""
    memory = state.get("permission_memory")
    if memory is None or not getattr(access.locate, "in_memory", False):
        return False
    project_slug = access.locate(state, connection, caller)
    if project_slug is None:
        return False
    grants = graph_grants(memory(caller.min_position), caller.tenant, project_slug)
    try:
        return RULES[access.need][0](caller.principal, grants)
    except NotInMemory:
        return False


def _decide(access: Access, state: State, connection: ASGIConnection, caller: Caller) -> None:
    project_slug = access.locate(state, connection, caller)
    if project_slug is not None:
        check(state, caller.principal, caller.tenant, project_slug, access.need)


_KWARGS_MODELS: dict[tuple[str, tuple[str, ...]], Any] = {}


async def _parameters_first(connection: ASGIConnection, handler: BaseRouteHandler, caller: Caller) -> None:
    """The handler's own parameter check, run only when the guard is about to refuse: its
    422 answered before any 404/403 of the route's project or run (as when handlers decided)."""
    key = (handler.handler_id, tuple(sorted(connection.path_params)))
    model = _KWARGS_MODELS.get(key)
    if model is None:
        model = _KWARGS_MODELS[key] = handler.create_kwargs_model(dict.fromkeys(connection.path_params))  # type: ignore[arg-type]
    try:
        kwargs = await model.to_kwargs(connection=connection)
    except SerializationException as exc:
        raise ClientException(str(exc)) from exc
    if kwargs.get("data") is Empty:
        del kwargs["data"]
    kwargs["caller"] = caller
    handler.signature_model.parse_values_from_connection_kwargs(connection=connection, kwargs=kwargs)


async def resolve_caller(connection: ASGIConnection, edge: EdgeJwt, *, admin: bool) -> Caller:
    """Who calls (401, 403 on the admin path), for which tenant (422), at which position."""
    headers, query = connection.headers, connection.query_params
    principal = await resolve_principal_async(
        headers.get(EMAIL_HEADER), headers.get(GROUPS_HEADER), headers.get(ASSERTION_HEADER), edge
    )
    principal = admit(principal, admin=admin)
    caller = Caller(
        principal,
        provide_tenant(query.get("tenant_id"), headers.get(TENANT_HEADER)),
        parse_min_position(headers.get(MIN_POSITION_HEADER)),
    )
    await read_your_writes(connection.app.state).reach(caller.min_position)
    return caller


async def access_guard(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    """The guard: the caller first, then the route's ``Access`` (see the module text)."""
    state = connection.app.state
    caller = await resolve_caller(connection, part(state, "edge_jwt"), admin=bool(handler.opt.get("admin")))
    connection.scope[CALLER_SCOPE_KEY] = caller  # type: ignore[literal-required]
    access: Access | None = handler.opt.get(ACCESS)
    if access is None or (caller.principal.is_super_admin and not access.locate_always):
        return
    try:
        if not _allowed_in_memory(access, state, connection, caller):
            await anyio.to_thread.run_sync(_decide, access, state, connection, caller)
    except (ApiError, DomainError, RequestInvalid):
        await _parameters_first(connection, handler, caller)
        raise


async def access_hook(request: Request[Any, Any, Any]) -> None:
    """``access_guard`` as a router's ``before_request`` hook, for hot read paths: the same
    rule at the same point (before the handler's parameters are parsed). Litestar hands
    each guard a copy of the route handler, tens of microseconds a request; a hook is
    handed the request alone."""
    await access_guard(request, request.route_handler)


def guarded(access: Access, **opt: Any) -> dict[str, Any]:
    """A route's ``opt`` naming its access need (merged with its other ``opt``)."""
    return {**opt, ACCESS: access}


__all__ = [
    "ACCESS",
    "CONTRIBUTE",
    "CONTROL",
    "READ",
    "Access",
    "access_guard",
    "access_hook",
    "check",
    "guarded",
    "project_in",
    "resolve_caller",
    "located_run",
    "may_steer",
    "run_doc_in_path",
    "run_in_path",
    "run_project",
]

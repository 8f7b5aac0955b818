"""What model traffic cost: the usage read models (``projections.workspaces.usage``) served.

Operators (``/v1/admin/usage``) read a run's cost with each agent's, a project's and an
employee's; an employee reads their own (``/v1/portal/usage``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Router, get
from litestar.datastructures import State
from litestar.params import PathParameter, QueryParameter

from api.auth import EdgeJwt
from api.context import CallerDep, caller_dependency, read_store, studio_reads
from domain.shared.errors import project_not_found
from domain.shared.ids import ID_PATTERN
from projections.workspaces.usage import TABLE, employee_key, empty_totals, project_key, run_key

PathId = Annotated[str, PathParameter(pattern=ID_PATTERN)]
Employee = Annotated[str, QueryParameter(min_length=1, max_length=320, description="the employee's subject key")]
_decode = msgspec.json.Decoder(dict).decode


class Totals(msgspec.Struct, kw_only=True):
    requests: int
    tokens_in: int
    cached_tokens: int
    tokens_out: int
    partial_requests: int
    unpriced_requests: int
    cost_usd: float


class AgentUsage(Totals, kw_only=True):
    agent_id: str
    sessions: list[str]


class RunUsage(msgspec.Struct, kw_only=True):
    run_id: str
    project_slug: str
    totals: Totals
    agents: list[AgentUsage]


class ScopeUsage(msgspec.Struct, kw_only=True):
    scope: str  # "project" or "employee"
    key: str
    totals: Totals
    by_model: dict[str, Totals]


def _doc(state: State, key: str) -> dict[str, Any] | None:
    raw = read_store(state).get(TABLE, key)
    return _decode(raw) if raw is not None else None


def _scope(state: State, scope: str, key: str, doc_key: str) -> ScopeUsage:
    doc = _doc(state, doc_key) or {"totals": empty_totals(), "by_model": {}}
    return msgspec.convert({"scope": scope, "key": key, "totals": doc["totals"], "by_model": doc["by_model"]}, ScopeUsage)


@get("/runs/{run_id:str}", sync_to_thread=True, summary="A run's model cost, per agent")
def run_usage(run_id: PathId, state: State, caller: CallerDep) -> RunUsage:
    run = studio_reads(state).run_doc(caller.tenant, run_id)  # 404 run_not_found
    doc = _doc(state, run_key(caller.tenant, run_id)) or {"totals": empty_totals(), "agents": {}}
    return msgspec.convert({"run_id": run_id, "project_slug": run.get("project_slug", ""), "totals": doc["totals"],
                            "agents": list(doc["agents"].values())}, RunUsage)


@get("/projects/{project_slug:str}", sync_to_thread=True, summary="A project's model cost")
def project_usage(project_slug: PathId, state: State, caller: CallerDep) -> ScopeUsage:
    if studio_reads(state).project_doc(caller.tenant, project_slug) is None:
        raise project_not_found(project_slug)
    return _scope(state, "project", project_slug, project_key(caller.tenant, project_slug))


@get("/employees", sync_to_thread=True, summary="An employee's model cost")
def employee_usage(employee: Employee, state: State, caller: CallerDep) -> ScopeUsage:
    return _scope(state, "employee", employee.lower(), employee_key(caller.tenant, employee))


@get("/usage", sync_to_thread=True, summary="The caller's own model cost")
def own_usage(state: State, caller: CallerDep) -> ScopeUsage:
    return _scope(state, "employee", caller.subject_key.lower(), employee_key(caller.tenant, caller.subject_key))


def usage_routers(edge: EdgeJwt) -> list[Router]:
    return [
        Router(path="/v1/admin/usage", route_handlers=[run_usage, project_usage, employee_usage],
               dependencies=caller_dependency(edge, admin=True), tags=["model_proxy"]),
        Router(path="/v1/portal", route_handlers=[own_usage], dependencies=caller_dependency(edge, admin=False),
               tags=["model_proxy"]),
    ]

"""The model proxy's routes: one endpoint for both CLIs, metered per agent and per employee.

``/v1/model-proxy`` is the root agents are given (``ANTHROPIC_BASE_URL``; Codex's provider
``<root>/v1``), under the agent's own proxy token (``domain.workspaces.proxy_tokens``);
``/v1/meter/<employee>`` is a developer workspace's root, under its meter token. Below
either root the same APIs are relayed (``api.workspaces.relay``):

- ``POST /v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic Messages) go to the
  Anthropic upstream;
- ``POST /v1/responses`` (OpenAI Responses) and ``/v1/chat/completions`` to the OpenAI one.

A missing, forged or expired token, or one naming a tenant, run or agent that does not
exist there, is a 401 and nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from litestar import Request, Router, post
from litestar.datastructures import State
from litestar.params import PathParameter
from litestar.response import Stream

from api.context import part, studio_reads
from api.errors import ApiError
from api.openapi import answers
from api.workspaces.relay import relay
from domain.shared.errors import DomainError
from domain.shared.ids import ID_PATTERN
from domain.workspaces import proxy_tokens
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.metering import Meter, Metered, MeterTokens
from domain.workspaces.ports import ModelUpstream
from domain.workspaces.usage import CHAT, COUNT_TOKENS, MESSAGES, RESPONSES

PathId = Annotated[str, PathParameter(pattern=ID_PATTERN)]
# A model call carries its whole context: more than the service's other bodies.
MAX_BODY_BYTES = 8 << 20
API_OF = {"/v1/messages": MESSAGES, "/v1/messages/count_tokens": COUNT_TOKENS,
          "/v1/responses": RESPONSES, "/v1/chat/completions": CHAT}
PATHS = list(API_OF)
TENANT_HEADER = "x-squadops-tenant-id"
ROOT = "/v1/model-proxy"  # the agents' model endpoint below the service's address
RUNS_KEPT = 4096


@dataclass
class ModelProxy:
    """What the routes need, wired by the composition root."""

    meter: Meter
    anthropic: ModelUpstream
    openai: ModelUpstream
    token_key: str
    clock: Callable[[], str]
    now: Callable[[], float] = time.time
    _runs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def upstream(self, api: str) -> ModelUpstream:
        return self.anthropic if api in (MESSAGES, COUNT_TOKENS) else self.openai

    def known(self, tenant: str, run_id: str, agent_id: str) -> dict[str, Any] | None:
        """The run as remembered, when the agent was in it (no I/O: asked in the event loop)."""
        known = self._runs.get((tenant, run_id))
        return known if known is not None and agent_id in known["agents"] else None

    def run(self, state: State, tenant: str, run_id: str, agent_id: str) -> dict[str, Any] | None:
        """The run's project, launcher and agents (read model), remembered once the agent is in it."""
        known = self.known(tenant, run_id, agent_id)
        if known is not None:
            return known
        try:
            doc = studio_reads(state).run_doc(tenant, run_id)
        except DomainError:
            return None
        if len(self._runs) >= RUNS_KEPT:
            self._runs.clear()
        known = self._runs[(tenant, run_id)] = {
            "project_slug": doc.get("project_slug", ""), "launched_by": doc.get("launched_by", ""),
            "agents": frozenset(doc.get("sessions", {})),
        }
        return known


def bearer(request: Request[Any, Any, Any]) -> str:
    """The caller's token: ``Authorization: Bearer`` (both CLIs) or ``x-api-key``."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip()


def _refused(what: str) -> ApiError:
    return ApiError(401, f"The model-proxy token is {what}.", "model_proxy_token_invalid")


async def agent_caller(request: Request[Any, Any, Any], proxy: ModelProxy) -> Metered:
    token = bearer(request)
    if not token:
        raise _refused("missing")
    caller = proxy_tokens.verify(proxy.token_key, token, proxy.now())
    if caller is None:
        raise _refused("not valid (forged, malformed or expired)")
    named = request.headers.get(TENANT_HEADER)
    if named is not None and named != caller.tenant:
        raise _refused("not valid for this tenant")
    run = proxy.known(caller.tenant, caller.run_id, caller.agent_id) or await anyio.to_thread.run_sync(
        proxy.run, request.app.state, caller.tenant, caller.run_id, caller.agent_id)
    if run is None or caller.agent_id not in run["agents"] or run["project_slug"] != caller.project_slug:
        raise _refused("not valid for this tenant (no such run, project or agent)")
    return Metered(tenant=caller.tenant, caller="agent", employee=run["launched_by"], project_slug=caller.project_slug,
                   run_id=caller.run_id, session_id=caller.session_id, agent_id=caller.agent_id)


@post(PATHS, status_code=200, request_max_body_size=MAX_BODY_BYTES, summary="Model call of an agent (metered)",
      opt=answers(400, 401, 503), include_in_schema=True)
async def agent_model_call(request: Request[Any, Any, Any], state: State) -> Stream:
    proxy: ModelProxy = part(state, "model_proxy")
    who = await agent_caller(request, proxy)
    path = request.url.path.removeprefix(ROOT)
    api = API_OF[path]
    return await relay(meter=proxy.meter, who=who, api=api, upstream=proxy.upstream(api), path=path,
                       query=request.url.query, headers=request.headers, body=await request.body(), clock=proxy.clock)


def model_proxy_router() -> Router:
    return Router(path=ROOT, route_handlers=[agent_model_call], tags=["model_proxy"])


# -- a developer workspace's meter (its employee's token) ---------------------------------------


def _workspace(state: State, request: Request[Any, Any, Any], employee_slug: str) -> tuple[Metered, str]:
    tokens: MeterTokens = part(state, "meter_tokens")
    try:
        tenant, scope = tokens.binding(bearer(request), employee_slug)
    except DomainError as exc:
        raise ApiError(401, exc.message, exc.code) from None
    workspace = workspaces(state).get(tenant, scope)
    if workspace is None:
        raise ApiError(401, "The meter token's workspace does not exist.", "meter_token_invalid")
    # Counted for the workspace's whole subject: the slug in the path is shared by look-alikes.
    return Metered(tenant=tenant, caller="workspace", employee=workspace.employee,
                   project_slug=workspace.project_slug, workspace_scope=scope), scope


def workspaces(state: State) -> WorkspaceCommands:
    return part(state, "workspaces")


@post([f"/{{employee_slug:str}}{p}" for p in PATHS], status_code=200, request_max_body_size=MAX_BODY_BYTES,
      summary="Metered model call of a developer workspace", opt=answers(400, 401, 422, 503))
async def metered_model_call(employee_slug: PathId, request: Request[Any, Any, Any], state: State) -> Stream:
    proxy: ModelProxy = part(state, "model_proxy")
    who, scope = await anyio.to_thread.run_sync(_workspace, state, request, employee_slug)
    path = request.url.path.removeprefix(f"/v1/meter/{employee_slug}")
    api = API_OF[path]

    def used() -> None:  # the workspace is in use: no idle auto-stop (best effort: the call was answered)
        workspaces(state).mark_active(who.tenant, scope)

    return await relay(meter=proxy.meter, who=who, api=api, upstream=proxy.upstream(api), path=path,
                       query=request.url.query, headers=request.headers, body=await request.body(),
                       clock=proxy.clock, after=used)


def meter_router() -> Router:
    return Router(path="/v1/meter", route_handlers=[metered_model_call], tags=["dev_workspace"])

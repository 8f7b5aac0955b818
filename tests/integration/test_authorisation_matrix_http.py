"""The authorisation matrix: every route of the app × {super_admin, owner, maintainer,
contributor, viewer, no role, other tenant}, against a real server.

The expected answer of each cell comes from ``MATRIX``, one row per route. The routes are
read from the app's route table, so a new route without a row fails
``test_every_route_has_a_row``. A row's request is made afresh for each caller (commands
on a run get a run of their own, a removal a participant of its own).

Callers: a project ``acme`` of tenant ``default`` has an owner, a maintainer, a
contributor and a viewer; ``nora`` holds no role anywhere; ``otto`` owns a project of
tenant ``globex`` and asks in his tenant for ``default``'s project and run. A cell is the
HTTP status; for the WebSocket, the refusal's status (its close code less 4000), or 101.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import msgspec
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import ADMIN
from tests.live_helpers import LiveServer, live_settings, served

CALLERS: dict[str, dict[str, str]] = {
    "super_admin": ADMIN,
    "owner": {"x-edge-claim-email": "olga@example.com", "x-edge-claim-groups": "/org/dev"},
    "maintainer": {"x-edge-claim-email": "max@example.com", "x-edge-claim-groups": "/org/dev"},
    "contributor": {"x-edge-claim-email": "cory@example.com", "x-edge-claim-groups": "/org/dev"},
    "viewer": {"x-edge-claim-email": "vic@example.com", "x-edge-claim-groups": "/org/dev"},
    "no_role": {"x-edge-claim-email": "nora@example.com", "x-edge-claim-groups": "/org/dev"},
    "other_tenant": {"x-edge-claim-email": "otto@example.com", "x-edge-claim-groups": "/org/dev",
                     "X-Squadops-Tenant-Id": "globex"},
}
ORDER = tuple(CALLERS)
PARTICIPANTS = [
    {"subject_key": "olga@example.com", "project_role": "owner"},
    {"subject_key": "max@example.com", "project_role": "maintainer"},
    {"subject_key": "cory@example.com", "project_role": "contributor"},
    {"subject_key": "vic@example.com", "project_role": "viewer"},
]
_fresh = itertools.count()


@dataclass
class World:
    server: LiveServer
    admin: httpx.Client
    run_id: str
    session_id: str

    def fresh_run(self) -> tuple[str, str]:
        """A run of ``acme`` of its own (launched and executed), with its first session."""
        answer = self.admin.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["run_id"]
        self.admin.headers["X-Squadops-Min-Position"] = answer.headers["X-Squadops-Position"]
        state = self.admin.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()
        return run_id, state["sessions"][0]["session_id"]

    def fresh_participant(self) -> str:
        """A viewer of ``acme`` of its own, for a removal."""
        key = f"pat-{next(_fresh)}@example.com"
        answer = self.admin.post("/v1/project-factory/projects/acme/participants", json={"subject_key": key, "project_role": "viewer"})
        assert answer.status_code == 200, answer.text
        self.admin.headers["X-Squadops-Min-Position"] = answer.headers["X-Squadops-Position"]
        return key


# A request: (url, json body or None[, headers over the caller's]); made by a function of
# the world, so a row may prepare.
Made = tuple[Any, ...]
Make = Callable[[World], Made]
RUN_VERB = {"verb": "verify_wave", "reason": "matrix"}
SESSION_VERB = {"verb": "pause_session", "reason": "matrix"}
ACCESS_SYNC = {"tenant_id": "default", "proposal_id": "p-1", "mode": "request"}
SLEEP = {"tenant_id": "default", "node_name": "gpu-1", "mac_address": "52:54:00:12:34:56", "verify_after_seconds": 0}


def fixed(url: str, body: Any = None) -> Make:
    return lambda world: (url.format(run=world.run_id, session=world.session_id), body)


def on_fresh_run(url: str, body: Any = None) -> Make:
    def make(world: World) -> Made:
        run_id, session_id = world.fresh_run()
        return url.format(run=run_id, session=session_id), body

    return make


def removal(world: World) -> Made:
    return f"/v1/project-factory/projects/acme/participants/{quote(world.fresh_participant())}", None


def topic(world: World) -> str:
    return quote(f"portal_live_events:tenant:default:run:{world.run_id}", safe="")


# (METHOD, route path as the app names it) -> (request, "super_admin owner maintainer contributor viewer no_role other_tenant")
MATRIX: dict[tuple[str, str], tuple[Make, str]] = {
    # health and documents: anyone
    ("GET", "/healthz"): (fixed("/healthz"), "200 200 200 200 200 200 200"),
    ("GET", "/readyz"): (fixed("/readyz"), "200 200 200 200 200 200 200"),
    ("GET", "/metrics"): (fixed("/metrics"), "200 200 200 200 200 200 200"),
    ("GET", "/openapi.json"): (fixed("/openapi.json"), "200 200 200 200 200 200 200"),
    ("GET", "/schema"): (fixed("/schema"), "200 200 200 200 200 200 200"),
    ("GET", "/schema/openapi.json"): (fixed("/schema/openapi.json"), "200 200 200 200 200 200 200"),
    ("GET", "/schema/{path:str}"): (fixed("/schema/openapi.yaml"), "404 404 404 404 404 404 404"),  # JSON only
    ("GET", "/v1/skills"): (fixed("/v1/skills"), "200 200 200 200 200 200 200"),
    # studio (super_admin only, C2)
    ("GET", "/v1/admin/studio/templates"): (fixed("/v1/admin/studio/templates"), "200 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs"): (
        fixed("/v1/admin/studio/runs", {"template_id": "delivery-core", "project_slug": "acme"}), "201 403 403 403 403 403 403"),
    ("GET", "/v1/admin/studio/runs/{run_id:str}"): (fixed("/v1/admin/studio/runs/{run}"), "200 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs/{run_id:str}/execute"): (
        on_fresh_run("/v1/admin/studio/runs/{run}/execute"), "202 403 403 403 403 403 403"),
    ("GET", "/v1/admin/studio/runs/{run_id:str}/session-state"): (
        fixed("/v1/admin/studio/runs/{run}/session-state"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/studio/runs/{run_id:str}/reports"): (fixed("/v1/admin/studio/runs/{run}/reports"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/studio/runs/{run_id:str}/handoff-trail"): (
        fixed("/v1/admin/studio/runs/{run}/handoff-trail"), "200 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs/{run_id:str}/preview"): (
        on_fresh_run("/v1/admin/studio/runs/{run}/preview", {}), "200 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs/{run_id:str}/cleanup"): (
        on_fresh_run("/v1/admin/studio/runs/{run}/cleanup"), "200 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs/{run_id:str}/replay"): (
        on_fresh_run("/v1/admin/studio/runs/{run}/replay"), "201 403 403 403 403 403 403"),
    ("POST", "/v1/admin/studio/runs/{run_id:str}/control"): (
        on_fresh_run("/v1/admin/studio/runs/{run}/control", RUN_VERB), "202 403 403 403 403 403 403"),
    # control plane: participants read, owner/maintainer steer (C2); another tenant finds nothing
    ("GET", "/control-plane/studio/observability-feed"): (
        fixed("/control-plane/studio/observability-feed?project_slug=acme&run_id={run}"), "200 200 200 200 200 403 404"),
    ("GET", "/control-plane/studio/runs"): (fixed("/control-plane/studio/runs?project_slug=acme"), "200 200 200 200 200 403 404"),
    ("POST", "/control-plane/studio/runs/{run_id:str}/control"): (
        on_fresh_run("/control-plane/studio/runs/{run}/control", RUN_VERB), "202 202 202 403 403 403 404"),
    ("POST", "/control-plane/studio/runs/{run_id:str}/sessions/{session_id:str}/control"): (
        on_fresh_run("/control-plane/studio/runs/{run}/sessions/{session}/control", SESSION_VERB), "202 202 202 403 403 403 404"),
    ("GET", "/control-plane/studio/live"): (
        lambda w: (f"/control-plane/studio/live?topic={topic(w)}", None), "200 200 200 200 200 403 403"),
    ("WS", "/control-plane/studio/live/ws"): (
        lambda w: (f"/control-plane/studio/live/ws?topic={topic(w)}", None), "101 101 101 101 101 403 403"),
    # project factory: what the permission graph allows; participants managed by a role above theirs
    ("GET", "/v1/project-factory/projects"): (fixed("/v1/project-factory/projects"), "200 200 200 200 200 200 200"),
    ("POST", "/v1/project-factory/projects"): (  # in a tenant of its own: the creator owns what it creates
        lambda w: ("/v1/project-factory/projects", {"project_key": f"new-{next(_fresh)}"}, {"X-Squadops-Tenant-Id": "scratch"}),
        "201 201 201 201 201 201 201"),
    ("GET", "/v1/project-factory/projects/{project_slug:str}"): (
        fixed("/v1/project-factory/projects/acme"), "200 200 200 200 200 403 404"),
    ("POST", "/v1/project-factory/projects/{project_slug:str}/participants"): (
        fixed("/v1/project-factory/projects/acme/participants", {"subject_key": "pat@example.com", "project_role": "viewer"}),
        "200 200 200 403 403 403 404"),
    ("DELETE", "/v1/project-factory/projects/{project_slug:str}/participants/{subject_key:str}"): (
        removal, "200 200 200 403 403 403 404"),
    # pull requests: read by viewers, commented by contributors, published by maintainers
    # (acme has none: a caller let through finds no pull request 1)
    ("GET", "/v1/project-factory/projects/{project_slug:str}/overview"): (
        fixed("/v1/project-factory/projects/acme/overview"), "200 200 200 200 200 403 404"),
    ("GET", "/v1/project-factory/projects/{project_slug:str}/pulls"): (
        fixed("/v1/project-factory/projects/acme/pulls"), "200 200 200 200 200 403 404"),
    ("GET", "/v1/project-factory/projects/{project_slug:str}/pulls/{number:int}"): (
        fixed("/v1/project-factory/projects/acme/pulls/1"), "404 404 404 404 404 403 404"),
    ("POST", "/v1/project-factory/projects/{project_slug:str}/pulls/{number:int}/comments"): (
        fixed("/v1/project-factory/projects/acme/pulls/1/comments", {"path": "a.txt", "line": 1, "body": "why?"}),
        "404 404 404 404 403 403 404"),
    ("POST", "/v1/project-factory/projects/{project_slug:str}/pulls/{number:int}/publish"): (
        fixed("/v1/project-factory/projects/acme/pulls/1/publish"), "404 404 404 403 403 403 404"),
    # portal: every principal, answered from what the graph allows them
    ("GET", "/v1/portal/permissions/check"): (
        fixed("/v1/portal/permissions/check?object=project:acme&relation=viewer"), "200 200 200 200 200 200 200"),
    ("GET", "/v1/portal/workspace"): (fixed("/v1/portal/workspace"), "200 200 200 200 200 200 200"),
    ("GET", "/v1/portal/workspace/graph"): (fixed("/v1/portal/workspace/graph"), "200 200 200 200 200 200 200"),
    ("GET", "/v1/portal/notifications/novu-config"): (fixed("/v1/portal/notifications/novu-config"), "200 200 200 200 200 200 200"),
    ("POST", "/v1/portal/notifications/test"): (fixed("/v1/portal/notifications/test", {}), "202 202 202 202 202 202 202"),
    ("GET", "/v1/portal/notifications"): (fixed("/v1/portal/notifications"), "200 200 200 200 200 200 200"),
    ("POST", "/v1/portal/notifications/{notification_id:str}/read"): (
        fixed("/v1/portal/notifications/n-nobody/read"), "404 404 404 404 404 404 404"),
    ("POST", "/v1/portal/copilot/actions"): (
        fixed("/v1/portal/copilot/actions", {"action_id": "summarize_run", "entity_ref": "run:{run}"}),
        "200 200 200 200 200 403 404"),
    ("GET", "/v1/portal/impact"): (fixed("/v1/portal/impact?asset_ref=project:acme"), "200 200 200 200 200 200 200"),
    # developer workspaces (C16): contributors and above; the meter needs its own token
    ("GET", "/v1/portal/launches/dev_workspace"): (
        fixed("/v1/portal/launches/dev_workspace?project_slug=acme"), "409 409 409 409 403 403 404"),
    ("GET", "/v1/portal/launches/dev_workspace/workspaces"): (
        fixed("/v1/portal/launches/dev_workspace/workspaces"), "200 200 200 200 200 200 200"),
    ("DELETE", "/v1/portal/launches/dev_workspace/workspaces/{workspace_scope:str}"): (
        fixed("/v1/portal/launches/dev_workspace/workspaces/ws-nobody"), "404 404 404 404 404 404 404"),
    ("GET", "/v1/portal/launches/dev_workspace/provider.yaml"): (
        fixed("/v1/portal/launches/dev_workspace/provider.yaml?workspace_scope=ws-nobody"), "404 404 404 404 404 404 404"),
    ("GET", "/v1/portal/launches/dev_workspace/kubeconfig"): (
        fixed("/v1/portal/launches/dev_workspace/kubeconfig?workspace_scope=ws-nobody"), "404 404 404 404 404 404 404"),
    ("GET", "/v1/portal/launches/{solution_id:str}"): (fixed("/v1/portal/launches/docs"), "404 404 404 404 404 404 404"),
    # The model proxy: a workspace's meter token or an agent's proxy token, never the edge's claims.
    **{("POST", f"/v1/meter/{{employee_slug:str}}/v1/{api}"): (
        fixed(f"/v1/meter/olga/v1/{api}", {"model": "m", "messages": []}), "401 401 401 401 401 401 401")
       for api in ("chat/completions", "responses", "messages", "messages/count_tokens")},
    **{("POST", f"/v1/model-proxy/v1/{api}"): (
        fixed(f"/v1/model-proxy/v1/{api}", {"model": "m", "messages": []}), "401 401 401 401 401 401 401")
       for api in ("chat/completions", "responses", "messages", "messages/count_tokens")},
    ("GET", "/v1/admin/usage/runs/{run_id:str}"): (fixed("/v1/admin/usage/runs/{run}"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/usage/projects/{project_slug:str}"): (
        fixed("/v1/admin/usage/projects/acme"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/usage/employees"): (
        fixed("/v1/admin/usage/employees?employee=olga@example.com"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/portal/usage"): (fixed("/v1/portal/usage"), "200 200 200 200 200 200 200"),
    # jobs, sync, checkpoints: a role in the tenant (contributor and above to enqueue)
    ("POST", "/v1/jobs/sync/access"): (fixed("/v1/jobs/sync/access", ACCESS_SYNC), "202 202 202 202 403 403 422"),
    ("POST", "/v1/wizard/try"): (
        fixed("/v1/wizard/try", {"tenant_id": "default", "proposal_id": "p-1", "provider": "vcs"}), "202 202 202 202 403 403 422"),
    ("POST", "/v1/jobs/node-power/sleep"): (fixed("/v1/jobs/node-power/sleep", SLEEP), "202 202 202 202 403 403 422"),
    ("POST", "/v1/jobs/node-power/wake"): (fixed("/v1/jobs/node-power/wake", SLEEP), "202 202 202 202 403 403 422"),
    ("GET", "/v1/jobs/{job_id:str}"): (fixed("/v1/jobs/job-0000000000000000"), "404 404 404 404 404 403 404"),
    ("GET", "/v1/sync/checkpoints"): (fixed("/v1/sync/checkpoints"), "200 200 200 200 200 403 200"),
    ("GET", "/v1/sync/checkpoints/{connector_id:str}"): (
        fixed("/v1/sync/checkpoints/idp?scope=default"), "404 404 404 404 404 403 404"),
    # identity links: one's own; another subject's only for super_admin
    ("GET", "/v1/identity/links/{provider:str}"): (fixed("/v1/identity/links/vcs"), "200 200 200 200 200 200 200"),
    ("POST", "/v1/identity/links/{provider:str}"): (
        fixed("/v1/identity/links/vcs", {"provider_user_id": "7", "subject_key": "vic@example.com"}),
        "200 403 403 403 200 403 403"),
    # the gate (super_admin only, C2)
    ("POST", "/v1/admin/gate/threads/{thread_key:str}/run"): (
        lambda w: (f"/v1/admin/gate/threads/t-{next(_fresh)}/run", {"dry_run": True}), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/gate/threads/{thread_key:str}/runs"): (fixed("/v1/admin/gate/threads/t-0/runs"), "200 403 403 403 403 403 403"),
    ("GET", "/v1/admin/gate/scenarios/{scenario_key:str}"): (
        fixed("/v1/admin/gate/scenarios/portal-dashboard-smoke"), "200 403 403 403 403 403 403"),
    # agents: only an agent token (never an edge principal); no stream or session to end without one
    ("POST", "/mcp"): (fixed("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), "401 401 401 401 401 401 401"),
    ("GET", "/mcp"): (fixed("/mcp"), "405 405 405 405 405 405 405"),
    ("DELETE", "/mcp"): (fixed("/mcp"), "405 405 405 405 405 405 405"),
    # pages: the shell for any principal; a run's office, an agent's transcript, a project's
    # and its pull requests' pages for their readers
    ("GET", "/"): (fixed("/"), "200 200 200 200 200 200 200"),
    ("GET", "/portal"): (fixed("/portal"), "200 200 200 200 200 200 200"),
    ("GET", "/runs/{run_id:str}"): (fixed("/runs/{run}"), "200 200 200 200 200 403 404"),
    ("GET", "/runs/{run_id:str}/agents/{agent_id:str}"): (fixed("/runs/{run}/agents/planner"), "200 200 200 200 200 403 404"),
    # the office's feed after its first paint: the same readers as the feed
    ("GET", "/office-feed"): (fixed("/office-feed?project_slug=acme&run_id={run}"), "200 200 200 200 200 403 404"),
    ("GET", "/portal/projects/new"): (fixed("/portal/projects/new"), "200 200 200 200 200 200 200"),
    ("GET", "/projects/{project_slug:str}"): (fixed("/projects/acme"), "200 200 200 200 200 403 404"),
    ("GET", "/projects/{project_slug:str}/pulls/{number:int}"): (fixed("/projects/acme/pulls/1"), "404 404 404 404 404 403 404"),
    # the pages' launch form: a contributor launches (and every launch here is a run of its own)
    ("POST", "/runs"): (fixed("/runs", {"project_slug": "acme", "template_id": "delivery-core"}), "201 201 201 201 403 403 404"),
    ("GET", "/static/{path:path}"): (fixed("/static/js/board.js"), "200 200 200 200 200 200 200"),
}


def app_routes(server: LiveServer) -> set[tuple[str, str]]:
    app = server.server.config.app
    found = set()
    for route in app.routes:
        methods = sorted(getattr(route, "methods", None) or ["WS"])
        found |= {(m, route.path) for m in methods if m not in ("OPTIONS", "HEAD")}
    return found


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with (
        tempfile.TemporaryDirectory() as folder,
        served(live_settings(f"sqlite:///{folder}/db.sqlite")) as server,
        httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as admin,
    ):
        acme = admin.post("/v1/project-factory/projects", json={"project_key": "acme", "participants": PARTICIPANTS})
        assert acme.status_code == 201, acme.text
        otto = CALLERS["other_tenant"]
        globex = admin.post("/v1/project-factory/projects", json={"project_key": "globex-shop"}, headers=otto)
        assert globex.status_code == 201, globex.text
        admin.headers["X-Squadops-Min-Position"] = globex.headers["X-Squadops-Position"]
        found = World(server, admin, "", "")
        found.run_id, found.session_id = found.fresh_run()
        yield found


def test_every_route_has_a_row(world: World) -> None:
    routes = app_routes(world.server)
    assert sorted(routes - set(MATRIX)) == [], "a route without a row in MATRIX"
    assert sorted(set(MATRIX) - routes) == [], "a row for a route the app does not have"


async def ws_status(url: str, headers: dict[str, str]) -> int:
    """101 when the socket subscribes; a refusal's HTTP status (close code less 4000)."""
    async with ws_connect(url, additional_headers=headers, open_timeout=10) as socket:
        try:
            message = await asyncio.wait_for(socket.recv(), timeout=1.5)
        except TimeoutError:
            return 101
        body = msgspec.json.decode(message)
        if not (isinstance(body, dict) and "code" in body and "detail" in body):
            return 101
        try:
            await asyncio.wait_for(socket.recv(), timeout=5)
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            return closed.rcvd.code - 4000
        return 101


def status_of(world: World, method: str, make: Make, headers: dict[str, str]) -> int:
    url, body, *more = make(world)
    position = world.admin.headers.get("X-Squadops-Min-Position", "0")
    headers = {**headers, **(more[0] if more else {}), "X-Squadops-Min-Position": position}
    if method == "WS":
        return asyncio.run(ws_status(f"ws://127.0.0.1:{world.server.port}{url}", headers))
    if isinstance(body, dict):
        body = msgspec.json.decode(msgspec.json.encode(body).replace(b"{run}", world.run_id.encode()))
    with httpx.Client(base_url=world.server.url, timeout=30) as client:
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        with client.stream(method, url, **kwargs) as answer:  # a stream's status, without reading it
            return answer.status_code


@pytest.mark.parametrize("route", sorted(MATRIX), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_caller_gets_the_answer_of_the_matrix(world: World, route: tuple[str, str]) -> None:
    make, row = MATRIX[route]
    expected = dict(zip(ORDER, (int(x) for x in row.split()), strict=True))
    got = {caller: status_of(world, route[0], make, CALLERS[caller]) for caller in ORDER}
    assert got == expected

"""The squad's MCP server over HTTP (streamable HTTP transport, JSON-RPC 2.0).

An agent names itself with the token the plane gave it; the server checks each tool call
against the run as it stands and answers what will be recorded. The call's effect comes
from the agent's stream, so the server's answer alone changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from domain.shared import agent_tokens
from domain.shared.ids import derived_id
from tests.conftest import ADMIN, settings_for
from tests.integration.local_support import PROJECT, STUDIO
from workers.bootstrap import Container, build

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@pytest.fixture
def squad(sqlite_url: str) -> Iterator[tuple[TestClient, Container, str, dict[str, str]]]:
    container = build(settings_for(sqlite_url))
    with TestClient(create_app(container, workers=("projector",))) as client:
        client.headers.update(ADMIN)
        assert client.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
        run_id = client.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]
        state = client.get(f"{STUDIO}/runs/{run_id}/session-state").json()
        sessions = {s["agent_id"]: s["session_id"] for s in state["sessions"]}
        yield client, container, run_id, sessions
    container.close()


def token(container: Container, run_id: str, session_id: str, agent_id: str, key: str = "") -> str:
    identity = agent_tokens.AgentIdentity("default", run_id, session_id, agent_id)
    return agent_tokens.sign(key or container.mcp_token_key, identity)


def rpc(client: TestClient, bearer: str, method: str, params: dict[str, Any] | None = None, id_: int = 1,
        **headers: str) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id_}
    if params is not None:
        message["params"] = params
    return client.post("/mcp", json=message, headers={**MCP_HEADERS, "Authorization": f"Bearer {bearer}", **headers})


def test_an_agent_lists_and_calls_the_squad_tools(squad: tuple[TestClient, Container, str, dict[str, str]]) -> None:
    client, container, run_id, sessions = squad
    planner = token(container, run_id, sessions["planner"], "planner")

    hello = rpc(client, planner, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                "clientInfo": {"name": "claude-code", "version": "2"}})
    assert hello.status_code == 200 and hello.headers["content-type"].startswith("application/json")
    assert hello.json()["result"]["protocolVersion"] == "2025-06-18"
    assert hello.json()["result"]["serverInfo"]["name"] == "squadops"
    assert "tools" in hello.json()["result"]["capabilities"]
    initialized = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                              headers={**MCP_HEADERS, "Authorization": f"Bearer {planner}"})
    assert initialized.status_code == 202 and initialized.content == b""

    listed = rpc(client, planner, "tools/list", id_=2).json()["result"]["tools"]
    assert [t["name"] for t in listed] == ["handoff_agent", "open_pull_request", "comment_agent", "report"]
    handoff = next(t for t in listed if t["name"] == "handoff_agent")
    assert handoff["inputSchema"]["required"] == ["target_agent_id", "message"]

    called = rpc(client, planner, "tools/call", {"name": "handoff_agent",
                                                 "arguments": {"target_agent_id": "backend", "message": "Build it"}}, 3)
    result = called.json()["result"]
    assert called.json()["id"] == 3 and result["isError"] is False
    assert result["structuredContent"] == {
        "accepted": True, "target_agent_id": "backend", "target_live_status": "joining",
        "target_session_id": derived_id("ses", run_id, "backend"),
        "thread_id": derived_id("thr", run_id, "planner", "backend"),
    }
    # The answer alone records nothing: the handoff is recorded from the agent's stream.
    state = client.get(f"{STUDIO}/runs/{run_id}/session-state").json()
    assert sorted(s["agent_id"] for s in state["sessions"]) == ["curator", "planner"]

    comment = rpc(client, planner, "tools/call", {"name": "comment_agent",
                                                  "arguments": {"target_agent_id": "curator", "message": "hi"}}, 4)
    assert comment.json()["result"]["structuredContent"]["target_live_status"] == "ready"

    # The squad refuses what cannot be: the agent reads why in a tool error.
    refused = [
        ("handoff_agent", {"target_agent_id": "planner", "message": "me"}, "handoff_to_self"),
        ("handoff_agent", {"target_agent_id": "designer", "message": "x"}, "unknown_target_agent"),
        ("comment_agent", {"target_agent_id": "backend", "message": "x"}, "unknown_target_agent"),
        ("open_pull_request", {}, "invalid_arguments"),
        ("report", {"summary": "s", "mood": "fine"}, "invalid_arguments"),
    ]
    for name, arguments, code in refused:
        answer = rpc(client, planner, "tools/call", {"name": name, "arguments": arguments}, 5).json()["result"]
        assert answer["isError"] is True and answer["content"][0]["text"].startswith(code), (name, answer)

    # JSON-RPC errors for what is not a tool call at all.
    assert rpc(client, planner, "tools/call", {"name": "rm_rf", "arguments": {}}, 6).json()["error"]["code"] == -32602
    assert rpc(client, planner, "resources/list", {}, 7).json()["error"]["code"] == -32601
    assert rpc(client, planner, "ping", None, 8).json() == {"id": 8, "jsonrpc": "2.0", "result": {}}
    batch = client.post("/mcp", json=[{"jsonrpc": "2.0", "id": 9, "method": "ping"},
                                      {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}],
                        headers={**MCP_HEADERS, "Authorization": f"Bearer {planner}"})
    assert [m["id"] for m in batch.json()] == [9]
    parse = client.post("/mcp", content=b"{not json", headers={**MCP_HEADERS, "Authorization": f"Bearer {planner}"})
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700


def test_the_server_admits_only_agents_it_can_verify(squad: tuple[TestClient, Container, str, dict[str, str]]) -> None:
    client, container, run_id, sessions = squad
    planner = token(container, run_id, sessions["planner"], "planner")
    assert rpc(client, "", "tools/list").status_code == 401
    forged = token(container, run_id, sessions["planner"], "planner", key="another-key")
    assert rpc(client, forged, "tools/list").status_code == 401
    assert rpc(client, planner, "tools/list", **{"X-Squadops-Agent": f"default/{run_id}/curator"}).status_code == 401
    assert rpc(client, planner, "tools/list", **{"X-Squadops-Agent": f"default/{run_id}/planner"}).status_code == 200
    wrong_agent = token(container, run_id, sessions["planner"], "curator")
    answer = rpc(client, wrong_agent, "tools/call", {"name": "report", "arguments": {"summary": "x"}}).json()
    assert answer["result"]["isError"] and answer["result"]["content"][0]["text"].startswith("agent_mismatch")
    assert rpc(client, planner, "tools/list", **{"MCP-Protocol-Version": "1999-01-01"}).status_code == 400
    assert rpc(client, planner, "tools/list", Origin="http://evil.example").status_code == 403
    assert rpc(client, planner, "tools/list", Origin="http://localhost:3000").status_code == 200
    assert client.get("/mcp").status_code == 405
    assert client.delete("/mcp").status_code == 405
    assert "/mcp" not in client.get("/openapi.json").json()["paths"]

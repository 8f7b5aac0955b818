"""The model proxy over HTTP (issue 26), against scripted upstreams on loopback.

An agent's request is relayed byte for byte under the service's upstream key with the alias
mapped, priced from the price table and recorded once; tokens that are missing, forged,
expired or of another tenant are refused with 401 and record nothing; an unreachable
upstream is a 503 that records nothing; a stream cut mid-way is recorded as partial with
what had been delivered.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from litestar.testing import TestClient

from api.app import create_app
from domain.shared import agent_tokens
from domain.workspaces import proxy_tokens
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from tests import infra
from tests.conftest import ADMIN, settings_for
from tests.helpers import eventually
from tests.integration.local_support import PROJECT, STUDIO
from tests.integration.scripted_models import USAGE, ScriptedModels
from workers.bootstrap import Container, build, read_projectors

ALIAS = "model-proxy claude-code-cli alias"
PRICES = {"claude-sonnet-4-5": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
          "gpt-5-codex": {"input_per_mtok": 1.25, "output_per_mtok": 10.0}}
KEYS = {"upstream_anthropic_key": "sk-ant-service-key", "upstream_openai_key": "sk-openai-service-key"}
BRIEF = "You are the backend (agent `planner`, role role_planner) of squad run r for project acme."


class World:
    def __init__(self, http: TestClient, container: Container, run_id: str) -> None:
        self.http, self.container, self.run_id = http, container, run_id

    def token(self, *, tenant: str = "default", agent: str = "planner", seconds: float = 600.0, key: str = "") -> str:
        caller = proxy_tokens.ProxyCaller(tenant, "acme", self.run_id, "ses-1", agent)
        return proxy_tokens.sign(key or self.container.mcp_token_key, caller, int(time.time() + seconds))

    def usage(self) -> dict[str, Any]:
        self.container.await_reads(self.container.event_store.max_position(), 5.0)
        answer = self.http.get(f"/v1/admin/usage/runs/{self.run_id}", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    upstream = getattr(request, "param", None)
    if upstream == "unreachable":  # a loopback port nothing listens on
        upstream = f"http://127.0.0.1:{infra.free_port()}"
    urls = {"upstream_anthropic_url": upstream, "upstream_openai_url": upstream} if upstream else {}
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path),
                                   model_prices=json.dumps(PRICES), rate_limit_per_minute=0, **urls, **KEYS))
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            assert http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
            answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                               headers=ADMIN)
            assert answer.status_code == 201, answer.text
            yield World(http, container, answer.json()["run_id"])
    finally:
        container.close()


@pytest.fixture
def models() -> Iterator[ScriptedModels]:
    with ScriptedModels({"planner": [("say", "ok")]}) as scripted:
        yield scripted


def messages(model: str = ALIAS) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "stream": True, "system": BRIEF,
            "messages": [{"role": "user", "content": "hello"}], "tools": [{"name": "Write", "input_schema": {}}]}


def test_an_agent_request_is_relayed_byte_for_byte_mapped_and_metered(tmp_path: Path, models: ScriptedModels) -> None:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path),
                                   upstream_anthropic_url=models.url, upstream_openai_url=models.url,
                                   model_prices=json.dumps(PRICES), **KEYS))
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            assert http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
            run_id = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                               headers=ADMIN).json()["run_id"]
            w = World(http, container, run_id)
            token = w.token()
            via = http.post("/v1/model-proxy/v1/messages?beta=true", json=messages(),
                            headers={"authorization": f"Bearer {token}", "anthropic-version": "2023-06-01"})
            assert via.status_code == 200, via.text
            assert via.headers["content-type"].startswith("text/event-stream")
            direct = httpx.post(f"{models.url}/v1/messages", json=messages("claude-sonnet-4-5"))
            assert via.content == direct.content  # the same bytes as the upstream sent them
            responses = {"model": "model-proxy codex alias", "stream": True,
                         "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": BRIEF}]}]}
            codex = http.post("/v1/model-proxy/v1/responses", json=responses, headers={"authorization": f"Bearer {token}"})
            assert codex.status_code == 200 and b"response.completed" in codex.content

            seen = [s for s in models.seen if s.agent == "planner"]
            assert [(s.api, s.model, s.authorization) for s in seen[:1]] == [
                ("anthropic", "claude-sonnet-4-5", "sk-ant-service-key")]
            assert (seen[-1].api, seen[-1].model, seen[-1].authorization) == (
                "openai", "gpt-5-codex", "Bearer sk-openai-service-key")
            assert all(token not in s.authorization for s in models.seen)

            usage = eventually(lambda: (u := w.usage())["totals"]["requests"] == 2 and u)
            claude_cost = (USAGE["input_tokens"] * 3.0 + USAGE["output_tokens"] * 15.0) / 1e6
            codex_cost = (USAGE["input_tokens"] * 1.25 + USAGE["output_tokens"] * 10.0) / 1e6
            [agent] = usage["agents"]
            assert (agent["agent_id"], agent["sessions"], agent["tokens_in"], agent["tokens_out"]) == (
                "planner", ["ses-1"], 2 * USAGE["input_tokens"], 2 * USAGE["output_tokens"])
            assert agent["cost_usd"] == pytest.approx(claude_cost + codex_cost, abs=1e-12)
            project = http.get("/v1/admin/usage/projects/acme", headers=ADMIN).json()
            assert set(project["by_model"]) == {"claude-sonnet-4-5", "gpt-5-codex"}
            employee = http.get("/v1/admin/usage/employees", params={"employee": "operator@example.com"},
                                headers=ADMIN).json()
            assert employee["totals"]["requests"] == 2  # the run's launcher
            metrics = http.get("/metrics").text
            assert (f'squadops_dev_workspace_model_requests{{agent="planner",employee="operator@example.com",'
                    f'run="{run_id}"}} 2.0') in metrics
            # No key and no token in any stored event.
            stored = json.dumps([n.state.decode(errors="replace") if isinstance(n.state, bytes) else str(n.state)
                                 for n in container.event_store.recorder.select_notifications(1, 10_000)])
            assert "sk-ant-service-key" not in stored and "sk-openai" not in stored and token not in stored

            # A rebuild of the read models gives the same bytes and sends nothing upstream.
            sent = len(models.seen)
            live = [container.store.dump(name) for name in ("model_usage", "pixels")]
            rebuild(container.store, NotificationSource(container.event_store), read_projectors(), page_size=2)
            assert [container.store.dump(name) for name in ("model_usage", "pixels")] == live
            assert len(models.seen) == sent
    finally:
        container.close()


@pytest.mark.parametrize("world", [None], indirect=True)
def test_missing_forged_expired_and_foreign_tokens_are_refused(world: World) -> None:
    before = world.container.event_store.max_position()
    good = world.token()
    forged = good[:-4] + ("0000" if not good.endswith("0000") else "1111")
    refused = {
        "missing": None,
        "forged": forged,
        "other key": world.token(key="k" * 64),
        "expired": world.token(seconds=-1),
        "other tenant": world.token(tenant="globex"),
        "other agent": world.token(agent="nobody"),
        "an MCP token": agent_tokens.sign(world.container.mcp_token_key,
                                          agent_tokens.AgentIdentity("default", world.run_id, "ses-1", "planner")),
    }
    for why, token in refused.items():
        headers = {"authorization": f"Bearer {token}"} if token else {}
        answer = world.http.post("/v1/model-proxy/v1/messages", json=messages(), headers=headers)
        assert answer.status_code == 401, (why, answer.text)
        assert answer.json()["code"] == "model_proxy_token_invalid", why
    tenant_header = world.http.post("/v1/model-proxy/v1/messages", json=messages(),
                                    headers={"authorization": f"Bearer {good}", "x-squadops-tenant-id": "globex"})
    assert tenant_header.status_code == 401
    assert world.container.event_store.max_position() == before  # nothing recorded


@pytest.mark.parametrize("world", ["unreachable"], indirect=True)
def test_an_unreachable_upstream_is_503_and_counts_nothing(world: World) -> None:
    before = world.container.event_store.max_position()
    answer = world.http.post("/v1/model-proxy/v1/messages", json=messages(),
                             headers={"authorization": f"Bearer {world.token()}"})
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "model_proxy_unavailable"
    assert "127.0.0.1" not in answer.json()["detail"]
    assert world.container.event_store.max_position() == before


class CutUpstream:
    """Answers one streamed message with its start and a first delta, then drops the connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(body) < length:
                    body += conn.recv(65536)
                start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                              "model": "claude-sonnet-4-5", "content": [],
                                                              "usage": {"input_tokens": 200, "output_tokens": 1}}}
                event = f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                             + f"{len(event):x}\r\n".encode() + event + b"\r\n")
                time.sleep(0.05)  # the relay has passed the first chunk on before the cut

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def on_a_port(container: Container) -> Iterator[str]:
    """The app on a real uvicorn server (the test client would hold a cut response back whole)."""
    port = infra.free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(container, workers=("projector",)), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False, timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started or not thread.is_alive(), timeout=15)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_a_cut_stream_counts_what_was_delivered_as_partial(tmp_path: Path) -> None:
    cut = CutUpstream()
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path),
                                   upstream_anthropic_url=cut.url, model_prices=json.dumps(PRICES), **KEYS))
    try:
        with on_a_port(container) as url, httpx.Client(base_url=url, timeout=30) as http:
            assert http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
            run_id = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                               headers=ADMIN).json()["run_id"]
            w = World(http, container, run_id)  # type: ignore[arg-type]
            received = b""
            # The response ends as the upstream's did: cut.
            with pytest.raises(httpx.RemoteProtocolError), http.stream(
                    "POST", "/v1/model-proxy/v1/messages", json=messages(),
                    headers={"authorization": f"Bearer {w.token()}"}) as answer:
                assert answer.status_code == 200
                for chunk in answer.iter_raw():
                    received += chunk
            assert received.startswith(b"event: message_start\n")  # what was delivered was passed on
            usage = eventually(lambda: (u := w.usage())["totals"]["requests"] == 1 and u)
            assert usage["totals"] | {"cost_usd": 0} == {
                "requests": 1, "tokens_in": 200, "cached_tokens": 0, "tokens_out": 1, "partial_requests": 1,
                "unpriced_requests": 0, "cost_usd": 0}
            assert usage["totals"]["cost_usd"] == pytest.approx((200 * 3.0 + 15.0) / 1e6)
    finally:
        container.close()
        cut.close()

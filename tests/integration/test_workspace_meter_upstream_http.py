"""A workspace's meter is the model proxy (issues 11 §5 and 26): with
``SQUADOPS_UPSTREAM_OPENAI_URL`` set, a chat completion goes upstream as given under the
service's upstream key (never the workspace's token), the upstream's reported usage is what
is counted (and marks the workspace used), and an unreachable upstream is a 503 that
counts nothing."""

from __future__ import annotations

from pathlib import Path

from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.stub_http import StubServer
from workers.bootstrap import build
from workers.json_http import JsonHandler

OWNER = {"x-edge-claim-email": "owner@x.io"}


class _Proxy(JsonHandler):
    seen: list[tuple[str, str, dict]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.read_json()
        _Proxy.seen.append((self.path, self.headers.get("authorization", ""), body))
        self.send_json(200, {
            "id": "cmpl-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
        })


def test_meter_forwards_to_the_model_proxy_and_counts_its_usage(tmp_path: Path) -> None:
    upstream = StubServer(_Proxy)
    url = upstream.url
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path),
                                   upstream_openai_url=url, upstream_openai_key="upstream-key-openai",
                                   model_proxy_client_key="proxy-key-0123456789abcdef-0123456789"))
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            project = {"project_key": "acme", "participants": [{"subject_key": "owner@x.io", "project_role": "owner"}]}
            created = http.post("/v1/project-factory/projects", json=project, headers=ADMIN)
            assert created.status_code == 201, created.text
            ws = http.get("/v1/portal/launches/dev_workspace", params={"project_slug": "acme"}, headers=OWNER).json()
            obs = ws["reconnect_material"]["usage_observability"]
            token = container.meter_tokens.issue(obs["employee_slug"], ws["workspace_scope"])
            scope, earlier = ws["workspace_scope"], "2026-01-01T00:00:01.000000Z"
            wid = f"dws:default:{scope}"
            container.workspaces.claim(wid, lambda w: w.pick_up("2026-01-01T00:00:00.000000Z", "t"))
            container.workspaces.claim(wid, lambda w: w.provisioned(earlier, "p", []))
            call = {"model": "gpt-x", "messages": [{"role": "user", "content": "hello"}]}
            meter = f"{obs['meter_path']}/chat/completions"
            answer = http.post(meter, json=call, headers={"authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["usage"]["total_tokens"] == 42
            used = container.workspaces.get("default", scope)
            assert used is not None and used.last_active_at > earlier  # metered use: not idle
            [(path, auth, body)] = _Proxy.seen
            assert (path, auth, body) == ("/v1/chat/completions", "Bearer upstream-key-openai", call)
            label = f'{{agent="",{obs["employee_label"]}="{obs["employee"]}",run=""}}'
            metrics = http.get("/metrics").text
            assert f"{obs['metric_names']['tokens']}{label} 42.0" in metrics
            assert f"{obs['metric_names']['requests']}{label} 1.0" in metrics

            upstream.close()
            down = http.post(meter, json=call, headers={"authorization": f"Bearer {token}"})
            assert down.status_code == 503 and down.json()["code"] == "model_proxy_unavailable"
            assert set(down.json()) == {"detail", "code"}
            assert container.workspaces.get("default", scope).version == used.version  # a failed call is no use
            metrics = http.get("/metrics").text
            assert f"{obs['metric_names']['requests']}{label} 1.0" in metrics  # nothing counted for it
    finally:
        container.close()
        upstream.close()

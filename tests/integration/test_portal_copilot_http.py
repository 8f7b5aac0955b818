"""The copilot (C15) over HTTP: each action does something real from the read models,
threads persist as events and belong to their subject, the follow-up intent is a control
verb the operator can confirm, and the model proxy is used when configured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from domain.portal.copilot import thread_key
from tests.conftest import ADMIN, settings_for
from tests.feed_scenarios import Scenario, apply_all
from tests.integration.test_control_plane_http import PROJECT, STEPS
from tests.stub_http import StubServer
from workers.bootstrap import Container, build
from workers.json_http import JsonHandler

ACT = "/v1/portal/copilot/actions"
DEV = {"x-edge-claim-email": "dev@example.com"}
STRANGER = {"x-edge-claim-email": "someone@example.com"}
MANIFEST = [
    {"id": "runs", "kind": "section", "label": "Runs", "priority": 1},
    {"id": "search", "kind": "input", "label": "Search", "value_hint": "acme", "priority": 5},
    {"id": "launch", "kind": "button", "label": "Launch", "priority": 3},
]


def world(tmp_path: Path, **changes: object) -> Iterator[tuple[TestClient, Container, str]]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path), **changes))
    with TestClient(create_app(container, workers=("projector",))) as http:
        assert http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
        run_id = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                           headers=ADMIN).json()["run_id"]
        apply_all(Scenario(app=container, run_id=run_id, request=PROJECT), STEPS)
        assert container.runner.wait_for(container.event_store.max_position(), timeout=20)
        yield http, container, run_id
    container.close()


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[TestClient, Container, str]]:
    yield from world(tmp_path)


def act(http: TestClient, who: dict[str, str], **body: object) -> dict:
    answer = http.post(ACT, json=body, headers=who)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_explain_page_and_threads(parts) -> None:
    http, container, _ = parts
    first = act(http, DEV, action_id="explain_page", page_path="/", surface_key="portal", entity_ref="project:acme")
    assert "acme as contributor" in first["message"] and "backend (acme/api)" in first["message"]
    assert {c["action_id"] for c in first["capabilities"]} == {
        "explain_page", "summarize_run", "draft_followup_task", "propose_ui_actions"}
    again = act(http, DEV, action_id="explain_page", thread_id=first["thread_id"])
    assert again["thread_id"] == first["thread_id"]
    thread = container.event_store.get_or_none(thread_key("default", first["thread_id"]))
    assert thread is not None and thread.turns == 2 and thread.subject_key == "dev@example.com"
    stolen = http.post(ACT, json={"action_id": "explain_page", "thread_id": first["thread_id"]}, headers=STRANGER)
    assert stolen.status_code == 404 and stolen.json()["code"] == "thread_not_found"
    unknown = http.post(ACT, json={"action_id": "dance"}, headers=DEV)
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "action_id"]


def test_summarize_run_reads_what_the_graph_allows(parts) -> None:
    http, _, run_id = parts
    summary = act(http, DEV, action_id="summarize_run", entity_ref=f"run:{run_id}")["message"]
    assert f"Run {run_id} of project acme" in summary and "4 session(s)" in summary and "Blockers: 1" in summary
    denied = http.post(ACT, json={"action_id": "summarize_run", "entity_ref": f"run:{run_id}"}, headers=STRANGER)
    assert denied.status_code == 403
    missing = http.post(ACT, json={"action_id": "summarize_run"}, headers=DEV)
    assert missing.status_code == 422


def test_followup_draft_is_a_confirmable_control_intent(parts) -> None:
    http, _, run_id = parts
    out = act(http, DEV, action_id="draft_followup_task", entity_ref=f"run:{run_id}", selected_text="Unblock the curator")
    intent = out["ui_artifacts"][0]
    assert intent["intent"] == "create_followup_task" and intent["requires_confirmation"]
    assert intent["body"] == {"verb": "create_followup_task", "title": "Unblock the curator"}
    confirmed = http.post(intent["url"], json=intent["body"], headers=ADMIN)  # the operator confirms
    assert confirmed.status_code == 202, confirmed.text


def test_propose_ui_actions_from_the_manifest(parts) -> None:
    http, _, _ = parts
    out = act(http, DEV, action_id="propose_ui_actions", interaction_manifest=MANIFEST, instruction_notes="open runs")
    calls = [(c["name"], c["selector"], c["value"], c["state"]) for c in out["tool_calls"]]
    assert calls == [
        ("page.scroll", '[data-copilot-id="runs"]', "", "proposed"),
        ("page.fill", '[data-copilot-id="search"]', "acme", "proposed"),
        ("page.click", '[data-copilot-id="launch"]', "", "proposed"),
    ]


class _Proxy(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        facts = self.read_json()["messages"][0]["content"]
        reply = {"role": "assistant", "content": f"proxy saw {facts.count(chr(10) + '- ')} facts"}
        self.send_json(200, {"choices": [{"message": reply}]})


def test_model_proxy_answers_when_configured(tmp_path: Path) -> None:
    with StubServer(_Proxy) as proxy:
        for http, _, run_id in world(tmp_path, model_proxy_url=f"{proxy.url}/v1"):
            out = act(http, DEV, action_id="summarize_run", entity_ref=f"run:{run_id}")
            assert out["message"] == "proxy saw 5 facts"

"""HTTP helpers shared by the control tests."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.events import named
from tests.helpers import DEMO_LIKE
from workers.bootstrap import Container

STUDIO = "/v1/admin/studio"
PLANE = "/control-plane/studio"
TENANT = "default"
OPERATOR = "operator@example.com"  # ADMIN's email claim, lower-cased: the actor of every verb


def create_project(http: TestClient, body: dict | None = None) -> dict:
    answer = http.post("/v1/project-factory/projects", json=body or DEMO_LIKE)
    assert answer.status_code == 201, answer.text
    return answer.json()


def launched(http: TestClient, slug: str = "acme") -> dict:
    """Launches a delivery-core run of the project; answers the launch's body."""
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": slug})
    assert answer.status_code == 201, answer.text
    return answer.json()


def launch(http: TestClient, slug: str = "acme") -> str:
    return launched(http, slug)["run_id"]


def sessions(http: TestClient, run_id: str) -> dict[str, dict[str, Any]]:
    state = http.get(f"{STUDIO}/runs/{run_id}/session-state")
    assert state.status_code == 200, state.text
    return {s["agent_id"]: s for s in state.json()["sessions"]}


def session_verb(http: TestClient, run_id: str, session_id: str, body: dict, **kw: Any) -> Any:
    return http.post(f"{PLANE}/runs/{run_id}/sessions/{session_id}/control", json=body, **kw)


def run_verb(http: TestClient, run_id: str, body: dict, **kw: Any) -> Any:
    return http.post(f"{PLANE}/runs/{run_id}/control", json=body, **kw)


def admin_verb(http: TestClient, run_id: str, body: dict, **kw: Any) -> Any:
    return http.post(f"{STUDIO}/runs/{run_id}/control", json=body, **kw)


def accepted(answer: Any, run_id: str, verb: str, session_id: str = "") -> str:
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["status"] == "accepted" and body["verb"] == verb and body["run_id"] == run_id
    assert body["session_id"] == session_id and body["control_id"].startswith("ctl-")
    return body["control_id"]


def block(container: Container, run_id: str, agent_id: str, code: str, evidence: dict | None = None, start: bool = True) -> None:
    """Puts the agent behind a wall through the domain (what a plane or policy would do)."""
    app = container

    def command() -> None:
        run = app.studio.runs.get_run(TENANT, run_id)
        session = app.studio.runs.agent_session(run, agent_id)
        if start and session.live_status == "ready":
            session.start_process(
                llm_session_id=f"llm-{agent_id}",
                skill_ids=[],
                mcp_server_ids=[],
                workspace_name="ws-acme-shared",
                at=app.clock(),
            )
        session.block(code=code, message=f"test wall {code}", evidence=evidence or {}, at=app.clock())
        app.event_store.save(session)

    app.event_store.retrying(command)
    assert container.await_reads(app.event_store.last_saved_position(), timeout=5)


def events(container: Container, run_id: str, agent_id: str, name: str = "") -> list[Any]:
    app = container
    run = app.studio.runs.get_run(TENANT, run_id)
    session = app.studio.runs.agent_session(run, agent_id)
    return [e for e in app.event_store.events.get(session.id) if not name or named(e) == name]

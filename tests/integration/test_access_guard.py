"""The one access guard (api/access.py) on every route that reads or steers one project.

For each guarded route, in order: no identity is 401; a refused caller on a project that
does not exist is 404 and on one that exists 403 (``not_a_participant`` for reads,
``control_role_required`` for verbs); a run that does not exist is 404 ``run_not_found``;
a malformed id is the parameter check's 422; a participant gets through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.integration.control_support import (
    PLANE,
    create_project,
    launch,
    run_verb,
    session_verb,
    sessions,
)
from workers.bootstrap import Container, build

VIEWER = {"x-edge-claim-email": "Viewer@Example.com", "x-edge-claim-groups": ""}
MAINTAINER = {"x-edge-claim-email": "maint@example.com", "x-edge-claim-groups": ""}
STRANGER = {"x-edge-claim-email": "stranger@example.com", "x-edge-claim-groups": ""}
ANONYMOUS = {"x-edge-claim-email": "", "x-edge-claim-groups": ""}
FEED = f"{PLANE}/observability-feed"
BOARD = f"{PLANE}/runs"
PROJECT = "/v1/project-factory/projects"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('guard') / 'squadops.db'}"
    container: Container = build(settings_for(url))
    with TestClient(create_app(container, workers=("projector",))) as http:
        http.headers.update(ADMIN)
        create_project(
            http,
            {
                "project_key": "acme",
                "project_assembly": {"agentSquadSuitTesterRoles": ["admin"]},
                "participants": [
                    {"subject_key": "viewer@example.com", "project_role": "viewer"},
                    {"subject_key": "maint@example.com", "project_role": "maintainer"},
                ],
            },
        )
        run_id = launch(http)
        planner = sessions(http, run_id)["planner"]["session_id"]
        yield http, run_id, planner
    container.close()


def code(answer: Any) -> tuple[int, str]:
    body = answer.json()
    return answer.status_code, body.get("code", "") if isinstance(body, dict) else ""


def test_feed_and_board(world: tuple[TestClient, str, str]) -> None:
    http, run_id, _ = world
    query = {"project_slug": "acme", "run_id": run_id}
    assert code(http.get(FEED, params=query, headers=ANONYMOUS)) == (401, "unauthenticated")
    assert code(http.get(FEED, params=query, headers=STRANGER)) == (403, "not_a_participant")
    assert code(http.get(FEED, params={**query, "project_slug": "nope"}, headers=STRANGER)) == (404, "project_not_found")
    assert http.get(FEED, params={**query, "project_slug": "bad id!"}, headers=STRANGER).status_code == 422
    assert http.get(FEED, params=query, headers=VIEWER).status_code == 200
    # The parameter check answers before a refusal, as when each handler decided.
    for bad in ({"limit": 0}, {"as_of_event": 0}, {"run_id": "bad id!"}):
        answer = http.get(FEED, params={**query, **bad}, headers=STRANGER)
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"][1] == next(iter(bad)), answer.text
    assert code(http.get(FEED, params={**query, "run_id": "run-nope"}, headers=VIEWER)) == (404, "run_not_found")
    assert code(http.get(BOARD, params={"project_slug": "acme"}, headers=STRANGER)) == (403, "not_a_participant")
    nope = http.get(BOARD, params={"project_slug": "nope"}, headers=STRANGER)
    assert code(nope) == (404, "project_not_found"), nope.text
    assert http.get(BOARD, headers=STRANGER).json()["runs"] == []  # no project: only the readable ones
    assert [r["run_id"] for r in http.get(BOARD, headers=VIEWER).json()["runs"]] == [run_id]


def test_control_verbs(world: tuple[TestClient, str, str]) -> None:
    http, run_id, planner = world
    nudge = {"verb": "nudge_agent"}
    assert code(run_verb(http, run_id, {"verb": "verify_wave"}, headers=ANONYMOUS)) == (401, "unauthenticated")
    assert code(run_verb(http, run_id, {"verb": "verify_wave"}, headers=STRANGER)) == (403, "control_role_required")
    assert code(session_verb(http, run_id, planner, nudge, headers=VIEWER)) == (403, "control_role_required")
    assert code(run_verb(http, "run-nope", {"verb": "verify_wave"}, headers=MAINTAINER)) == (404, "run_not_found")
    assert code(run_verb(http, "run-nope", {"verb": "verify_wave"}, headers=STRANGER)) == (404, "run_not_found")
    malformed = http.post(f"{PLANE}/runs/{run_id}/control", content=b"{not json", headers={**STRANGER, "content-type": "application/json"})
    assert malformed.status_code == 422 and malformed.json()["detail"][0]["loc"] == ["body"]
    wrong_type = run_verb(http, "run-nope", {"verb": "verify_wave", "model": [1]}, headers=STRANGER)
    assert wrong_type.status_code == 422, wrong_type.text
    assert session_verb(http, run_id, planner, nudge, headers=MAINTAINER).status_code == 202


def test_live_channel(world: tuple[TestClient, str, str]) -> None:
    http, run_id, _ = world
    topic = f"portal_live_events:tenant:default:run:{run_id}"
    assert code(http.get(f"{PLANE}/live", params={"topic": topic}, headers=ANONYMOUS)) == (401, "unauthenticated")
    assert code(http.get(f"{PLANE}/live", params={"topic": topic}, headers=STRANGER)) == (403, "not_a_participant")
    missing = "portal_live_events:tenant:default:run:run-nope"
    assert code(http.get(f"{PLANE}/live", params={"topic": missing}, headers=STRANGER)) == (404, "run_not_found")
    assert code(http.get(f"{PLANE}/live", params={"topic": missing})) == (404, "run_not_found")  # super_admin too
    other = "portal_live_events:tenant:other:run:r1"
    assert code(http.get(f"{PLANE}/live", params={"topic": other}, headers=STRANGER)) == (403, "tenant_mismatch")
    assert http.get(f"{PLANE}/live", params={"topic": "nonsense"}, headers=STRANGER).status_code == 422
    bad_resume = http.get(f"{PLANE}/live", params={"topic": topic, "last_event_id": "x"}, headers=STRANGER)
    assert bad_resume.status_code == 422 and bad_resume.json()["detail"][0]["loc"] == ["query", "last_event_id"]
    with http.websocket_connect(f"{PLANE}/live/ws?topic={topic}", headers=STRANGER) as socket:
        assert socket.receive_json()["code"] == "not_a_participant"


def test_project_reads_and_participant_removal(world: tuple[TestClient, str, str]) -> None:
    http, _, _ = world
    assert code(http.get(f"{PROJECT}/acme", headers=ANONYMOUS)) == (401, "unauthenticated")
    assert code(http.get(f"{PROJECT}/acme", headers=STRANGER)) == (403, "not_a_participant")
    assert code(http.get(f"{PROJECT}/nope", headers=STRANGER)) == (404, "project_not_found")
    assert http.get(f"{PROJECT}/acme", headers=VIEWER).json()["project_slug"] == "acme"
    remove = f"{PROJECT}/acme/participants/viewer@example.com"
    assert code(http.delete(remove, headers=VIEWER)) == (403, "control_role_required")
    assert code(http.delete(f"{PROJECT}/nope/participants/x@example.com", headers=STRANGER)) == (404, "project_not_found")
    assert code(http.delete(f"{PROJECT}/acme/participants/who@example.com", headers=MAINTAINER)) == (
        404,
        "participant_not_found",
    )


def test_office_page(world: tuple[TestClient, str, str]) -> None:
    http, run_id, _ = world
    assert http.get(f"/runs/{run_id}", headers=ANONYMOUS).status_code == 401
    refused = http.get(f"/runs/{run_id}", headers=STRANGER)
    assert refused.status_code == 403 and "not_a_participant" in refused.text
    assert http.get("/runs/run-nope", headers=STRANGER).status_code == 404
    viewer = http.get(f"/runs/{run_id}", headers=VIEWER)
    assert viewer.status_code == 200 and "text/html" in viewer.headers["content-type"]
    assert http.get(f"/runs/{run_id}", headers=MAINTAINER).status_code == 200

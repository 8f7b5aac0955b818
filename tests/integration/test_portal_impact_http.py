"""The impact projection over HTTP: by pr_ref, asset_ref and issue_ref, from project and
run events; an assembly-only pull request is never evidence; only readable projects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.feed_scenarios import Scenario, apply_all
from tests.integration.test_control_plane_http import PROJECT, STEPS
from workers.bootstrap import build

IMPACT = "/v1/portal/impact"
DEV = {"x-edge-claim-email": "dev@example.com"}
STRANGER = {"x-edge-claim-email": "someone@example.com"}
# the backend agent also opens an assembly-only pull request (orchestration output)
RUN_STEPS = [*STEPS[:7], ("pr", 2, "assembly", 9), *STEPS[7:]]


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path)))
    with TestClient(create_app(container, workers=("projector",))) as client:
        assert client.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN).status_code == 201
        run_id = client.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                             headers=ADMIN).json()["run_id"]
        scenario = Scenario(app=container, run_id=run_id, request=PROJECT)
        apply_all(scenario, RUN_STEPS)
        assert len(scenario.applied) == len(RUN_STEPS)
        assert container.runner.wait_for(container.event_store.max_position(), timeout=20)
        yield client
    container.close()


def test_impact_of_a_pull_request(http: TestClient) -> None:
    out = http.get(IMPACT, params={"pr_ref": "https://vcs.example/acme/api/pull/7"}, headers=DEV).json()
    assert out["query"] == {"pr_ref": "https://vcs.example/acme/api/pull/7"} and out["source_of_truth"] == "event_log"
    assert [a["asset_ref"] for a in out["affected_assets"]] == ["project:acme", "repo:acme/api"]
    assert out["owners"] == [{"owner_ref": "user:operator@example.com", "owner_type": "user", "relation": "owner"}]
    assert out["required_tests"] == [{"test_ref": "suit:admin", "reason": "role_tester suit of the project"}]
    assert [e["evidence_ref"] for e in out["evidence_refs"]] == ["acme/api#7"]
    assert len(out["recent_failures"]) == 1 and "agent_first_tool_required" in out["recent_failures"][0]
    assert out["recommended_next_action"].startswith("Resolve the latest blocker first")
    assert out["source_health"]["projects_matched"] == 1


def test_assembly_pull_requests_are_not_evidence(http: TestClient) -> None:
    by_project = http.get(IMPACT, params={"asset_ref": "project:acme"}, headers=DEV).json()
    assert [e["evidence_ref"] for e in by_project["evidence_refs"]] == ["acme/api#7"]
    assembly = http.get(IMPACT, params={"pr_ref": "acme/assembly#9"}, headers=DEV).json()
    assert assembly["evidence_refs"] == [] and assembly["affected_assets"] == []
    repo = http.get(IMPACT, params={"asset_ref": "repo:acme/api"}, headers=DEV).json()
    assert [a["asset_ref"] for a in repo["affected_assets"]] == ["repo:acme/api"]


def test_issue_ref_access_and_validation(http: TestClient) -> None:
    issue = http.get(IMPACT, params={"issue_ref": "proposal-42", "limit": 1}, headers=DEV).json()
    assert len(issue["affected_assets"]) == 1 and issue["evidence_refs"][0]["evidence_ref"] == "acme/api#7"
    hidden = http.get(IMPACT, params={"issue_ref": "proposal-42"}, headers=STRANGER).json()
    assert hidden["affected_assets"] == [] and hidden["source_health"]["projects_considered"] == 0
    bad = http.get(IMPACT, headers=DEV)
    assert bad.status_code == 422 and bad.json()["detail"][0]["type"] == "missing"

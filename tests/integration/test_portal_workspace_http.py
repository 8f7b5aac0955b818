"""The portal dashboard and dynamic dashboard over HTTP: every section computed for the
caller from the projects the permission graph lets it read; every include_* flag honoured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build

WORKSPACE = "/v1/portal/workspace"
GRAPH = "/v1/portal/workspace/graph"
OWNER = {"x-edge-claim-email": "owner@example.com", "x-edge-claim-groups": "/org/eng/web"}
ENG = {"x-edge-claim-email": "eve@example.com", "x-edge-claim-groups": "/org/eng"}
STRANGER = {"x-edge-claim-email": "someone@example.com"}
FLAGS = ("include_repository_feed", "include_onboarding", "include_project_factory_templates",
         "include_work_agenda", "include_recent_launches", "include_experience_scaffolding")


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path)))
    with TestClient(create_app(container, workers=("projector",))) as client:
        for body in (
            {"project_key": "acme", "owner_subject_keys": ["owner@example.com"], "member_group_paths": ["/org/eng"],
             "repository_bindings": [{"repository_key": "assembly", "vcs_repo_slug": "acme/assembly",
                                      "repository_type": "assembly"},
                                     {"repository_key": "backend", "vcs_repo_slug": "acme/api"},
                                     {"repository_key": "fork", "vcs_repo_slug": "acme/fork", "repository_type": "fork"}]},
            {"project_key": "hidden", "owner_subject_keys": ["other@example.com"]},
        ):
            created = client.post("/v1/project-factory/projects", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            client.headers["x-squadops-min-position"] = created.headers["x-squadops-position"]
        launched = client.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                               headers=ADMIN)
        assert launched.status_code == 201, launched.text
        client.headers["x-squadops-min-position"] = launched.headers["x-squadops-position"]
        yield client
    container.close()


def test_dashboard_sections_for_the_owner(http: TestClient) -> None:
    d = http.get(WORKSPACE, params={"return_to": "/v1/portal/impact"}, headers={**OWNER, "host": "portal.example"}).json()
    assert d["principal"]["subject_key"] == "owner@example.com" and d["principal"]["group_paths"] == ["/org/eng/web"]
    assert d["principal"]["capabilities"] == ["project:acme#owner"]
    assert d["session_widget"]["portal_url"] == "http://portal.example/v1/portal/workspace"
    assert d["return_to"] == "/v1/portal/impact" and d["continue_url"] == "http://portal.example/v1/portal/impact"
    assert [s["solution_id"] for s in d["solutions"]] == ["project:acme"]  # never the hidden project
    checks = {c["check_id"]: c["status"] for c in d["onboarding_checks"]}
    assert checks == {"identity": "ready", "project_access": "ready", "repositories": "ready",
                      "error_reporting": "needs_action", "first_run": "ready"}
    snap = d["experience_snapshot"]
    assert (snap["ready_checks"], snap["needs_action_checks"], snap["readiness_score"]) == (4, 1, 80)
    bench = {r["role_key"]: (r["enabled"], r["status"]) for r in d["role_workbench"]}
    assert bench == {"owner": (True, "active"), "maintainer": (True, "active"),
                     "contributor": (True, "active"), "viewer": (True, "active")}
    assert [r["project_slug"] for r in d["recent_launches"]] == ["acme"]
    assert d["work_agenda"] == {"provider": "none", "status": "disabled", "synced_at": "", "events": [], "tasks": []}
    assert "delivery-core" in {t["template_id"] for t in d["project_factory_templates"]}
    assert {r["vcs_repo_slug"] for r in d["repository_feed"]["repositories"]} == {"acme/assembly", "acme/api"}
    forks = http.get(WORKSPACE, params={"include_forks": "true"}, headers=OWNER).json()["repository_feed"]
    assert "acme/fork" in {r["vcs_repo_slug"] for r in forks["repositories"]}
    assert d["edit_surfaces"][0]["status"] == "editable" and d["guided_actions"][0]["action_id"] == "error_reporting"
    assert d["group_clusters"] == [{"cluster_id": "/org/eng", "title": "/org/eng", "item_count": 1,
                                    "paths": ["/org/eng/web"], "action_label": "", "action_url": ""}]


def test_flags_turn_sections_off_and_roles_differ(http: TestClient) -> None:
    off = http.get(WORKSPACE, params=dict.fromkeys(FLAGS, "false"), headers=OWNER).json()
    for key in ("onboarding_checks", "project_factory_templates", "recent_launches", "role_scenarios", "guided_actions"):
        assert off[key] == [], key
    assert off["repository_feed"] == {} and off["work_agenda"] == {}
    eng = http.get(WORKSPACE, headers=ENG).json()
    assert eng["principal"]["capabilities"] == ["project:acme#contributor"]
    assert eng["edit_surfaces"][0]["status"] == "read_only"
    stranger = http.get(WORKSPACE, headers=STRANGER).json()
    assert stranger["solutions"] == [] and stranger["recent_launches"] == []
    assert {c["check_id"]: c["status"] for c in stranger["onboarding_checks"]}["project_access"] == "needs_action"
    bad = http.get(WORKSPACE, params={"return_to": "https://evil.example/"}, headers=OWNER)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "return_to"]


def test_dynamic_dashboard_counts_and_limit(http: TestClient) -> None:
    g = http.get(GRAPH, params={"limit": 1}, headers=OWNER).json()
    o = g["overview"]
    assert (o["tenant_id"], o["subject_key"], o["project_count"], o["repo_count"], o["runtime_count"]) == (
        "default", "owner@example.com", 1, 3, 1)
    sections = {s["section_id"]: s for s in g["sections"]}
    assert set(sections) == {"projects", "repositories", "runs", "onboarding"}
    assert all(len(s["items"]) <= 1 for s in sections.values())
    assert sections["repositories"]["summary"] == "3 item(s)"
    assert http.get(GRAPH, headers=STRANGER).json()["overview"]["project_count"] == 0
    bad = http.get(GRAPH, params={"limit": 0}, headers=OWNER)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "limit"], bad.text

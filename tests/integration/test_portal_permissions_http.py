"""The permission graph over HTTP: the explain endpoint, the project factory's reads and the
control-plane checks all answer from the relationship read model (C2, C3, C14)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import Container, build

CHECK = "/v1/portal/permissions/check"
PROJECTS = "/v1/project-factory/projects"
OWNER = {"x-edge-claim-email": "Owner@Example.com"}
VIEWER = {"x-edge-claim-email": "viewer@example.com"}
ENG = {"x-edge-claim-email": "eve@example.com", "x-edge-claim-groups": "/org/eng/web"}
RED = {"x-edge-claim-email": "rex@example.com", "x-edge-claim-groups": "/org/teams/red"}
STRANGER = {"x-edge-claim-email": "someone@example.com", "x-edge-claim-groups": "/org/ops"}
PROJECT = {
    "project_key": "acme",
    "owner_subject_keys": ["owner@example.com"],
    "participants": [{"subject_key": "viewer@example.com", "project_role": "viewer"}],
    "member_group_paths": ["/org/eng"],
    "member_team_keys": ["red"],
}


@pytest.fixture
def http(database_url: str) -> Iterator[TestClient]:
    container: Container = build(settings_for(database_url))
    with TestClient(create_app(container, workers=("projector",))) as client:
        created = client.post(PROJECTS, json=PROJECT, headers=ADMIN)
        assert created.status_code == 201, created.text
        client.headers["x-squadops-min-position"] = created.headers["x-squadops-position"]
        other = client.post(PROJECTS, json={"project_key": "other", "owner_subject_keys": ["viewer@example.com"]}, headers=ADMIN)
        assert other.status_code == 201, other.text
        client.headers["x-squadops-min-position"] = other.headers["x-squadops-position"]
        yield client
    container.close()


def check(http: TestClient, who: dict[str, str], relation: str, obj: str = "project:acme") -> dict:
    answer = http.get(CHECK, params={"object": obj, "relation": relation}, headers=who)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_explain_names_the_path(http: TestClient) -> None:
    owner = check(http, OWNER, "viewer")
    assert owner["allowed"] and owner["user"] == "user:owner@example.com"
    assert [s["kind"] for s in owner["path"]] == ["tuple", "implied"]
    assert owner["path"][0] == {
        "kind": "tuple", "object": "project:acme", "relation": "owner", "subject": "user:owner@example.com"
    }
    eng = check(http, ENG, "contributor")
    assert eng["allowed"] and [s["kind"] for s in eng["path"]] == ["membership", "tuple"]
    assert eng["path"][0]["object"] == "group:/org/eng"
    assert check(http, RED, "viewer")["path"][0]["object"] == "team:red"
    assert not check(http, ENG, "maintainer")["allowed"]
    assert not check(http, VIEWER, "contributor")["allowed"]
    denied = check(http, STRANGER, "viewer")
    assert denied == {**denied, "allowed": False, "path": []}
    assert check(http, ADMIN, "owner", "project:anything")["path"][0]["kind"] == "super_admin"


def test_explain_rejects_bad_queries_with_c3_bodies(http: TestClient) -> None:
    for params, field in (({"relation": "viewer"}, "object"), ({"object": "acme"}, "object"),
                          ({"object": "project:acme", "relation": "god"}, "relation")):
        answer = http.get(CHECK, params=params, headers=OWNER)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["query", field]
    assert http.get(CHECK, params={"object": "project:acme"}, headers={}).status_code in (401, 403)


def test_project_reads_follow_the_graph(http: TestClient) -> None:
    assert http.get(f"{PROJECTS}/acme", headers=ENG).json()["project_slug"] == "acme"
    forbidden = http.get(f"{PROJECTS}/acme", headers=STRANGER)
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "not_a_participant"
    assert http.get(f"{PROJECTS}/nope", headers=OWNER).status_code == 404
    listed = {who: [p["project_slug"] for p in http.get(PROJECTS, headers=h).json()["projects"]]
              for who, h in (("owner", OWNER), ("viewer", VIEWER), ("stranger", STRANGER), ("admin", ADMIN))}
    assert listed == {"owner": ["acme"], "viewer": ["acme", "other"], "stranger": [], "admin": ["acme", "other"]}


def test_control_plane_board_reads_through_the_graph(http: TestClient) -> None:
    # A group member reads the board filtered to the project; a stranger is told 403.
    board = http.get("/control-plane/studio/runs", params={"project_slug": "acme"}, headers=ENG)
    assert board.status_code == 200, board.text
    denied = http.get("/control-plane/studio/runs", params={"project_slug": "acme"}, headers=STRANGER)
    assert denied.status_code == 403 and denied.json()["code"] == "not_a_participant"


def test_removing_a_participant_removes_the_access_it_gave(http: TestClient) -> None:
    path = f"{PROJECTS}/acme/participants/Viewer@Example.com"
    assert check(http, VIEWER, "viewer")["allowed"]
    refused = http.delete(path, headers=ENG)  # a contributor through a group may not
    assert refused.status_code == 403 and refused.json()["code"] == "control_role_required"
    removed = http.delete(path, headers=OWNER)
    assert removed.status_code == 200, removed.text
    assert "viewer@example.com" not in removed.json()["member_subject_keys"]
    http.headers["x-squadops-min-position"] = removed.headers["x-squadops-position"]
    assert not check(http, VIEWER, "viewer")["allowed"]
    assert http.get(f"{PROJECTS}/acme", headers=VIEWER).status_code == 403
    assert [p["project_slug"] for p in http.get(PROJECTS, headers=VIEWER).json()["projects"]] == ["other"]
    assert check(http, ENG, "contributor")["allowed"]  # access through a group is not the participant's
    again = http.delete(path, headers=OWNER)
    assert again.status_code == 404 and again.json()["code"] == "participant_not_found"

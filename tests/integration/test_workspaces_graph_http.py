"""Developer workspaces ask the permission graph (issue 11 §3): a role reached through a
team or a group path counts as the participant's own; super_admin reaches
every project; removing a participant removes the workspace access derived from it, the
launch and the connection material alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import Container, build

LAUNCH = "/v1/portal/launches"
PROJECT = {
    "project_key": "graphy",
    "participants": [
        {"subject_key": "dev@x.io", "project_role": "contributor"},
        {"subject_key": "look@x.io", "project_role": "viewer"},
    ],
    "member_team_keys": ["platform"],
    "member_group_paths": ["/org/eng"],
    "owner_subject_keys": ["Lead@X.io"],
    "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "graphy/backend"}],
}


def who(email: str, groups: str = "") -> dict[str, str]:
    return {"x-edge-claim-email": email, **({"x-edge-claim-groups": groups} if groups else {})}


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[TestClient, Container]]:
    container = build(settings_for(sqlite_url, model_proxy_client_key="proxy-key-0123456789abcdef-0123456789"))
    with TestClient(create_app(container, workers=("projector",))) as http:
        created = http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN)
        assert created.status_code == 201, created.text
        http.headers["x-squadops-min-position"] = created.headers["x-squadops-position"]
        yield http, container
    container.close()


def launch(http: TestClient, headers: dict[str, str]) -> object:
    return http.get(f"{LAUNCH}/dev_workspace", params={"project_slug": "graphy"}, headers=headers)


@pytest.mark.parametrize(
    "headers",
    [
        who("teammate@x.io", "/org/acme/teams/platform"),  # member team -> contributor
        who("engineer@x.io", "/org/eng/backend"),  # nested under a member group path
        who("lead@x.io"),  # owner ⊃ maintainer ⊃ contributor
        who("root@x.io", "/org/platform/roles/super_admin"),  # super_admin reaches everything
    ],
)
def test_roles_reached_through_the_graph_get_a_workspace(served: tuple[TestClient, Container], headers: dict) -> None:
    http, _ = served
    answer = launch(http, headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "pending"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        (who("look@x.io"), "dev_workspace_viewer_only"),
        (who("outsider@x.io", "/org/sales"), "dev_workspace_project_access_denied"),
        (who("almost@x.io", "/org/engineering"), "dev_workspace_project_access_denied"),  # a prefix is not a parent
    ],
)
def test_viewer_and_no_path_get_their_codes(served: tuple[TestClient, Container], headers: dict, code: str) -> None:
    http, _ = served
    answer = launch(http, headers)
    assert answer.status_code == 403 and answer.json() == {"detail": answer.json()["detail"], "code": code}


def test_removing_a_participant_removes_launch_and_material(served: tuple[TestClient, Container]) -> None:
    http, _ = served
    mine = launch(http, who("dev@x.io"))
    assert mine.status_code == 200, mine.text
    scope = mine.json()["workspace_scope"]
    material = {"workspace_scope": scope}
    assert http.get(f"{LAUNCH}/dev_workspace/provider.yaml", params=material, headers=who("dev@x.io")).status_code == 200

    removed = http.delete("/v1/project-factory/projects/graphy/participants/dev@x.io", headers=ADMIN)
    assert removed.status_code == 200, removed.text
    http.headers["x-squadops-min-position"] = removed.headers["x-squadops-position"]

    again = launch(http, who("dev@x.io"))
    assert again.status_code == 403 and again.json()["code"] == "dev_workspace_project_access_denied"
    for path in ("provider.yaml", "kubeconfig"):
        answer = http.get(f"{LAUNCH}/dev_workspace/{path}", params=material, headers=who("dev@x.io"))
        assert answer.status_code == 403 and answer.json()["code"] == "dev_workspace_project_access_denied"
    # The same person reaching the project through a member team still gets one.
    assert launch(http, who("dev@x.io", "/org/acme/teams/platform")).status_code == 200

"""The project factory provisions through its ports: real local bare git repositories per
binding (default branch, initial commit, starter ``.env`` with the DSN), the DSN failing
open, outcomes recorded as events and served from the read model; camelCase = snake_case."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from litestar.testing import TestClient

from tests.conftest import admin_api
from tests.stub_http import StubServer
from workers.json_http import JsonHandler

PROJECTS = "/v1/project-factory/projects"
BINDINGS = [
    {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
    {"repository_key": "backend", "vcs_repo_slug": "acme/api", "default_branch": "trunk"},
    {"repository_key": "frontend", "vcs_repo_slug": "acme/web"},
    {"repository_key": "contract", "vcs_repo_slug": "acme/contract", "create_vcs_repo": False},
]


def client(tmp_path: Path, **changes: object) -> Iterator[TestClient]:
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path), **changes) as (http, _):
        yield http


def create(http: TestClient, body: dict) -> dict:
    answer = http.post(PROJECTS, json=body)
    assert answer.status_code == 201, answer.text
    http.headers["x-squadops-min-position"] = answer.headers["x-squadops-position"]
    return answer.json()


def git_show(data_dir: Path, url: str, ref: str, tenant: str = "default") -> str:
    """``git show`` in the repository a hosting URL names, in the tenant's own storage; the
    URL is the hosting service's and never the server's path."""
    assert url.startswith("https://vcs.squadops.local/") and str(data_dir) not in url, url
    owner, name = urlparse(url).path.strip("/").split("/")[-2:]
    path = data_dir / "vcs" / tenant / owner / f"{name}.git"
    return subprocess.run(["git", "--git-dir", str(path), "show", ref], capture_output=True, text=True, check=True).stdout


class _Sentry(JsonHandler):
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append(self.path)
        slug = self.path.split("/")[-3]
        self.send_json(201, {"dsn": {"public": f"https://k3y@errors.example/{slug}"}})


@pytest.fixture
def sentry() -> Iterator[str]:
    with StubServer(_Sentry) as stub:
        yield stub.url


def test_repositories_and_dsn_are_provisioned_and_recorded(tmp_path: Path, sentry: str) -> None:
    for http in client(tmp_path, error_tracking_url=sentry, error_tracking_org="acme-org"):
        out = create(http, {"project_key": "acme", "repository_bindings": BINDINGS})
        by_key = {b["repository_key"]: b for b in out["repository_bindings"]}
        assert out["vcs_repo_provision_status"] == "provisioned" and out["vcs_repo_provision_error"] == ""
        assert out["vcs_repo_url"] == by_key["assembly"]["vcs_repo_url"].strip() != ""
        assert "vcs_repo_provision_status" not in by_key["contract"]["metadata"]  # create_vcs_repo false
        assert not by_key["contract"]["vcs_repo_url"].startswith("file:")
        assert git_show(tmp_path, by_key["backend"]["vcs_repo_url"], "trunk:.env") == "SENTRY_DSN=https://k3y@errors.example/acme\n"
        assert git_show(tmp_path, by_key["frontend"]["vcs_repo_url"], "main:.env") == (
            "PUBLIC_SENTRY_DSN=https://k3y@errors.example/acme\n"
        )
        assert "README.md" in git_show(tmp_path, by_key["assembly"]["vcs_repo_url"], "main:")
        assert out["vcs_repo_node_id"] == by_key["assembly"]["metadata"]["vcs_repo_node_id"]
        assert _Sentry.seen[-1] == "/api/0/projects/acme-org/acme/keys/"
        assert out["project_assembly"]["error_reporting"]["status"] == "provisioned"
        # The read model serves the same, from the recorded events.
        read = http.get(f"{PROJECTS}/acme").json()
        assert read["repository_bindings"] == out["repository_bindings"]
        assert read["vcs_repo_provision_status"] == "provisioned"
        # A second project naming the same repository: that binding fails, recorded, creation stands.
        again = create(http, {"project_key": "again", "repository_bindings": BINDINGS[:1]})
        assert again["vcs_repo_provision_status"] == "failed" and "already exists" in again["vcs_repo_provision_error"]
        assert http.get(f"{PROJECTS}/again").json()["vcs_repo_provision_error"] == again["vcs_repo_provision_error"]


def test_dsn_failure_never_blocks_creation(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    for http in client(tmp_path, error_tracking_url=closed):
        out = create(http, {"project_key": "acme", "repository_bindings": BINDINGS[1:3]})
        assert out["project_assembly"]["error_reporting"]["status"] == "failed"
        assert out["project_assembly"]["error_reporting"]["error"]
        assert out["vcs_repo_provision_status"] == "provisioned"  # repositories still made, with an empty DSN
        backend = next(b for b in out["repository_bindings"] if b["repository_key"] == "backend")
        assert git_show(tmp_path, backend["vcs_repo_url"], "trunk:.env") == "SENTRY_DSN=\n"
        assert http.get(f"{PROJECTS}/acme").json()["project_assembly"]["error_reporting"]["status"] == "failed"


def test_camel_and_snake_case_metadata_read_the_same(tmp_path: Path) -> None:
    refs = [{"slug": "acme/design-system", "branch": "main"}]
    bindings = [dict(b, create_vcs_repo=False) for b in BINDINGS]
    for http in client(tmp_path):
        snake = create(http, {"project_key": "snake", "project_repository_bindings": bindings,
                              "source_ref_repos": refs, "agent_squad_suit_tester_roles": ["admin"]})
        camel = create(http, {"project_key": "camel", "projectRepositoryBindings": [
            {"repositoryKey": b["repository_key"], "vcsRepoSlug": b["vcs_repo_slug"],
             "repositoryType": b.get("repository_type", "application"), "defaultBranch": b.get("default_branch", "main"),
             "createVcsRepo": False} for b in BINDINGS],
            "sourceRefRepos": refs, "agentSquadSuitTesterRoles": ["admin"]})
        for key in ("ai_config", "vcs_repo_slug", "proof_codebase_repo_slug"):
            assert snake[key] == camel[key], key
        strip = [{k: v for k, v in b.items() if k != "metadata"} for b in snake["repository_bindings"]]
        assert strip == [{k: v for k, v in b.items() if k != "metadata"} for b in camel["repository_bindings"]]
        # source references are never mixed into the bindings
        assert {b["vcs_repo_slug"] for b in snake["repository_bindings"]}.isdisjoint({"acme/design-system"})
        assert snake["ai_config"]["source_ref_repos"][0]["slug"] == "acme/design-system"


def test_board_design_and_catalog_go_through_their_ports(tmp_path: Path) -> None:
    for http in client(tmp_path):
        out = create(http, {"project_key": "acme", "board_project_uid": "B-1", "establish_design_sync": True,
                            "repository_bindings": BINDINGS[1:2]})
        assert out["board_projection"] == {"provider": "none", "board_project_uid": "B-1", "status": "unlinked"}
        assert out["board_sync_status"] == "not_configured" and out["board_project_uid"] == "B-1"
        assert out["design_hub"]["design_enabled"] and out["design_hub"]["access_status"] == "not_configured"
        assert out["catalog_entity_ref"] == "component:default/acme"
        assert out["catalog_annotations"]["squadops.io/vcs-repos"] == out["repository_bindings"][0]["vcs_repo_url"]
        read = http.get(f"{PROJECTS}/acme").json()
        for key in ("board_projection", "board_sync_status", "design_hub", "catalog_entity_ref", "catalog_annotations"):
            assert read[key] == out[key], key
        plain = create(http, {"project_key": "plain"})
        assert (plain["board_sync_status"], plain["design_hub"], plain["board_projection"]) == ("disabled", None, {})

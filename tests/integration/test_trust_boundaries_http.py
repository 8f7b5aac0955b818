"""Issue 22, each finding as the attacker's request against the real HTTP app.

Path traversal through ``repository_key`` (on the local plane, with a real run), trailing
newlines and NULs in identifiers, repositories shared across tenants, hijacked identity
links, jobs and checkpoints of any tenant, a maintainer removing the owner, and the
server's path in ``vcs_repo_url``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from domain.shared.ids import derived_id
from projections.projects.projects import apply_provisioning, project_out
from tests.conftest import ADMIN
from tests.events import typed
from tests.integration.local_support import served
from tests.jobs_support import http, service

PROJECTS = "/v1/project-factory/projects"
KEY = "automation-key-22"
EVE = {"x-edge-claim-email": "eve@example.com", "x-edge-claim-groups": "/org/dev"}
ANN = {"x-edge-claim-email": "ann@example.com", "x-edge-claim-groups": "/org/dev"}
OWNER = {"x-edge-claim-email": "olga@example.com"}
MAINTAINER = {"x-edge-claim-email": "max@example.com"}
TRAVERSALS = ["../../../../../../tmp/x", "/tmp/x", "../../../vcs/alpha/api", "back\x00end", "backend\n", "a/b", ".."]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with (
        service(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "data", api_keys=(f"default:{KEY}",)) as container,
        http(container, workers=("projector",)) as c,
    ):
        yield c


def after(answer: Any) -> dict[str, str]:
    """Headers for a read that must see what ``answer``'s command wrote."""
    return {"X-Squadops-Min-Position": answer.headers["X-Squadops-Position"]}


def refused(answer: Any, loc: list[Any]) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == loc, answer.text


def files_under(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")} if root.exists() else set()


# -- 1. path traversal through repository_key (and the identifier rule) -----------------------------


def test_a_traversing_repository_key_never_leaves_the_data_directory_on_a_real_run(tmp_path: Path) -> None:
    plan = {"planner": [{"format": "claude", "steps": [["result", {}]]}]}
    escape = "../../../../outside"  # from <data>/repos/default/legacy/: <tmp_path>/outside.git
    outside = tmp_path / "outside.git"
    with served(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "data", plan) as svc:
        for key in [*TRAVERSALS, escape]:
            for field in ("repository_bindings", "projectRepositoryBindings"):
                body = {"project_key": "evil", field: [{"repository_key": key, "repository_type": "assembly"}]}
                refused(svc.http.post(PROJECTS, json=body), ["body", "repository_bindings", 0, "repository_key"])
            nested = {"project_key": "evil", "project_assembly": {"repository_bindings": [{"repository_key": key}]}}
            refused(svc.http.post(PROJECTS, json=nested), ["body", "repository_bindings", 0, "repository_key"])
        assert svc.http.get(f"{PROJECTS}/evil").status_code == 404  # nothing was recorded

        # A project recorded before the rule (an older log) holds the traversing key: the
        # plane refuses it where the path is built; the session is blocked, every tick after.
        svc.container.projects.create_project(
            tenant="default", created_by="old@example.com",
            request={"project_key": "legacy", "repository_bindings": [{"repository_key": escape, "repository_type": "assembly"}]},
        )
        answer = svc.http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "legacy"})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["run_id"]
        assert svc.http.post(f"/v1/admin/studio/runs/{run_id}/execute").status_code == 202
        planner = svc.wait_status(run_id, "planner", "blocked")
        assert planner["blocker_code"] == "workspace_source_materialization_failed"
        assert not outside.exists() and not (tmp_path / "data" / "repos" / "default" / "legacy").exists()
        assert {p for p in files_under(tmp_path) if not p.startswith(str(tmp_path / "data"))} <= {
            str(tmp_path / "db.sqlite"), str(tmp_path / "db.sqlite-wal"), str(tmp_path / "db.sqlite-shm"),
        }
        # The acme project's own run still works beside it: the ticker never failed.
        good = svc.launch()
        svc.wait_status(good, "planner", "session_completed", "blocked")
        assert svc.repository("assembly").exists()


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        (PROJECTS, {"project_key": "nl", "repository_bindings": [{"vcs_repo_slug": "acme/api\n"}]},
         ["body", "repository_bindings", 0, "vcs_repo_slug"]),
        (PROJECTS, {"project_key": "nl", "repository_bindings": [{"default_branch": "main\n"}]},
         ["body", "repository_bindings", 0, "default_branch"]),
        (PROJECTS, {"project_key": "nl", "repository_bindings": [{"default_branch": "--upload-pack=x"}]},
         ["body", "repository_bindings", 0, "default_branch"]),
        (PROJECTS, {"project_key": "nl", "projectRepositoryBindings": [{"defaultBranch": "main\n"}]},
         ["body", "repository_bindings", 0, "default_branch"]),
        ("/v1/jobs/node-power/sleep", {"tenant_id": "default", "node_name": "gpu-1\n", "mac_address": "52:54:00:12:34:56"},
         ["body", "node_name"]),
    ],
)
def test_a_trailing_newline_or_an_option_is_not_an_identifier(client: TestClient, path: str, body: dict, loc: list) -> None:
    refused(client.post(path, json=body, headers=ADMIN), loc)


def test_no_published_pattern_lets_a_trailing_newline_through(client: TestClient) -> None:
    """The rule behind the newline findings: a pattern anchored with ``$`` must say ``$(?!\\n)``."""
    document = client.get("/openapi.json").json()
    patterns: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert patterns
    assert [p for p in patterns if p.endswith("$")] == []  # "$" also matches before a final "\n"


# -- 6. repositories are scoped by tenant ----------------------------------------------------------


def test_a_tenant_neither_takes_nor_reaches_another_tenants_repository(client: TestClient, tmp_path: Path) -> None:
    binding = [{"repository_key": "backend", "vcs_repo_slug": "acme/api"}]
    globex = {**EVE, "X-Squadops-Tenant-Id": "globex"}
    # The other tenant takes the name first: it gets its own repository, not the name.
    first = client.post(PROJECTS, json={"project_key": "shop", "repository_bindings": binding}, headers=globex)
    mine = client.post(PROJECTS, json={"project_key": "shop", "repository_bindings": binding}, headers=ANN)
    assert (first.status_code, mine.status_code) == (201, 201), mine.text
    assert first.json()["vcs_repo_provision_status"] == mine.json()["vcs_repo_provision_status"] == "provisioned"
    vcs = tmp_path / "data" / "vcs"
    assert (vcs / "globex" / "acme" / "api.git" / "HEAD").exists() and (vcs / "default" / "acme" / "api.git" / "HEAD").exists()
    assert not (vcs / "acme").exists()
    # Binding "another tenant's" repository names one's own tenant's, never theirs.
    taken = client.post(PROJECTS, json={"project_key": "fork", "repository_bindings": [
        {"repository_key": "backend", "vcs_repo_slug": "acme/api", "create_vcs_repo": False}]}, headers=globex)
    assert taken.status_code == 201
    # vcs_repo_url is the hosting URL, never the server's path.
    url = mine.json()["repository_bindings"][0]["vcs_repo_url"]
    assert url == "https://vcs.squadops.local/acme/api" and str(tmp_path) not in mine.text
    assert first.json()["repository_bindings"][0]["vcs_repo_url"] == "https://vcs.squadops.local/globex/acme/api"


def test_a_non_admin_cannot_create_the_gates_default_repository(client: TestClient, tmp_path: Path) -> None:
    for body in (
        {"project_key": "grab", "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "squadops/gate-default"}]},
        {"project_key": "grab", "repository_bindings": [{"repository_key": "x", "vcs_repo_slug": "squadops/other"}]},
        {"project_key": "squadops", "repository_bindings": [{"repository_key": "gate-default"}]},
    ):
        answer = client.post(PROJECTS, json=body, headers=EVE)
        assert answer.status_code == 403 and answer.json()["code"] == "repository_reserved", answer.text
    assert not (tmp_path / "data" / "vcs" / "default" / "squadops").exists()
    # The gate's default repository is the service's own, made per tenant by the gate.
    run = client.post("/v1/admin/gate/threads/t-22/run", json={}, headers=ADMIN)
    assert run.status_code == 200, run.text
    assert (tmp_path / "data" / "vcs" / "default" / "squadops" / "gate-default.git" / "HEAD").exists()


# -- 3. identity links ---------------------------------------------------------------------------------


def test_a_link_never_claims_someone_elses_names(client: TestClient) -> None:
    ann = client.post("/v1/identity/links/vcs", json={"provider_user_id": "1", "username": "ann", "user_id": "u-ann"}, headers=ANN)
    assert ann.status_code == 200
    attacks = [
        ({"provider_user_id": "66", "email": "ann@example.com"}, 403, "identity_claim_forbidden"),
        ({"provider_user_id": "66", "email": "carol@example.com"}, 403, "identity_claim_forbidden"),
        ({"provider_user_id": "66", "username": "ann"}, 409, "identity_claim_taken"),
        ({"provider_user_id": "66", "user_id": "u-ann"}, 409, "identity_claim_taken"),
        ({"provider_user_id": "66", "subject_key": "ann@example.com", "email": "ann@example.com"}, 403, "identity_link_forbidden"),
    ]
    for body, status, code in attacks:
        answer = client.post("/v1/identity/links/vcs", json=body, headers={**EVE, **after(ann)})
        assert (answer.status_code, answer.json()["code"]) == (status, code), answer.text
    # Every look-up by Ann's names still answers Ann.
    for query in ({"email": "ann@example.com"}, {"username": "ann"}, {"user_id": "u-ann"}):
        found = client.get("/v1/identity/links/vcs", params=query, headers={**ADMIN, **after(ann)}).json()
        assert found["subject_key"] == "ann@example.com" and found["provider_user_id"] == "1"
    # Eve may still link her own names.
    own = client.post("/v1/identity/links/vcs", json={"provider_user_id": "66", "username": "eve"}, headers=EVE)
    assert own.status_code == 200 and own.json()["subject_key"] == "eve@example.com"


# -- 4. jobs, sync and checkpoints -------------------------------------------------------------------


def test_jobs_and_checkpoints_need_a_role_or_a_key_in_that_tenant(client: TestClient) -> None:
    acme = {**EVE, "X-Squadops-Tenant-Id": "acme"}
    reconcile = {"tenant_id": "acme", "proposal_id": "p-1", "mode": "reconcile"}
    sleep = {"tenant_id": "acme", "node_name": "gpu-1", "mac_address": "52:54:00:12:34:56"}
    for method, path, body in (
        ("post", "/v1/jobs/sync/access", reconcile),
        ("post", "/v1/jobs/node-power/sleep", sleep),
        ("post", "/v1/jobs/node-power/wake", sleep),
        ("post", "/v1/wizard/try", {"tenant_id": "acme", "proposal_id": "p-1", "provider": "vcs"}),
        ("get", "/v1/sync/checkpoints", None),
        ("get", "/v1/sync/checkpoints/idp?scope=default", None),
        ("get", "/v1/jobs/job-0000000000000000", None),
    ):
        kwargs = {"json": body} if body is not None else {}
        answer = getattr(client, method)(path, headers=acme, **kwargs)
        assert (answer.status_code, answer.json()["code"]) == (403, "tenant_role_required"), (path, answer.text)
        keyed = getattr(client, method)(path, headers={"x-api-key": KEY, "X-Squadops-Tenant-Id": "acme"}, **kwargs)
        assert (keyed.status_code, keyed.json()["code"]) == (403, "api_key_tenant_forbidden"), (path, keyed.text)
    # The key works in its own tenant; job ids are random, not derived from tenant and key.
    body = {"tenant_id": "default", "proposal_id": "p-1", "mode": "request", "idempotency_key": "k-22"}
    job = client.post("/v1/jobs/sync/access", json=body, headers={"x-api-key": KEY})
    assert job.status_code == 202, job.text
    assert job.json()["id"] != derived_id("job", "default", "k-22") and re.fullmatch(r"job-[0-9a-f]{16}", job.json()["id"])
    again = client.post("/v1/jobs/sync/access", json=body, headers={"x-api-key": KEY})
    assert (again.status_code, again.json()["id"]) == (200, job.json()["id"])
    other = client.post("/v1/jobs/sync/access", json={**body, "idempotency_key": "k-23"}, headers={"x-api-key": KEY})
    assert other.json()["id"] != job.json()["id"]


# -- 5. participants ---------------------------------------------------------------------------------


def test_a_maintainer_cannot_remove_the_owner_and_a_removed_participant_can_come_back(client: TestClient) -> None:
    team = [
        {"subject_key": "olga@example.com", "project_role": "owner"},
        {"subject_key": "max@example.com", "project_role": "maintainer"},
        {"subject_key": "vic@example.com", "project_role": "viewer"},
    ]
    created = client.post(PROJECTS, json={"project_key": "team", "participants": team}, headers=OWNER)
    assert created.status_code == 201, created.text
    base = f"{PROJECTS}/team/participants"
    seen = after(created)
    denied = client.delete(f"{base}/olga@example.com", headers={**MAINTAINER, **seen})
    assert (denied.status_code, denied.json()["code"]) == (403, "participant_rank_forbidden")
    peer = client.post(base, json={"subject_key": "mia@example.com", "project_role": "maintainer"}, headers={**MAINTAINER, **seen})
    assert (peer.status_code, peer.json()["code"]) == (403, "participant_rank_forbidden")
    promoted = client.post(base, json={"subject_key": "max@example.com", "project_role": "owner"}, headers={**MAINTAINER, **seen})
    assert promoted.status_code == 403
    # The last owner stays, whoever asks.
    last = client.delete(f"{base}/olga@example.com", headers={**ADMIN, **seen})
    assert (last.status_code, last.json()["code"]) == (409, "last_owner")
    demoted = client.post(base, json={"subject_key": "olga@example.com", "project_role": "viewer"}, headers={**OWNER, **seen})
    assert (demoted.status_code, demoted.json()["code"]) == (409, "last_owner")
    # A maintainer removes a viewer; the owner removes the maintainer and adds them back.
    gone = client.delete(f"{base}/vic@example.com", headers={**MAINTAINER, **seen})
    assert gone.status_code == 200
    removed = client.delete(f"{base}/max@example.com", headers={**OWNER, **after(gone)})
    assert removed.status_code == 200
    assert client.get(f"{PROJECTS}/team", headers={**MAINTAINER, **after(removed)}).status_code == 403
    back = client.post(base, json={"subject_key": "Max@Example.com", "project_role": "maintainer"}, headers={**OWNER, **after(removed)})
    assert back.status_code == 200, back.text
    roles = {p["subject_key"]: p["project_role"] for p in back.json()["participants"]}
    assert roles == {"olga@example.com": "owner", "max@example.com": "maintainer"}
    read = client.get(f"{PROJECTS}/team", headers={**MAINTAINER, **after(back)})
    assert read.status_code == 200 and read.json()["participants"] == back.json()["participants"]


def test_a_server_path_stored_by_an_older_log_is_never_shown_as_vcs_repo_url() -> None:
    request = {"repository_bindings": [{"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"}]}
    project = project_out("default", "acme", request, "op@example.com", "2026-01-01T00:00:00.000000Z")
    stored = typed(
        "Project.RepositoryProvisioned", repository_key="assembly", status="provisioned", vcs_repo_url="file:///srv/squadops/var/vcs/acme/assembly.git",
        vcs_repo_node_id="c" * 40, error="", at="2026-01-01T00:00:01.000000Z",
    )
    apply_provisioning(project, stored)
    assert project["vcs_repo_url"] == project["repository_bindings"][0]["vcs_repo_url"] == "https://vcs.squadops.local/acme/assembly"
    assert project["repository_bindings"][0]["metadata"]["vcs_repo_provision_status"] == "provisioned"

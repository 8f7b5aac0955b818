"""Developer workspaces over HTTP: launch by role, every error code, list, DELETE, material, meter."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import Container, build

LAUNCH = "/v1/portal/launches"
ROLES = {
    "owner@x.io": "owner",
    "maint@x.io": "maintainer",
    "contrib@x.io": "contributor",
    "viewer@x.io": "viewer",
}
PROJECT = {
    "project_key": "acme",
    "participants": [{"subject_key": k, "project_role": r} for k, r in ROLES.items()],
    "repository_bindings": [
        {"repository_key": "assembly", "repository_type": "assembly", "vcs_repo_slug": "acme/assembly"},
        {"repository_key": "backend", "vcs_repo_slug": "acme/backend", "default_branch": "trunk"},
    ],
}


def who(email: str) -> dict[str, str]:
    return {"x-edge-claim-email": email}


def serve(url: str, **changes: object) -> tuple[TestClient, Container]:
    container = build(settings_for(url, **changes))
    return TestClient(create_app(container, workers=("projector",))), container


@pytest.fixture
def served(database_url: str) -> Iterator[tuple[TestClient, Container]]:
    http, container = serve(database_url, model_proxy_client_key="proxy-key-0123456789abcdef-0123456789")
    with http:
        created = http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN)
        assert created.status_code == 201, created.text
        yield http, container
    container.close()


def launch(http: TestClient, email: str, **params: str) -> object:
    return http.get(f"{LAUNCH}/dev_workspace", params={"project_slug": "acme", **params}, headers=who(email))


@pytest.mark.parametrize("email", ["owner@x.io", "maint@x.io", "contrib@x.io"])
def test_owner_maintainer_and_contributor_get_a_pending_workspace(served: tuple[TestClient, Container], email: str) -> None:
    http, _ = served
    answer = launch(http, email)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "pending" and body["repository_key"] == "backend" and body["branch"] == "trunk"
    assert body["namespace"].startswith("fops-dev-default-acme-") and body["namespace"].endswith(body["workspace_scope"][-10:])
    material = body["reconnect_material"]
    assert material["provider_url"].endswith(f"provider.yaml?workspace_scope={body['workspace_scope']}")
    names = material["usage_observability"]["metric_names"]
    assert names == {"tokens": "squadops_dev_workspace_model_tokens", "requests": "squadops_dev_workspace_model_requests"}
    again = launch(http, email)
    assert again.json()["workspace_scope"] == body["workspace_scope"]  # stable per tuple


@pytest.mark.parametrize(
    ("email", "status", "code"),
    [
        ("viewer@x.io", 403, "dev_workspace_viewer_only"),
        ("stranger@x.io", 403, "dev_workspace_project_access_denied"),
    ],
)
def test_viewer_and_stranger_get_no_workspace(served: tuple[TestClient, Container], email: str, status: int, code: str) -> None:
    http, _ = served
    answer = launch(http, email)
    assert answer.status_code == status and answer.json()["code"] == code, answer.text
    assert set(answer.json()) == {"detail", "code"}
    assert http.get(f"{LAUNCH}/dev_workspace/workspaces", headers=who(email)).json() == {"items": []}


def test_missing_proxy_client_key_produces_no_workspace(sqlite_url: str) -> None:
    http, container = serve(sqlite_url)
    with http:
        http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN)
        answer = launch(http, "owner@x.io")
        assert answer.status_code == 409 and answer.json()["code"] == "dev_workspace_proxy_client_token_missing"
        container.await_reads(container.event_store.max_position())
        assert http.get(f"{LAUNCH}/dev_workspace/workspaces", headers=who("owner@x.io")).json() == {"items": []}
    container.close()


def test_other_errors_answer_c3_bodies(served: tuple[TestClient, Container]) -> None:
    http, _ = served
    cases = [
        (http.get(f"{LAUNCH}/dev_workspace", params={"project_slug": "nope"}, headers=who("owner@x.io")), 404, "project_not_found"),
        (http.get(f"{LAUNCH}/other", params={"project_slug": "acme"}, headers=who("owner@x.io")), 404, "solution_not_found"),
        (launch(http, "owner@x.io", repository_key="frontend"), 404, "repository_not_found"),
        (http.get(f"{LAUNCH}/dev_workspace", params={"project_slug": "acme"}), 401, None),
        (http.get(f"{LAUNCH}/dev_workspace/kubeconfig", params={"workspace_scope": "missing-1"}, headers=who("owner@x.io")), 404, "dev_workspace_not_found"),
    ]
    for answer, status, code in cases:
        assert answer.status_code == status, answer.text
        if code:
            assert answer.json() == {"detail": answer.json()["detail"], "code": code}
    missing = http.get(f"{LAUNCH}/dev_workspace/provider.yaml", headers=who("owner@x.io"))
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][-1] == "workspace_scope"


def test_list_material_and_delete_are_the_callers_own(served: tuple[TestClient, Container]) -> None:
    http, container = served
    mine = launch(http, "contrib@x.io").json()
    launch(http, "owner@x.io")
    scope = mine["workspace_scope"]
    listed = http.get(f"{LAUNCH}/dev_workspace/workspaces", headers=who("contrib@x.io"))
    assert [w["workspace_scope"] for w in listed.json()["items"]] == [scope]
    assert listed.json()["items"][0]["reconnect_material"] == mine["reconnect_material"]
    other = http.get(f"{LAUNCH}/dev_workspace/provider.yaml", params={"workspace_scope": scope}, headers=who("owner@x.io"))
    assert other.status_code == 403 and other.json()["code"] == "dev_workspace_not_owner"
    provider = msgspec.yaml.decode(
        http.get(f"{LAUNCH}/dev_workspace/provider.yaml", params={"workspace_scope": scope}, headers=who("contrib@x.io")).content
    )
    assert provider["agent"]["driver"] == "kubernetes"
    assert provider["env"]["OPENAI_API_KEY"] == "${SQUADOPS_METER_TOKEN}" and "proxy-key-0123456789abcdef-0123456789" not in str(provider)
    assert provider["env"]["OPENAI_BASE_URL"].endswith(mine["reconnect_material"]["usage_observability"]["meter_path"])
    # Claude Code appends /v1/messages to its root: the same meter, one level up.
    assert provider["env"]["ANTHROPIC_BASE_URL"] + "/v1" == provider["env"]["OPENAI_BASE_URL"]
    scratch = next(v for v in provider["volumes"] if v["name"] == "scratch")
    assert (scratch["size"], scratch["storage_class"], scratch["access_mode"]) == ("10Gi", "scratch", "ReadWriteOnce")
    kube = msgspec.yaml.decode(
        http.get(f"{LAUNCH}/dev_workspace/kubeconfig", params={"workspace_scope": scope}, headers=who("contrib@x.io")).content
    )
    args = kube["users"][0]["user"]["exec"]["args"]
    assert "--oidc-client-id=kube-access" in args and not any("edge" in a for a in args)
    # DELETE needs a ready workspace (the table): pending answers 409 with the C3 body.
    early = http.delete(f"{LAUNCH}/dev_workspace/workspaces/{scope}", headers=who("contrib@x.io"))
    assert early.status_code == 409 and early.json()["code"] == "dev_workspace_state_conflict"
    wid = f"dws:default:{scope}"
    container.workspaces.claim(wid, lambda w: w.pick_up("2026-01-01T00:00:00.000000Z", "t"))
    container.workspaces.claim(wid, lambda w: w.provisioned("2026-01-01T00:00:01.000000Z", "p", []))
    foreign = http.delete(f"{LAUNCH}/dev_workspace/workspaces/{scope}", headers=who("owner@x.io"))
    assert foreign.status_code == 404
    released = http.delete(f"{LAUNCH}/dev_workspace/workspaces/{scope}", headers=who("contrib@x.io"))
    assert released.status_code == 200 and released.json()["status"] == "release_requested"
    assert set(released.json()) == set(mine)


def test_meter_counts_concurrent_requests_without_loss(served: tuple[TestClient, Container]) -> None:
    http, container = served
    ws = launch(http, "contrib@x.io").json()
    obs = ws["reconnect_material"]["usage_observability"]
    token = container.meter_tokens.issue(obs["employee_slug"], ws["workspace_scope"])
    url = f"{obs['meter_path']}/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "one two three"}]}

    def call(_: int) -> int:
        answer = http.post(url, json=body, headers={"authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        return answer.json()["usage"]["total_tokens"]

    with ThreadPoolExecutor(8) as pool:
        totals = list(pool.map(call, range(64)))
    denied = http.post(url, json=body, headers={"authorization": "Bearer contrib.x.bad"})
    assert denied.status_code == 401 and denied.json()["code"] == "meter_token_invalid"
    metrics = http.get("/metrics").text
    label = f'{{agent="",{obs["employee_label"]}="{obs["employee"]}",run=""}}'
    assert f"{obs['metric_names']['requests']}{label} 64.0" in metrics
    assert f"{obs['metric_names']['tokens']}{label} {float(sum(totals))}" in metrics


def test_the_whole_story_launch_ready_release_resume(database_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    http, container = serve(database_url, model_proxy_client_key="proxy-key-0123456789abcdef-0123456789", workspace_root=str(tmp_path / "cluster"))
    controller = container.workspace_controller
    assert controller is not None

    def reconcile() -> None:
        container.await_reads(container.event_store.max_position(), 5.0)
        controller.reconcile_once()

    def mine() -> dict:
        container.await_reads(container.event_store.max_position(), 5.0)
        return http.get(f"{LAUNCH}/dev_workspace/workspaces", headers=who("maint@x.io")).json()["items"][0]

    with http:
        http.post("/v1/project-factory/projects", json=PROJECT, headers=ADMIN)
        scope = launch(http, "maint@x.io").json()["workspace_scope"]
        for _ in range(2):
            reconcile()
        assert mine()["status"] == "ready"
        assert http.delete(f"{LAUNCH}/dev_workspace/workspaces/{scope}", headers=who("maint@x.io")).json()["status"] == "release_requested"
        for _ in range(2):
            reconcile()
        assert mine()["status"] == "suspended"
        resumed = launch(http, "maint@x.io").json()
        assert (resumed["status"], resumed["resume_estimate_seconds"], resumed["workspace_scope"]) == ("pending", 90, scope)
        assert controller.last_error == ""
    container.close()

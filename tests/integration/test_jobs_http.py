"""The jobs, sync and identity endpoints over HTTP: field rules, errors, auth, idempotency."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.conftest import ADMIN
from tests.jobs_support import http, service

API_KEY = "automation-key-1"
PERSON = {"x-edge-claim-email": "Dev@Example.com", "x-edge-claim-groups": "/org/dev"}
ACCESS = {"tenant_id": "default", "proposal_id": "proposal-1", "mode": "delta_cursor"}
WIZARD = {"tenant_id": "default", "proposal_id": "proposal-1", "provider": "vcs"}
SLEEP = {"tenant_id": "default", "node_name": "gpu-1", "mac_address": "52:54:00:12:34:56", "verify_after_seconds": 0}
JOB_FIELDS = {
    "tenant_id", "id", "proposal_id", "job_type", "provider_kind", "status", "payload", "result",
    "error_message", "created_at", "updated_at",
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One service for the module: each test uses its own keys and subjects."""
    folder = tmp_path_factory.mktemp("jobs-http")
    with service(f"sqlite:///{folder / 'squadops.db'}", folder, api_keys=(API_KEY,)) as container, http(container, workers=("projector",)) as c:
        yield c


def invalid(answer: Any) -> list[tuple[list[Any], str]]:
    assert answer.status_code == 422, answer.text
    return [(item["loc"], item["type"]) for item in answer.json()["detail"]]


# -- field rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "loc", "type_"),
    [
        ("/v1/jobs/sync/access", {**ACCESS, "tenant_id": ""}, ["body", "tenant_id"], "string_length"),
        ("/v1/jobs/sync/access", {**ACCESS, "proposal_id": ""}, ["body", "proposal_id"], "string_length"),
        ("/v1/jobs/sync/access", {**ACCESS, "mode": "everything"}, ["body", "mode"], None),
        ("/v1/jobs/sync/access", {**ACCESS, "preflight_mode": "lenient"}, ["body", "preflight_mode"], None),
        ("/v1/jobs/sync/access", {k: v for k, v in ACCESS.items() if k != "mode"}, ["body", "mode"], "missing"),
        ("/v1/jobs/sync/access", {k: v for k, v in ACCESS.items() if k != "tenant_id"}, ["body", "tenant_id"], "missing"),
        ("/v1/jobs/sync/access", {**ACCESS, "preflight_ssot": {"idp": {"schema": 2}}}, ["body", "preflight_ssot"], "type_error"),
        ("/v1/jobs/sync/access", {**ACCESS, "required_connectors": ["bad id!"]}, ["body", "required_connectors", 0], "string_pattern_mismatch"),
        ("/v1/jobs/sync/access", {**ACCESS, "payload": []}, ["body", "payload"], "type_error"),
        ("/v1/jobs/sync/access", {**ACCESS, "idempotency_key": ""}, ["body", "idempotency_key"], "string_length"),
        ("/v1/wizard/try", {**WIZARD, "provider": ""}, ["body", "provider"], "string_length"),
        ("/v1/wizard/try", {**WIZARD, "tenant_id": ""}, ["body", "tenant_id"], "string_length"),
        ("/v1/wizard/try", {**WIZARD, "proposal_id": ""}, ["body", "proposal_id"], "string_length"),
        ("/v1/wizard/try", {**WIZARD, "update_mode": "maybe"}, ["body", "update_mode"], None),
        ("/v1/wizard/try", {**WIZARD, "strict": "yes"}, ["body", "strict"], "type_error"),
        ("/v1/wizard/try", {"tenant_id": "default", "proposal_id": "p"}, ["body", "provider"], "missing"),
        ("/v1/jobs/node-power/sleep", {**SLEEP, "mac_address": "52:54:00"}, ["body", "mac_address"], "string_pattern_mismatch"),
        ("/v1/jobs/node-power/sleep", {**SLEEP, "verify_after_seconds": -1}, ["body", "verify_after_seconds"], "range_error"),
        ("/v1/jobs/node-power/sleep", {**SLEEP, "node_name": "gpu 1"}, ["body", "node_name"], "string_pattern_mismatch"),
        ("/v1/jobs/node-power/sleep", {k: v for k, v in SLEEP.items() if k != "node_name"}, ["body", "node_name"], "missing"),
    ],
)
def test_every_field_rule_is_a_422_naming_the_field(client: TestClient, path: str, body: dict, loc: list, type_: str | None) -> None:
    found = invalid(client.post(path, json=body, headers=ADMIN))
    assert found[0][0] == loc
    if type_ is not None:
        assert found[0][1] == type_


def test_a_tenant_header_that_differs_from_the_body_is_a_422(client: TestClient) -> None:
    answer = client.post("/v1/jobs/sync/access", json=ACCESS, headers={**ADMIN, "X-Squadops-Tenant-Id": "acme"})
    assert invalid(answer) == [(["body", "tenant_id"], "value_error")]


def test_checkpoint_reads_need_a_scope_and_answer_404_for_unknown_ones(client: TestClient) -> None:
    assert invalid(client.get("/v1/sync/checkpoints/idp", headers=ADMIN)) == [(["query", "scope"], "missing")]
    assert invalid(client.get("/v1/sync/checkpoints/idp", params={"scope": "a b"}, headers=ADMIN))[0][0] == ["query", "scope"]
    missing = client.get("/v1/sync/checkpoints/idp", params={"scope": "default"}, headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["code"] == "checkpoint_not_found"
    assert client.get("/v1/sync/checkpoints", headers=ADMIN).json() == {"items": []}


def test_unknown_and_malformed_job_ids(client: TestClient) -> None:
    missing = client.get("/v1/jobs/job-0000000000000000", headers=ADMIN)
    assert missing.status_code == 404 and missing.json() == {"detail": missing.json()["detail"], "code": "job_not_found"}
    assert invalid(client.get("/v1/jobs/not%20an%20id", headers=ADMIN))[0][0] == ["path", "job_id"]


# -- auth (C2) --------------------------------------------------------------------------------------

ENDPOINTS = [
    ("post", "/v1/jobs/sync/access", ACCESS),
    ("post", "/v1/wizard/try", WIZARD),
    ("post", "/v1/jobs/node-power/sleep", SLEEP),
    ("get", "/v1/jobs/job-0000000000000000", None),
    ("get", "/v1/sync/checkpoints", None),
    ("get", "/v1/sync/checkpoints/idp?scope=default", None),
    ("get", "/v1/identity/links/vcs", None),
    ("post", "/v1/identity/links/vcs", {"provider_user_id": "1"}),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_without_a_principal_or_an_api_key_every_endpoint_is_a_401(client: TestClient, method: str, path: str, body: Any) -> None:
    kwargs = {"json": body} if body is not None else {}
    answer = getattr(client, method)(path, **kwargs)
    assert answer.status_code == 401 and answer.json()["code"] == "unauthenticated"
    wrong = getattr(client, method)(path, headers={"x-api-key": "guessed"}, **kwargs)
    assert wrong.status_code == 401 and wrong.json()["code"] == "api_key_invalid"


def test_an_api_key_or_a_principal_may_enqueue(client: TestClient) -> None:
    by_key = client.post("/v1/wizard/try", json=WIZARD, headers={"x-api-key": API_KEY})
    assert by_key.status_code == 202 and by_key.json()["status"] == "queued"
    assert set(by_key.json()) == JOB_FIELDS and by_key.headers["X-Squadops-Position"]
    # A person enqueues in a tenant where they hold a project role (contributor or above).
    project = {"project_key": "jobs-dev", "participants": [{"subject_key": "dev@example.com", "project_role": "contributor"}]}
    created = client.post("/v1/project-factory/projects", json=project, headers=ADMIN)
    assert created.status_code == 201, created.text
    seen = {"X-Squadops-Min-Position": created.headers["X-Squadops-Position"]}
    by_person = client.post("/v1/jobs/sync/access", json=ACCESS, headers={**PERSON, **seen})
    assert by_person.status_code == 202 and by_person.json()["job_type"] == "access_sync"


def test_the_node_power_answer_omits_proposal_result_and_error(client: TestClient) -> None:
    answer = client.post("/v1/jobs/node-power/sleep", json={**SLEEP, "proposal_id": "p-1"}, headers=ADMIN)
    assert answer.status_code == 202
    assert set(answer.json()) == JOB_FIELDS - {"proposal_id", "result", "error_message"}
    assert answer.json()["provider_kind"] == "power_device"


# -- idempotency (C18) --------------------------------------------------------------------------------


def test_a_key_answers_the_same_job_for_the_same_request_and_409_for_another(client: TestClient) -> None:
    body = {**ACCESS, "idempotency_key": "sync-42"}
    first = client.post("/v1/jobs/sync/access", json=body, headers=ADMIN)
    again = client.post("/v1/jobs/sync/access", json={**body, "dry_run": False}, headers={"x-api-key": API_KEY})
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"]
    other = client.post("/v1/jobs/sync/access", json={**body, "dry_run": True}, headers=ADMIN)
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
    elsewhere = client.post("/v1/wizard/try", json={**WIZARD, "idempotency_key": "sync-42"}, headers=ADMIN)
    assert elsewhere.status_code == 409


def test_twenty_concurrent_identical_requests_make_exactly_one_job(database_url: str, tmp_path: Path) -> None:
    body = {**WIZARD, "idempotency_key": "wizard-once", "ssot": {"org": "acme"}}
    with service(database_url, tmp_path) as container, http(container, ADMIN) as c:
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(lambda _: c.post("/v1/wizard/try", json=body), range(20)))
        assert sorted(a.status_code for a in answers) == [200] * 19 + [202]
        assert len({a.json()["id"] for a in answers}) == 1
        queued = [
            n for n in container.event_store.recorder.select_notifications(start=1, limit=1000)
            if n.topic.endswith("Job.Queued")
        ]
        assert len(queued) == 1


# -- identity links (C17) --------------------------------------------------------------------------------


def test_identity_links_answer_for_the_caller_or_a_named_subject(client: TestClient) -> None:
    mine = client.get("/v1/identity/links/vcs", headers=PERSON)
    assert mine.status_code == 200
    assert mine.json() | {"subject_id": ""} == {
        "subject_id": "", "subject_key": "dev@example.com", "user_id": "", "username": "", "email": "dev@example.com",
        "provider": "vcs", "linked": False, "provider_user_id": "", "provider_username": "", "attributes": {},
    }
    linked = client.post(
        "/v1/identity/links/vcs",
        json={"provider_user_id": "9001", "provider_username": "dev-gh", "username": "dev", "user_id": "u-7", "attributes": {"team": "core"}},
        headers={**PERSON, "X-Squadops-Min-Position": "0"},
    )
    assert linked.status_code == 200 and linked.json()["linked"] is True
    position = linked.headers["X-Squadops-Position"]
    reads = {"X-Squadops-Min-Position": position}
    for query in ({}, {"username": "DEV"}, {"user_id": "u-7"}, {"email": "dev@example.com"}):
        found = client.get("/v1/identity/links/vcs", params=query, headers={**PERSON, **reads}).json()
        assert (found["linked"], found["provider_user_id"], found["provider_username"]) == (True, "9001", "dev-gh")
        assert found["attributes"] == {"team": "core"} and found["subject_id"] == mine.json()["subject_id"]
    other_provider = client.get("/v1/identity/links/board", params={"username": "dev"}, headers={**ADMIN, **reads}).json()
    assert other_provider["linked"] is False and other_provider["subject_key"] == "dev@example.com"
    assert other_provider["user_id"] == "u-7" and other_provider["provider_user_id"] == ""
    # another person may not look the subject up; an admin or an API key may
    assert client.get("/v1/identity/links/vcs", params={"username": "dev"}, headers={"x-edge-claim-email": "eve@example.com", **reads}).status_code == 403
    assert client.get("/v1/identity/links/vcs", params={"user_id": "u-7"}, headers={"x-api-key": API_KEY, **reads}).json()["linked"] is True
    unknown = client.get("/v1/identity/links/vcs", params={"username": "nobody"}, headers={**ADMIN, **reads})
    assert unknown.status_code == 404 and unknown.json()["code"] == "subject_not_found"
    assert invalid(client.get("/v1/identity/links/vcs", headers={"x-api-key": API_KEY}))[0][0] == ["query", "user_id"]
    unlinked = client.post("/v1/identity/links/vcs", json={"linked": False}, headers=PERSON)
    after = client.get("/v1/identity/links/vcs", headers={**PERSON, "X-Squadops-Min-Position": unlinked.headers["X-Squadops-Position"]}).json()
    assert (after["linked"], after["provider_user_id"], after["username"]) == (False, "", "dev")


def test_linking_someone_else_needs_super_admin_or_an_api_key(client: TestClient) -> None:
    body = {"subject_key": "ann@example.com", "provider_user_id": "5"}
    assert client.post("/v1/identity/links/vcs", json=body, headers=PERSON).status_code == 403
    assert client.post("/v1/identity/links/vcs", json=body, headers={"x-api-key": API_KEY}).json()["subject_key"] == "ann@example.com"
    assert invalid(client.post("/v1/identity/links/vcs", json={"provider_user_id": "5"}, headers={"x-api-key": API_KEY}))[0][0] == ["body", "subject_key"]
    assert invalid(client.post("/v1/identity/links/vcs", json={}, headers=PERSON))[0][0] == ["body", "provider_user_id"]

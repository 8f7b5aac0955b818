"""The OpenAPI document states what the service answers: every status with its C3 body,
the id patterns it validates, and links that lead from one answer to the next call."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from workers.bootstrap import build

ID = r"^[A-Za-z0-9_-]{1,128}$(?!\n)"
ERROR = {"$ref": "#/components/schemas/ErrorBody"}
VALIDATION = {"$ref": "#/components/schemas/ValidationBody"}

# What each operation answers besides its success and 503 (C19, every operation); a command
# also 403 (another origin's page) and 429 (the rate limit), a body also 413 and 415.
EXPECTED = {
    ("get", "/healthz"): set(),
    ("get", "/readyz"): set(),
    ("get", "/v1/admin/studio/templates"): {401, 403, 409, 422},
    ("post", "/v1/admin/studio/runs"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("get", "/v1/admin/studio/runs/{run_id}"): {401, 403, 404, 409, 422},
    ("post", "/v1/admin/studio/runs/{run_id}/execute"): {401, 403, 404, 409, 422, 429},
    ("get", "/v1/admin/studio/runs/{run_id}/session-state"): {401, 403, 404, 409, 422},
    ("get", "/v1/admin/studio/runs/{run_id}/reports"): {401, 403, 404, 409, 422},
    ("get", "/v1/admin/studio/runs/{run_id}/handoff-trail"): {401, 403, 404, 409, 422},
    ("post", "/v1/admin/studio/runs/{run_id}/preview"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("post", "/v1/admin/studio/runs/{run_id}/cleanup"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("post", "/v1/admin/studio/runs/{run_id}/replay"): {401, 403, 404, 409, 422, 429},
    ("post", "/v1/admin/studio/runs/{run_id}/control"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("post", "/v1/project-factory/projects"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("get", "/control-plane/studio/live"): {401, 403, 404, 409, 422},
    ("get", "/control-plane/studio/observability-feed"): {401, 403, 404, 409, 422},
    ("get", "/control-plane/studio/runs"): {401, 403, 404, 409, 422},
    ("post", "/control-plane/studio/runs/{run_id}/control"): {401, 403, 404, 409, 413, 415, 422, 429},
    ("post", "/control-plane/studio/runs/{run_id}/sessions/{session_id}/control"): {401, 403, 404, 409, 413, 415, 422, 429},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    database = tmp_path_factory.mktemp("openapi") / "squadops.db"
    container = build(settings_for(f"sqlite:///{database}"))
    container.start(("projector",))
    with TestClient(create_app(container, workers=())) as client:
        client.headers.update(ADMIN)
        document = client.get("/openapi.json").json()
        yield client, document
    container.close()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_every_operation_documents_each_status_it_answers_with_its_body(
    served: tuple[TestClient, dict[str, Any]],
) -> None:
    _, document = served
    found = {(method, path): operation for method, path, operation in operations(document)}
    assert set(EXPECTED) <= set(found)
    for key, operation in found.items():
        responses = operation["responses"]
        errors = {int(status) for status in responses if int(status) >= 400}
        if key in EXPECTED:  # the studio and control-plane parts list exactly what they answer
            assert errors == EXPECTED[key] | {503}, key
        else:  # every other part documents at least unavailability
            assert 503 in errors, key
        for status in errors:
            schema = responses[str(status)]["content"]["application/json"]["schema"]
            assert schema == (VALIDATION if status == 422 else ERROR), (key, status)
        assert "Retry-After" in responses["503"]["headers"], key
    components = document["components"]["schemas"]
    assert components["ErrorBody"]["required"] == ["detail", "code"]
    item = components["ValidationBody"]["properties"]["detail"]["items"]
    assert item["required"] == ["loc", "msg", "type", "input", "ctx"]


def test_both_document_paths_serve_the_completed_document(served: tuple[TestClient, dict[str, Any]]) -> None:
    client, document = served
    assert client.get("/schema/openapi.json").json() == document


def test_ids_carry_the_pattern_the_service_validates(served: tuple[TestClient, dict[str, Any]]) -> None:
    _, document = served
    for method, path, operation in operations(document):
        for parameter in operation.get("parameters", []):
            if parameter["name"] in ("tenant_id", "X-Squadops-Tenant-Id", "run_id", "session_id", "project_slug"):
                assert parameter["schema"]["pattern"] == ID, (method, path, parameter["name"])
                assert "oneOf" not in parameter["schema"], (method, path, parameter["name"])  # never null
    # Python's $ also matches before a final newline: the published pattern refuses it too.
    assert re.search(ID, "run-1") and not re.search(ID, "run-1\n")


def test_an_id_with_a_trailing_newline_is_refused(served: tuple[TestClient, dict[str, Any]]) -> None:
    client, _ = served
    created = client.post("/v1/project-factory/projects", params={"tenant_id": "evil\n"}, json={"project_key": "nl"})
    assert created.status_code == 422 and created.json()["detail"][0]["loc"] == ["query", "tenant_id"]
    assert client.get("/v1/admin/studio/runs/run-1%0A").status_code == 422


# -- links ----------------------------------------------------------------------------------

# A valid body for each operation that takes one (links add what they carry).
BODIES: dict[str, dict[str, Any]] = {
    "V1AdminStudioRunsLaunchRun": {"template_id": "delivery-core", "project_slug": "acme"},
    "V1AdminStudioRunsRunIdPreviewSharePreview": {"url": "https://preview.example.com"},
    "V1AdminStudioRunsRunIdCleanupCleanupRun": {"reason": "done"},
    "ControlPlaneStudioRunsRunIdControlRun": {"verb": "verify_wave"},
    "V1AdminStudioRunsRunIdControlAdminControl": {"verb": "verify_wave"},
    "ControlPlaneStudioRunsRunIdSessionsSessionIdControlSession": {"verb": "nudge_agent"},
}


def pointer(value: Any, path: str) -> Any:
    for part in filter(None, path.split("/")):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def evaluate(expression: Any, request: dict[str, Any], response: Any) -> Any:
    """The runtime expressions the document uses ($response.body#, $request.body#, $request.path)."""
    if not isinstance(expression, str) or not expression.startswith("$"):
        return expression
    if expression.startswith("$response.body#"):
        return pointer(response, expression.removeprefix("$response.body#"))
    if expression.startswith("$request.body#"):
        return pointer(request["body"], expression.removeprefix("$request.body#"))
    if expression.startswith("$request.path."):
        return request["path"][expression.removeprefix("$request.path.")]
    raise AssertionError(f"unexpected expression {expression}")


def call(client: TestClient, document: dict[str, Any], operation_id: str, path_params: dict[str, str], query: dict[str, str], body: Any) -> Any:
    method, path, operation = next(op for op in operations(document) if op[2]["operationId"] == operation_id)
    url = path.format(**path_params)
    if "requestBody" in operation:
        return client.request(method.upper(), url, params=query, json=body)
    return client.request(method.upper(), url, params=query)


def follow(client: TestClient, document: dict[str, Any], operation_id: str, request: dict[str, Any], answer: Any) -> int:
    """Follows every link of ``operation_id``'s answer; each must reach a working call."""
    _, _, operation = next(op for op in operations(document) if op[2]["operationId"] == operation_id)
    success = next(s for s in operation["responses"] if s.startswith("2"))
    followed = 0
    links = operation["responses"][success].get("links", {})
    for name, link in sorted(links.items(), key=lambda item: item[0] == "CleanupRun"):  # ending the run last
        target = next(op for op in operations(document) if op[2]["operationId"] == link["operationId"])
        locations = {p["name"]: p["in"] for p in target[2].get("parameters", [])}
        path_params, query = {}, {}
        for parameter, expression in link.get("parameters", {}).items():
            value = evaluate(expression, request, answer)
            (path_params if locations[parameter] == "path" else query)[parameter] = value
        body = {**BODIES.get(link["operationId"], {}), **{k: evaluate(v, request, answer) for k, v in link.get("requestBody", {}).items()}}
        response = call(client, document, link["operationId"], path_params, query, body)
        assert response.status_code < 300, (operation_id, name, response.status_code, response.text[:300])
        followed += 1
    return followed


def test_every_link_leads_to_a_working_call(served: tuple[TestClient, dict[str, Any]]) -> None:
    client, document = served
    project = {"body": {**DEMO_LIKE}, "path": {}}
    created = client.post("/v1/project-factory/projects", json=project["body"])
    assert created.status_code == 201
    followed = follow(client, document, "V1ProjectFactoryProjectsCreateProject", project, created.json())

    def launched() -> tuple[dict[str, Any], Any]:
        request = {"body": {"template_id": "delivery-core", "project_slug": "acme"}, "path": {}}
        answer = client.post("/v1/admin/studio/runs", json=request["body"])
        assert answer.status_code == 201
        return request, answer.json()

    # Each source answer on a fresh run, so one link's effect (cleanup) cannot block another.
    sources = [op[2]["operationId"] for op in operations(document) if "{run_id}" in op[1] or op[2]["operationId"] == "V1AdminStudioRunsLaunchRun"]
    for source in sources:
        request, run = launched()
        if source == "V1AdminStudioRunsLaunchRun":
            followed += follow(client, document, source, request, run)
            continue
        run_id = run["run_id"]
        path = {"run_id": run_id}
        if "{session_id}" in next(op[1] for op in operations(document) if op[2]["operationId"] == source):
            path["session_id"] = client.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()["sessions"][0]["session_id"]
        body = BODIES.get(source, {})
        answer = call(client, document, source, path, {}, body)
        assert answer.status_code < 300, (source, answer.status_code, answer.text[:300])
        followed += follow(client, document, source, {"body": body, "path": path}, answer.json())
    assert followed >= 25

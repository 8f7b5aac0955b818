"""Hostile request bodies are refused with the C3 validation body, and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.body import MAX_BODY_DEPTH
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from workers.bootstrap import Container, build

JSON = {"content-type": "application/json"}

DEEP_ARRAY = b"[" * 1_000 + b"]" * 1_000
DEEP_OBJECT = b'{"a":' * 5_000 + b"1" + b"}" * 5_000
VERY_DEEP = b"[" * 200_000 + b"]" * 200_000
INVALID_UTF8 = b'{"template_id": "delivery-core", "project_slug": "acme", "work_scope": "\xff\xfe"}'
LONE_SURROGATE = b'{"verb": "nudge_agent", "message": "\xed\xa0\x80"}'
HOSTILE = {
    "1000 nested arrays": DEEP_ARRAY,
    "5000 nested objects": DEEP_OBJECT,
    "200000 nested arrays": VERY_DEEP,
    "invalid UTF-8": INVALID_UTF8,
    "UTF-8 surrogate": LONE_SURROGATE,
    "invalid UTF-8 outside strings": b'{"verb": \xff}',
    "truncated": b'{"verb": "nudge_agent"',
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Container, dict[str, str]]]:
    database = tmp_path_factory.mktemp("hostile") / "squadops.db"
    container = build(settings_for(f"sqlite:///{database}"))
    container.start(("projector",))  # no ticker: nothing appends but the requests
    with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as client:
        client.headers.update(ADMIN)
        assert client.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
        run = client.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        assert run.status_code == 201, run.text
        run_id = run.json()["run_id"]
        session_id = client.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()["sessions"][0]["session_id"]
        yield client, container, {"run_id": run_id, "session_id": session_id}
    container.close()


BODY_PATHS = [
    "/v1/admin/studio/runs",
    "/v1/project-factory/projects",
    "/control-plane/studio/runs/{run_id}/control",
    "/control-plane/studio/runs/{run_id}/sessions/{session_id}/control",
    "/v1/admin/studio/runs/{run_id}/control",
    "/v1/admin/studio/runs/{run_id}/preview",
    "/v1/admin/studio/runs/{run_id}/cleanup",
]


def assert_validation_body(answer: Any, where: str) -> None:
    assert answer.status_code == 422, f"{where}: {answer.status_code} {answer.text[:300]}"
    detail = answer.json()["detail"]
    assert isinstance(detail, list) and detail, where
    for item in detail:
        assert set(item) == {"loc", "msg", "type", "input", "ctx"}, where
        assert item["loc"] == ["body"] and item["type"] == "json_invalid", where


@pytest.mark.parametrize("path", BODY_PATHS)
def test_an_undecodable_body_is_a_422_and_appends_nothing(
    served: tuple[TestClient, Container, dict[str, str]], path: str
) -> None:
    client, container, ids = served
    url = path.format(**ids)
    before = container.event_store.max_position()
    for name, body in HOSTILE.items():
        assert_validation_body(client.post(url, content=body, headers=JSON), f"{url} with {name}")
    assert container.event_store.max_position() == before


def nested(depth: int) -> dict[str, Any]:
    """``depth`` objects, each inside the one before."""
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth - 1):
        value = {"next": value}
    return value


def test_project_metadata_may_nest_up_to_the_limit_and_no_deeper(
    served: tuple[TestClient, Container, dict[str, str]],
) -> None:
    client, container, _ = served
    # The body itself is one level; project_assembly adds the rest.
    at_limit = {"project_key": "deep", "project_assembly": nested(MAX_BODY_DEPTH - 1)}
    assert client.post("/v1/project-factory/projects", json=at_limit).status_code == 201

    before = container.event_store.max_position()
    too_deep = {"project_key": "deeper", "project_assembly": nested(MAX_BODY_DEPTH)}
    assert_validation_body(client.post("/v1/project-factory/projects", json=too_deep), "one level too deep")
    assert container.event_store.max_position() == before

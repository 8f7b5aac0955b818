"""Issue 22, findings 7 and 9: a page on another origin, and bodies sent to exhaust the
service. Each test is the attacker's request against the real HTTP app."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

import api.body
from api.app import create_app
from api.auth import sign_assertion
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from tests.live_helpers import served
from workers.bootstrap import Container, build
from workers.open_proxy import EdgeProxy, dev_claims

STUDIO = "/v1/admin/studio"
LAUNCH = {"template_id": "delivery-core", "project_slug": "acme"}
BASE_URL = "https://squadops.example"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestClient, Container]]:
    container = build(
        settings_for(
            f"sqlite:///{tmp_path / 'squadops.db'}",
            base_url=BASE_URL,
            allowed_origins=("https://console.example",),
        )
    )
    container.start(("projector",))
    with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as http:
        http.headers.update(ADMIN)
        assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
        yield http, container
    container.close()


def runs(http: TestClient) -> int:
    """The runs launched so far (the control plane's board reads its model at the position
    the last command answered)."""
    return len(http.get("/control-plane/studio/runs").json()["runs"])


def c3(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json() == {"detail": answer.json()["detail"], "code": code} and answer.json()["detail"]


def test_a_page_elsewhere_cannot_post_json_as_text_or_a_form(world: tuple[TestClient, Container]) -> None:
    http, container = world
    before, position = runs(http), container.event_store.max_position()
    # A cross-site <form> (or fetch with no preflight) can send these; the edge's cookie rides along.
    as_text = http.post(f"{STUDIO}/runs", content=b'{"template_id": "delivery-core", "project_slug": "acme"}',
                        headers={"content-type": "text/plain"})
    c3(as_text, 415, "unsupported_media_type")
    as_form = http.post(f"{STUDIO}/runs", content=b"template_id=delivery-core&project_slug=acme",
                        headers={"content-type": "application/x-www-form-urlencoded"})
    c3(as_form, 415, "unsupported_media_type")
    c3(http.post(f"{STUDIO}/runs", content=b'{"template_id": "delivery-core"}'), 415, "unsupported_media_type")
    assert container.event_store.max_position() == position and runs(http) == before
    # The same command as JSON, from no browser page (no Origin): the service's own clients.
    assert http.post(f"{STUDIO}/runs", json=LAUNCH).status_code == 201
    assert http.post(f"{STUDIO}/runs", json=LAUNCH, headers={"content-type": "application/json; charset=utf-8"}).status_code == 201


def test_a_page_elsewhere_cannot_send_commands(world: tuple[TestClient, Container]) -> None:
    http, container = world
    before, position = runs(http), container.event_store.max_position()
    for origin in ("http://evil.example", "null", "https://squadops.example.evil.example", "http://squadops.example"):
        c3(http.post(f"{STUDIO}/runs", json=LAUNCH, headers={"origin": origin}), 403, "origin_not_allowed")
    c3(http.delete("/v1/project-factory/projects/acme/participants/x@example.com", headers={"origin": "http://evil.example"}),
       403, "origin_not_allowed")
    assert container.event_store.max_position() == position and runs(http) == before
    # Reads stay readable (CORS keeps their answers from other pages), and the service's
    # own pages and the allowed origins send commands.
    assert http.get("/control-plane/studio/runs", headers={"origin": "http://evil.example"}).status_code == 200
    assert http.post(f"{STUDIO}/runs", json=LAUNCH, headers={"origin": BASE_URL}).status_code == 201
    assert http.post(f"{STUDIO}/runs", json=LAUNCH, headers={"origin": "https://console.example"}).status_code == 201
    assert runs(http) == before + 2


def test_squadops_open_forwards_only_its_own_pages_requests(tmp_path: Path) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}")
    with served(settings, workers=("projector",)) as server:
        httpx.post(f"{server.url}/v1/project-factory/projects", json=DEMO_LIKE, headers=ADMIN, timeout=30).raise_for_status()
        proxy = EdgeProxy(server.url, dev_claims("dev@example.com", "/org/platform/roles/super_admin"))
        transport = httpx.ASGITransport(app=proxy)

        async def attempts() -> list[httpx.Response]:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
                return [
                    # A page on another origin launching a run as the proxy's super_admin.
                    await client.post(f"{STUDIO}/runs", json=LAUNCH, headers={"origin": "http://evil.example"}),
                    await client.post(f"{STUDIO}/runs", json=LAUNCH, headers={"sec-fetch-site": "cross-site"}),
                    # A DNS-rebound name pointing at the proxy: "same origin" to the browser.
                    await client.post(f"{STUDIO}/runs", json=LAUNCH,
                                      headers={"host": "evil.example:8080", "origin": "http://evil.example:8080"}),
                    await client.get(f"{STUDIO}/runs", headers={"host": "evil.example:8080"}),
                    # The proxy's own page.
                    await client.post(f"{STUDIO}/runs", json=LAUNCH,
                                      headers={"origin": "http://127.0.0.1:8080", "sec-fetch-site": "same-origin"}),
                ]

        *refused, own = asyncio.run(attempts())
        for answer in refused:
            c3(answer, 403, "origin_not_allowed")
        assert own.status_code == 201, own.text
        listed = httpx.get(f"{server.url}/control-plane/studio/runs", headers=ADMIN, timeout=30)
        assert [r["run_id"] for r in listed.json()["runs"]] == [own.json()["run_id"]]


def test_the_copilot_refuses_a_large_payload_and_stores_nothing(world: tuple[TestClient, Container]) -> None:
    http, container = world
    before = container.event_store.max_position()
    huge = {"action_id": "explain_page", "payload": {"blob": "x" * (100 << 10)}}
    c3(http.post("/v1/portal/copilot/actions", json=huge), 413, "body_too_large")
    c3(http.post(f"{STUDIO}/runs", content=b"[" + b"0," * (600 << 10) + b"0]",
                 headers={"content-type": "application/json"}), 413, "body_too_large")
    assert container.event_store.max_position() == before
    small = http.post("/v1/portal/copilot/actions", json={"action_id": "explain_page", "payload": {"note": "x" * 1000}})
    assert small.status_code == 200, small.text


def test_large_bodies_neither_stall_the_service_nor_decode_on_its_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_on: list[str] = []
    decode = api.body.decode_checked

    def observed(raw: bytes, handler: Any, decoders: Any = None) -> Any:
        decoded_on.append(threading.current_thread().name)
        return decode(raw, handler, decoders)

    monkeypatch.setattr(api.body, "decode_checked", observed)
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}")
    with served(settings, workers=("projector",)) as server:
        big = b'{"template_id": "delivery-core", "project_slug": "acme", "work_scope": "' + b"x" * (9_700_000) + b'"}'
        near = b'{"template_id": "delivery-core", "project_slug": "nope", "work_scope": "' + b"x" * (900_000) + b'"}'

        async def flood() -> tuple[list[int], list[float], int]:
            async with httpx.AsyncClient(base_url=server.url, headers={**ADMIN, "content-type": "application/json"},
                                         timeout=60) as client:
                posts = [asyncio.create_task(client.post(f"{STUDIO}/runs", content=big)) for _ in range(8)]
                waits = []
                for _ in range(5):
                    started = time.monotonic()
                    assert (await client.get("/healthz")).status_code == 200
                    waits.append(time.monotonic() - started)
                statuses = [(await p).status_code for p in posts]
                decoded = await client.post(f"{STUDIO}/runs", content=near)
                return statuses, waits, decoded.status_code

        statuses, waits, decoded = asyncio.run(flood())
    assert statuses == [413] * 8
    assert max(waits) < 2.0, waits
    assert decoded == 422  # decoded and checked against its type (work_scope too long), in a worker thread
    assert decoded_on and all(name != "uvicorn" for name in decoded_on), decoded_on


def test_one_principal_cannot_flood_commands_nor_spend_anothers(tmp_path: Path) -> None:
    key = "edge-test-key-0123456789abcdef-0123456789"
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}", edge_jwt_key=key, rate_limit_per_minute=4)
    container = build(settings)

    def who(email: str, groups: str = "") -> dict[str, str]:
        claims = {"email": email, "groups": [groups] if groups else [], "exp": int(time.time()) + 600}
        headers = {"x-edge-claim-email": email, "x-edge-jwt-assertion": sign_assertion(claims, key)}
        return {**headers, "x-edge-claim-groups": groups} if groups else headers

    victim = who("victim@example.com", "/org/platform/roles/super_admin")
    try:
        with TestClient(create_app(container, workers=()), raise_server_exceptions=False) as http:
            # Someone naming the victim without the victim's assertion: refused, and not counted.
            for _ in range(10):
                forged = http.post(f"{STUDIO}/runs", json=LAUNCH, headers={"x-edge-claim-email": "victim@example.com"})
                assert forged.status_code == 401
            answers = [http.post(f"{STUDIO}/runs", json=LAUNCH, headers=victim).status_code for _ in range(4)]
            assert 429 not in answers, answers
            flooded = http.post(f"{STUDIO}/runs", json=LAUNCH, headers=victim)
            c3(flooded, 429, "rate_limited")
            assert 1 <= int(flooded.headers["retry-after"]) <= 15
            # Reads are not commands; another principal has its own minute.
            assert http.get("/healthz").status_code == 200
            other = http.post(f"{STUDIO}/runs", json=LAUNCH, headers=who("other@example.com"))
            assert other.status_code != 429
    finally:
        container.close()

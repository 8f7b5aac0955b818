"""The pages over HTTP: identity and read rights exactly as the API's, errors as pages with
the C3 code, the office drawn from the feed, static modules served with their types; and
``squadops open``'s proxy, which replaces whatever edge claims a browser sends."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from api.web.office_view import fnv1a
from api.web.verbs import RUN_ORDER, SESSION_ORDER, USES
from domain.studio.control import RUN_VERBS, SESSION_VERBS
from tests.conftest import ADMIN, admin_api, settings_for
from tests.helpers import DEMO_LIKE, eventually
from tests.live_helpers import served
from workers.open_proxy import EdgeProxy, dev_claims

STUDIO = "/v1/admin/studio"
STRANGER = {"x-edge-claim-email": "stranger@example.com", "x-edge-claim-groups": ""}


@pytest.fixture
def http(sqlite_url: str) -> Iterator[TestClient]:
    with admin_api(sqlite_url) as (client, _):
        yield client


def launched(http: TestClient) -> str:
    assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    eventually(lambda: http.get(f"/runs/{run_id}").status_code == 200)
    return run_id


def config_of(html: str) -> dict[str, Any]:
    import json

    found = re.search(r'<script type="application/json" id="page-config">(.*?)</script>', html, re.S)
    assert found
    return json.loads(found.group(1))


def test_pages_need_the_edge_identity_and_say_how_to_get_it(http: TestClient) -> None:
    for path in ("/", "/portal", "/runs/run-x"):
        answer = http.get(path, headers={"x-edge-claim-email": ""})
        assert answer.status_code == 401 and answer.headers["content-type"].startswith("text/html")
        assert "unauthenticated" in answer.text and "squadops open" in answer.text
    board = http.get("/")
    assert board.status_code == 200 and "Operator@Example.com" in board.text
    assert "default-src 'self'" in board.headers["content-security-policy"]
    assert config_of(board.text)["subject_key"] == "operator@example.com"


def test_the_office_is_read_like_the_feed(http: TestClient) -> None:
    run_id = launched(http)
    office = http.get(f"/runs/{run_id}")
    assert office.status_code == 200
    config = config_of(office.text)
    assert config["run_id"] == run_id and config["project_slug"] == "acme" and config["may_control"] is True
    assert config["topic"] == f"portal_live_events:tenant:default:run:{run_id}"
    # The intake pair is drawn with the page, each with its id, state and a text alternative.
    for agent in ("planner", "curator"):
        assert re.search(rf'data-agent-id="{agent}"[^>]*data-pixel-state="idle"[^>]*aria-label="[^"]*: idle', office.text)
    assert 'id="initial-data"' in office.text

    stranger = http.get(f"/runs/{run_id}", headers=STRANGER)
    assert stranger.status_code == 403 and "not_a_participant" in stranger.text
    assert http.get("/runs/run-nope").status_code == 404
    assert "run_not_found" in http.get("/runs/run-nope").text
    invalid = http.get("/runs/bad%20id")
    assert invalid.status_code == 422 and "request_invalid" in invalid.text
    # A page's markup never carries text unescaped.
    evil = http.get("/", headers={**ADMIN, "x-edge-claim-email": "<script>x</script>@example.com"})
    assert "<script>x</script>" not in evil.text and "&lt;script&gt;" in evil.text


def test_the_office_feed_is_the_feed_with_what_its_agents_show(http: TestClient) -> None:
    run_id = launched(http)
    query = {"project_slug": "acme", "run_id": run_id}
    feed = http.get("/control-plane/studio/observability-feed", params=query).json()
    answer = http.get("/office-feed", params=query)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    office = answer.json()
    views = office.pop("agent_views")
    assert office == feed  # the feed, as the API answers it
    assert [v["agent_id"] for v in views] == [a["agent_id"] for a in feed["pixel_agents"]]
    # What the page's first paint printed is what the script is handed after it.
    page = http.get(f"/runs/{run_id}").text
    for view in views:
        assert f'data-agent-id="{view["agent_id"]}"' in page and f'aria-label="{view["label"]}"' in page
    # As of a past position, and refused, as the feed is: the API's C3 bodies (never a page).
    for params, headers, status in (
        ({**query, "as_of_event": min(int(e["event_id"]) for e in feed["live_events"])}, {}, 200),
        ({**query, "run_id": "run-nope"}, {}, 404),
        ({**query, "run_id": "bad id"}, {}, 422),
        ({**query, "as_of_event": 10**9}, {}, 409),
        (query, STRANGER, 403),
    ):
        api = http.get("/control-plane/studio/observability-feed", params=params, headers=headers)
        answer = http.get("/office-feed", params=params, headers=headers)
        assert api.status_code == answer.status_code == status, answer.text
        assert answer.headers.get("x-squadops-as-of-event") == api.headers.get("x-squadops-as-of-event")
        body = answer.json()
        if status == 200:
            assert [v["agent_id"] for v in body.pop("agent_views")] == [a["agent_id"] for a in body["pixel_agents"]]
        assert body == api.json()


def test_static_modules_are_served_with_types_and_validators(http: TestClient) -> None:
    module = http.get("/static/js/office.js")
    assert module.status_code == 200 and module.headers["content-type"].startswith("text/javascript")
    assert http.get("/static/js/office.js", headers={"if-none-match": module.headers["etag"]}).status_code == 304
    assert http.get("/static/css/office.css").headers["content-type"].startswith("text/css")
    for path in ("/static/../controller.py", "/static/js/nope.js", "/static/%2e%2e/pages.py"):
        assert http.get(path).status_code == 404
    # Every module a page preloads exists.
    office = http.get("/")
    for href in re.findall(r'rel="modulepreload" href="([^"]+)"', office.text):
        assert http.get(href).status_code == 200, href


def test_the_page_offers_every_verb_of_the_domain_once_at_its_level() -> None:
    assert sorted(SESSION_ORDER) == sorted(SESSION_VERBS) and len(set(SESSION_ORDER)) == len(SESSION_ORDER)
    assert sorted(RUN_ORDER) == sorted(RUN_VERBS) and len(set(RUN_ORDER)) == len(RUN_ORDER)
    assert set(USES) == SESSION_VERBS | RUN_VERBS


def test_the_sprite_hash_is_fnv1a() -> None:
    # Published FNV-1a 32-bit vectors (ASCII: UTF-16 code units equal the bytes).
    assert fnv1a("") == 0x811C9DC5 and fnv1a("a") == 0xE40C292C and fnv1a("foobar") == 0xBF9CF968


def test_squadops_open_replaces_the_claims_a_browser_sends(tmp_path: Path) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}")
    with served(settings, workers=("projector",)) as server:
        proxy = EdgeProxy(server.url, dev_claims("dev@example.com", "/org/platform/roles/super_admin"))
        transport = httpx.ASGITransport(app=proxy)

        async def ask() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
                spoofed = await client.get("/", headers={"x-edge-claim-email": "ceo@example.com"})
                board = await client.get("/control-plane/studio/runs")
                return spoofed, board

        import asyncio

        spoofed, board = asyncio.run(ask())
        assert spoofed.status_code == 200 and "dev@example.com" in spoofed.text and "ceo@example.com" not in spoofed.text
        assert board.status_code == 200 and board.json()["runs"] == []


def test_the_dev_identity_goes_to_its_own_origin_only(tmp_path: Path) -> None:
    """Another site open in the same browser (a form, a fetch, a link, a DNS-rebinding
    page) gets nothing through the proxy: it refuses the request (403), so no claims."""
    settings = settings_for(f"sqlite:///{tmp_path / 'squadops.db'}")
    with served(settings, workers=("projector",)) as server:
        proxy = EdgeProxy(server.url, dev_claims("dev@example.com", "/org/platform/roles/super_admin"))
        transport = httpx.ASGITransport(app=proxy)
        own = {"origin": "http://127.0.0.1:8080", "sec-fetch-site": "same-origin"}
        others = [
            {"origin": "http://evil.example"},
            {"origin": "http://127.0.0.1:9999"},
            {"origin": "null"},
            {"sec-fetch-site": "cross-site"},
            {"sec-fetch-site": "same-site"},
            {"host": "evil.example:8080"},
            {"host": "evil.example:8080", "origin": "http://evil.example:8080", "sec-fetch-site": "same-origin"},
        ]

        async def ask() -> list[tuple[dict[str, str], int, int]]:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
                found = []
                for headers in [own, {"sec-fetch-site": "none"}, {"host": "localhost:8080"}, *others]:
                    page = await client.get("/", headers=headers)
                    launch = await client.post(
                        "/v1/project-factory/projects", json={"project_key": "p"}, headers=headers
                    )
                    found.append((headers, page.status_code, launch.status_code))
                return found

        import asyncio

        answers = asyncio.run(ask())
        assert [a[1] for a in answers[:3]] == [200, 200, 200]
        assert answers[0][2] == 201  # the page's own request acts as the dev identity
        assert [(h, page, post) for h, page, post in answers[3:] if (page, post) != (403, 403)] == []

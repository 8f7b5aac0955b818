"""The live channel over HTTP: SSE and WebSocket subscribers on a real server, with
JetStream and with the embedded broker; resume without gap or duplicate; C1/C2/C3."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE, eventually
from tests.live_helpers import (
    LIVE,
    STUDIO,
    LiveServer,
    SseEvent,
    append_marker,
    bulk_previews,
    expected_events,
    live_settings,
    served,
    sse_events,
    stream_contents,
    topic,
    until_marker,
    wait_published,
)

pytestmark = pytest.mark.nats


async def launch(http: httpx.AsyncClient, body: dict[str, Any] | None = None) -> str:
    answer = await http.post("/v1/project-factory/projects", json=body or DEMO_LIKE)
    assert answer.status_code == 201, answer.text
    answer = await http.post(
        f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": answer.json()["project_slug"]}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["run_id"]


async def collect_sse(
    http: httpx.AsyncClient,
    run_id: str,
    *,
    last_event_id: str | None = None,
    limit: int = 1_000_000,
    subscribed: asyncio.Event | None = None,
    into: list[SseEvent] | None = None,
) -> list[SseEvent]:
    """Events as they come (into ``into``); after ``limit`` of them the client disconnects."""
    got: list[SseEvent] = [] if into is None else into
    async for event in sse_events(http, topic(run_id), last_event_id=last_event_id, subscribed=subscribed):
        got.append(event)
        if len(got) >= limit:
            break
    return got


def ws_url(server: LiveServer, run_id: str, **query: str) -> str:
    return f"ws://127.0.0.1:{server.port}{LIVE}/ws?" + urlencode({"topic": topic(run_id), **query})


async def collect_ws(
    url: str, *, limit: int = 1_000_000, into: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = [] if into is None else into
    async with ws_connect(url, additional_headers=ADMIN, max_queue=None) as socket:
        async for text in socket:
            got.append(json.loads(text))
            if len(got) >= limit:
                break
    return got


async def until_complete(server: LiveServer, run_id: str, *collected: list[Any], after: int = 0) -> list[dict[str, Any]]:
    """The run's events (after ``after``), once every collector received a marker event
    appended after them: a duplicate of any of them would have arrived before it."""
    await asyncio.to_thread(wait_published, server.container)
    expected = [x for x in expected_events(server.container, run_id) if int(x["event_id"]) > after]
    marker = await asyncio.to_thread(append_marker, server.container, run_id)
    await until_marker(marker, *collected)
    return expected


def stop(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()


async def end_run(http: httpx.AsyncClient, run_id: str) -> None:
    answer = await http.post(f"{STUDIO}/runs/{run_id}/cleanup", json={"reason": "test over"})
    assert answer.status_code in (200, 409), answer.text  # 409: it completed on its own


async def wait_for_events(events: list[Any], count: int, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if len(events) >= count:
            return
        await asyncio.sleep(0.02)  # the poll interval of this bounded wait
    raise AssertionError(f"only {len(events)} events arrived")


async def test_sse_and_websocket_subscribers_get_every_event_once_in_order(database_url: str, nats_url: str) -> None:
    with served(live_settings(database_url, nats_url)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)
            subscribed = asyncio.Event()
            sse_events_: list[SseEvent] = []
            ws_items: list[dict[str, Any]] = []
            sse = asyncio.create_task(collect_sse(http, run_id, last_event_id="0", subscribed=subscribed, into=sse_events_))
            ws = asyncio.create_task(collect_ws(ws_url(server, run_id, last_event_id="0"), into=ws_items))
            await asyncio.wait_for(subscribed.wait(), 10)
            # Control verbs while the run is still idle (a session that ended would refuse them).
            plane = f"/control-plane/studio/runs/{run_id}"
            state = (await http.get(f"{STUDIO}/runs/{run_id}/session-state")).json()
            curator = next(x["session_id"] for x in state["sessions"] if x["agent_id"] == "curator")
            verb = await http.post(f"{plane}/sessions/{curator}/control", json={"verb": "comment_agent", "message": "hi"})
            assert verb.status_code == 202, verb.text
            wave = await http.post(f"{plane}/control", json={"verb": "verify_wave"})
            assert wave.status_code == 202, wave.text
            assert (await http.post(f"{STUDIO}/runs/{run_id}/execute")).status_code == 202
            assert (await http.post(f"{STUDIO}/runs/{run_id}/preview", json={"url": "https://p.example"})).status_code == 200
            await asyncio.sleep(0.5)  # pacing: the run ticks (agents join) before it is ended
            await end_run(http, run_id)
            expected = await until_complete(server, run_id, sse_events_, ws_items)
            stop(sse, ws)

        assert len(expected) > 10
        assert [e.json() for e in sse_events_] == expected
        assert [(e.id, e.event) for e in sse_events_] == [(x["event_id"], x["event_kind"]) for x in expected]
        assert ws_items == expected
        kinds = {x["event_name"] for x in expected}
        assert {"launched", "execution_requested", "preview_shared", "opened", "control_recorded"} <= kinds


async def test_a_resumed_sse_client_misses_nothing_and_sees_nothing_twice(sqlite_url: str, nats_url: str) -> None:
    with served(live_settings(sqlite_url, nats_url)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)
            assert (await http.post(f"{STUDIO}/runs/{run_id}/execute")).status_code == 202
            first = await collect_sse(http, run_id, last_event_id="0", limit=8)
            await asyncio.sleep(0.4)  # the run goes on while the client is away
            second = await collect_sse(http, run_id, last_event_id=first[-1].id, limit=6)
            # The WebSocket resumes the same way (query parameter).
            third = await collect_ws(ws_url(server, run_id, last_event_id=second[-1].id), limit=5)
            await asyncio.sleep(0.2)  # pacing: the run goes on while no client is connected
            await end_run(http, run_id)
            rest: list[SseEvent] = []
            task = asyncio.create_task(collect_sse(http, run_id, last_event_id=third[-1]["event_id"], into=rest))
            every = expected_events(server.container, run_id)  # the run's, before the marker
            expected = await until_complete(server, run_id, rest, after=int(third[-1]["event_id"]))
            stop(task)

        ids = [e.id for e in first + second] + [x["event_id"] for x in third] + [e.id for e in rest]
        assert ids == [x["event_id"] for x in every]
        assert [e.id for e in rest] == [x["event_id"] for x in expected]


async def test_resume_reads_from_the_event_store_what_jetstream_no_longer_holds(sqlite_url: str, nats_url: str) -> None:
    settings = live_settings(sqlite_url, nats_url, live_stream_max_bytes=4096)
    with served(settings) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)
            await asyncio.to_thread(bulk_previews, server.container, run_id, 60)
            await asyncio.to_thread(wait_published, server.container)
            held = await stream_contents(nats_url, settings.live_stream_name)
            expected = expected_events(server.container, run_id)
            assert 0 < len(held) < len(expected) / 2  # the stream dropped the older ones

            for after in ("0", expected[10]["event_id"]):
                subscribed = asyncio.Event()
                got: list[SseEvent] = []
                task = asyncio.create_task(collect_sse(http, run_id, last_event_id=after, subscribed=subscribed, into=got))
                await asyncio.wait_for(subscribed.wait(), 10)
                # Then live: a new event arrives after the replayed ones.
                answer = await http.post(f"{STUDIO}/runs/{run_id}/preview", json={"url": f"https://{after}.example"})
                assert answer.status_code == 200
                want = await until_complete(server, run_id, got, after=int(after))
                stop(task)
                assert [e.json() for e in got] == want
                assert got[-1].json()["event_name"] == "preview_shared"


async def test_the_embedded_broker_streams_and_replays_beyond_its_buffer(sqlite_url: str) -> None:
    settings = live_settings(sqlite_url, live_memory_buffer_events=5)
    assert not settings.nats_url
    with served(settings) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)
            await asyncio.to_thread(bulk_previews, server.container, run_id, 30)
            await asyncio.to_thread(wait_published, server.container)
            subscribed, live_subscribed = asyncio.Event(), asyncio.Event()
            got: list[SseEvent] = []
            live: list[SseEvent] = []
            task = asyncio.create_task(collect_sse(http, run_id, last_event_id="3", subscribed=subscribed, into=got))
            live_only = asyncio.create_task(collect_sse(http, run_id, subscribed=live_subscribed, into=live))
            await asyncio.wait_for(asyncio.gather(subscribed.wait(), live_subscribed.wait()), 10)
            assert (await http.post(f"{STUDIO}/runs/{run_id}/execute")).status_code == 202
            await asyncio.sleep(0.3)  # pacing: the run ticks (agents join) before it is ended
            await end_run(http, run_id)
            every = expected_events(server.container, run_id)  # the run's, before the marker
            expected = await until_complete(server, run_id, got, live, after=3)
            stop(task, live_only)

        assert [e.json() for e in got] == expected
        expected = every
        # The live-only subscriber saw a suffix: everything after it subscribed, nothing before.
        assert [e.json() for e in live] == expected[len(expected) - len(live):]
        assert live[0].json()["event_name"] == "execution_requested"


async def test_heartbeat_comments_keep_an_idle_stream_open(sqlite_url: str) -> None:
    with served(live_settings(sqlite_url, live_heartbeat_seconds=0.2)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)
            chunks: list[bytes] = []

            async def read() -> None:
                async with http.stream("GET", LIVE, params={"topic": topic(run_id)}) as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    async for chunk in response.aiter_raw():
                        chunks.append(chunk)

            started = time.monotonic()
            reader = asyncio.create_task(read())
            await asyncio.to_thread(eventually, lambda: b"".join(chunks).count(b": heartbeat\n\n") >= 3, 10, 0.01)
            took = time.monotonic() - started
            reader.cancel()
        text = b"".join(chunks).decode()
        assert text.startswith("retry: 2000\n: subscribed\n\n")
        # Three heartbeats 0.2 s apart: no sooner than two intervals, and not long after.
        assert 0.4 <= took < 5, took


# -- who may subscribe (C1, C2, C3) ---------------------------------------------------------


def test_subscribing_needs_a_principal_a_participant_a_wellformed_topic_and_a_known_run(sqlite_url: str) -> None:
    body = {**DEMO_LIKE, "participants": [{"subject_key": "dev@example.com", "project_role": "viewer"}]}
    with served(live_settings(sqlite_url)) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/v1/project-factory/projects", json=body, headers=ADMIN).raise_for_status()
        answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"}, headers=ADMIN)
        run_id = answer.json()["run_id"]
        good = {"topic": topic(run_id)}
        stranger = {"x-edge-claim-email": "someone@example.com"}
        participant = {"x-edge-claim-email": "Dev@Example.com"}

        def get(params: dict[str, str], headers: dict[str, str]) -> httpx.Response:
            return http.get(LIVE, params=params, headers=headers)

        answer = get(good, {})
        assert answer.status_code == 401 and answer.json()["code"] == "unauthenticated"
        answer = get(good, stranger)
        assert answer.status_code == 403 and answer.json()["code"] == "not_a_participant"
        with http.stream("GET", LIVE, params=good, headers=participant) as ok:
            assert ok.status_code == 200
        with http.stream("GET", LIVE, params=good, headers={"x-edge-claim-email": "root@example.com", **ADMIN}) as ok:
            assert ok.status_code == 200

        answer = get({"topic": f"portal_live_events:tenant:default:run:{run_id}:x"}, ADMIN)
        assert answer.status_code == 422
        (item,) = answer.json()["detail"]
        assert item["loc"] == ["query", "topic"] and item["type"] == "string_pattern_mismatch"
        assert item["msg"] and item["input"].endswith(":x") and item["ctx"] == {}
        answer = get({}, ADMIN)
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "topic"]

        answer = get({"topic": topic(run_id, tenant="other")}, ADMIN)
        assert answer.status_code == 403 and answer.json()["code"] == "tenant_mismatch"
        answer = get({"topic": topic(run_id, tenant="other")}, {**ADMIN, "X-Squadops-Tenant-Id": "other"})
        assert answer.status_code == 404 and answer.json()["code"] == "run_not_found"
        answer = get({"topic": topic("run-nope")}, ADMIN)
        assert answer.status_code == 404 and answer.json()["code"] == "run_not_found"

        answer = get(good, {**ADMIN, "Last-Event-ID": "abc"})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["header", "Last-Event-ID"]
        answer = get({**good, "last_event_id": "-1"}, ADMIN)
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "last_event_id"]


async def test_websocket_refusals_carry_the_http_status_and_body(sqlite_url: str) -> None:
    with served(live_settings(sqlite_url)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            run_id = await launch(http)

        async def refused(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
            async with ws_connect(url, additional_headers=headers) as socket:
                body = msgspec.json.decode(await socket.recv())
                with pytest.raises(ConnectionClosed) as closed:
                    await socket.recv()
            assert closed.value.rcvd is not None
            return closed.value.rcvd.code, body

        code, body = await refused(ws_url(server, run_id), {})
        assert code == 4401 and body["code"] == "unauthenticated"
        code, body = await refused(ws_url(server, run_id), {"x-edge-claim-email": "someone@example.com"})
        assert code == 4403 and body["code"] == "not_a_participant"
        code, body = await refused(ws_url(server, "run-nope"), ADMIN)
        assert code == 4404 and body["code"] == "run_not_found"
        bad = f"ws://127.0.0.1:{server.port}{LIVE}/ws?topic=nope"
        code, body = await refused(bad, ADMIN)
        assert code == 4422 and body["detail"][0]["loc"] == ["query", "topic"]

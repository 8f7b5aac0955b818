"""A thousand SSE subscribers on one topic against a real server process (loopback only):
all stay connected and every one receives every event of the run, once, in order."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE
from tests.live_helpers import (
    STUDIO,
    SseEvent,
    delete_stream,
    expected_events,
    live_settings,
    served_process,
    sse_events,
    topic,
)
from workers.bootstrap import Container, build
from workers.settings import Settings

pytestmark = pytest.mark.nats

SUBSCRIBERS = 1000


@pytest.fixture
def server(pg_url: str, nats_url: str) -> Iterator[tuple[str, Settings]]:
    settings = live_settings(pg_url, nats_url, tick_seconds=0.02)
    try:
        with served_process(settings, tick_seconds=0.02) as url:
            yield url, settings
    finally:
        delete_stream(settings.nats_url, settings.live_stream_name)


async def test_a_thousand_subscribers_stay_connected_and_each_gets_every_event(server: tuple[str, Settings]) -> None:
    url, settings = server
    limits = httpx.Limits(max_connections=SUBSCRIBERS + 50, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=url, headers=ADMIN, timeout=60, limits=limits) as http:
        created = await http.post("/v1/project-factory/projects", json=DEMO_LIKE)
        assert created.status_code == 201, created.text
        answer = await http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        run_id = answer.json()["run_id"]

        reader: Container = await asyncio.to_thread(build, settings)  # reads the same log
        launched = {x["event_id"] for x in expected_events(reader, run_id)}  # the run is idle

        # Half resume from the start (replayed from JetStream), half subscribe live only.
        received: list[list[SseEvent]] = [[] for _ in range(SUBSCRIBERS)]
        subscribed = [asyncio.Event() for _ in range(SUBSCRIBERS)]

        async def subscriber(n: int) -> None:
            after = "0" if n % 2 == 0 else None
            async for event in sse_events(http, topic(run_id), last_event_id=after, subscribed=subscribed[n]):
                received[n].append(event)

        tasks = [asyncio.create_task(subscriber(n)) for n in range(SUBSCRIBERS)]
        await asyncio.wait_for(asyncio.gather(*(s.wait() for s in subscribed)), 45)

        assert (await http.post(f"{STUDIO}/runs/{run_id}/execute")).status_code == 202
        await asyncio.sleep(1.0)  # pacing: the run ticks (agents join) before it is ended
        cleaned = await http.post(f"{STUDIO}/runs/{run_id}/cleanup", json={"reason": "load test over"})
        assert cleaned.status_code in (200, 409)

        try:
            every = [x["event_id"] for x in expected_events(reader, run_id)]
        finally:
            reader.close()
        after_subscribing = [e for e in every if e not in launched]
        assert launched and len(after_subscribing) > 20
        wanted = [every if n % 2 == 0 else after_subscribing for n in range(SUBSCRIBERS)]
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and any(len(r) < len(w) for r, w in zip(received, wanted, strict=True)):
            await asyncio.sleep(0.1)  # the poll interval of this bounded wait (45 s)

        failed = [t for t in tasks if t.done()]
        assert not failed, failed[0].exception()  # every subscriber is still connected
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    complete = sum(1 for r, w in zip(received, wanted, strict=True) if [e.id for e in r] == w)
    lengths = Counter(len(r) for r in received)
    assert complete == SUBSCRIBERS, f"{complete} complete; received counts {lengths}, wanted {len(every)} / {len(after_subscribing)}"

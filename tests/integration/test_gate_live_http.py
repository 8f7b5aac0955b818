"""An operator's open office sees the gate publish its run: over a real server, the run's
SSE topic carries every gate step as it happens (event id = log position, in order, once),
a client resuming with Last-Event-ID past the broker's buffer gets them from the log, and
the feed read after the last one shows the pull request delivered with its gate lines."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from domain.gate.thread import thread_key_id
from projections.engine.runner import NotificationSource
from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE
from tests.live_helpers import (
    SseEvent,
    append_marker,
    live_settings,
    served,
    sse_events,
    topic,
    until_marker,
    wait_published,
)

GATE = "/v1/admin/gate"
STEPS = 11  # started, planned, committed, pull request, 3 check runs, comment, evidence, promotion, completed


async def collect(http: httpx.AsyncClient, run_id: str, into: list[SseEvent], subscribed: asyncio.Event,
                  last_event_id: str | None = None) -> None:
    async for event in sse_events(http, topic(run_id), last_event_id=last_event_id, subscribed=subscribed):
        into.append(event)


async def until(events: list[SseEvent], count: int) -> None:
    for _ in range(1500):
        if sum(e.event == "gate" for e in events) >= count:
            return
        await asyncio.sleep(0.02)  # the poll interval of this bounded wait (30 s)
    raise AssertionError(f"only {len(events)} events arrived")


async def test_gate_steps_stream_to_the_runs_office_and_resume_from_the_log(sqlite_url: str, tmp_path: Path) -> None:
    settings = live_settings(sqlite_url, live_memory_buffer_events=3, data_dir=str(tmp_path))
    with served(settings) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=30) as http:
            assert (await http.post("/v1/project-factory/projects", json=DEMO_LIKE)).status_code == 201
            launched = await http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
            run_id, launched_at = launched.json()["run_id"], launched.headers["X-Squadops-Position"]
            await asyncio.to_thread(wait_published, server.container)
            got: list[SseEvent] = []
            subscribed = asyncio.Event()
            reader = asyncio.create_task(collect(http, run_id, got, subscribed))
            await asyncio.wait_for(subscribed.wait(), 10)

            answer = await http.post(f"{GATE}/threads/{run_id}/run", json={"agent_key": "backend"})
            assert answer.status_code == 200, answer.text
            await until(got, STEPS)
            # A later event of the run reaches the client: a duplicate would have shown before it.
            await until_marker(await asyncio.to_thread(append_marker, server.container, run_id), got)
            reader.cancel()

            envs = NotificationSource(server.container.event_store).read(1, 100_000)
            steps = [e.position for e in envs if e.originator_id == thread_key_id("default", run_id) and e.kind != "GateThread.Opened"]
            assert [int(e.id) for e in got] == steps  # nothing but the gate happened since
            assert [e.json()["event_id"] for e in got] == [e.id for e in got]
            assert got[3].json()["event_name"] == "pull_request_published" and answer.json()["publication"]["head_sha"][:12] in got[3].json()["summary"]
            # The steps name no address on the VCS host (nobody opens it): the office's badge links the PR's page.
            assert not [e.json()["summary"] for e in got if "vcs.squadops.local" in e.json()["summary"]]

            resumed: list[SseEvent] = []
            subscribed = asyncio.Event()
            again = asyncio.create_task(collect(http, run_id, resumed, subscribed, last_event_id=launched_at))
            await until(resumed, STEPS)
            await until_marker(await asyncio.to_thread(append_marker, server.container, run_id), resumed)
            again.cancel()
            resumed_gate = [e for e in resumed if e.event == "gate"]
            assert [(e.id, e.data) for e in resumed_gate] == [(e.id, e.data) for e in got]  # the log says the same

            feed = await http.get(
                "/control-plane/studio/observability-feed",
                params={"project_slug": "acme", "run_id": run_id},
                headers={"X-Squadops-Min-Position": got[-1].id},
            )
            body = feed.json()
            assert body["delivery"]["status"] == "delivered" and body["delivery"]["pr_url"] == answer.json()["pr_url"]
            assert [x["event_id"] for x in body["runtime_logs"] if x["source"] == "gate"][0] == got[-1].id

"""What the live-channel tests share: a real HTTP server, SSE parsing, stream clean-up."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import uvicorn
from nats.js import api as js_api

from api.app import create_app
from projections.engine.runner import NotificationSource
from projections.studio.live_channel import topic_for
from projections.studio.log_dock import live_event, live_run_id
from tests import infra
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE, drive_runs, eventually
from tests.processes import ServiceProcess, service_env
from workers.bootstrap import WORKERS, Container, build
from workers.live_watch import SseEvent, SseParser
from workers.settings import Settings

STUDIO = "/v1/admin/studio"
LIVE = "/control-plane/studio/live"


def live_settings(database_url: str, nats_url: str = "", **changes: Any) -> Settings:
    """Settings with a stream name and subject prefix of their own (deleted afterwards)."""
    tag = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "nats_url": nats_url,
        "live_stream_name": f"TEST_LIVE_{tag.upper()}",
        "live_subject_prefix": f"test_live_{tag}",
        "live_heartbeat_seconds": 1.0,
    }
    return settings_for(database_url, **{**values, **changes})


async def _delete_stream(url: str, name: str) -> None:
    nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
    try:
        with contextlib.suppress(Exception):
            await nc.jetstream().delete_stream(name)
    finally:
        await nc.close()


def delete_stream(url: str, name: str) -> None:
    """Deletes the stream; callable from sync code and from inside an event loop alike."""
    worker = threading.Thread(target=asyncio.run, args=(_delete_stream(url, name),))
    worker.start()
    worker.join(10)


class LiveServer:
    """The service on a real uvicorn server (a thread), on a free loopback port."""

    def __init__(self, container: Container, workers: tuple[str, ...] = WORKERS) -> None:
        self.container = container
        self.port = infra.free_port()
        config = uvicorn.Config(
            create_app(container, workers=workers),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            ws_ping_interval=None,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)  # the poll interval of this bounded wait
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


@contextlib.contextmanager
def served(settings: Settings, workers: tuple[str, ...] = WORKERS) -> Iterator[LiveServer]:
    """A built container behind a real server; stream deleted and container closed after."""
    container = build(settings)
    try:
        with LiveServer(container, workers) as server:
            yield server
    finally:
        container.close()
        if settings.nats_url:
            delete_stream(settings.nats_url, settings.live_stream_name)


def http_client(server: LiveServer, headers: dict[str, str] | None = None) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=headers or ADMIN, timeout=30)


def create_project_and_launch(http: httpx.Client, body: dict[str, Any] | None = None) -> str:
    answer = http.post("/v1/project-factory/projects", json=body or DEMO_LIKE)
    assert answer.status_code == 201, answer.text
    slug = answer.json()["project_slug"]
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": slug})
    assert answer.status_code == 201, answer.text
    return answer.json()["run_id"]


def launch(http: httpx.Client, slug: str) -> str:
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": slug})
    assert answer.status_code == 201, answer.text
    return answer.json()["run_id"]


def expected_events(container: Container, run_id: str, tenant: str = "default") -> list[dict[str, Any]]:
    """The run's live events straight from the event store (the truth to compare with)."""
    envs = NotificationSource(container.event_store).read(1, 1_000_000)
    found = []
    for env in envs:
        if live_run_id(env) == run_id and env.tenant == tenant:
            item = live_event(env)
            if item is not None:
                found.append(item)
    return found


def bulk_previews(container: Container, run_id: str, count: int, tenant: str = "default") -> None:
    """``count`` live events of the run saved in one transaction (the domain's own method)."""
    app = container
    run = app.studio.runs.get_run(tenant, run_id)
    for n in range(count):
        run.share_preview({"url": f"https://preview.example/{n}", "status": "live"}, app.clock())
    app.event_store.save(run)


MARKER_URL = "https://marker.example/"


def append_marker(container: Container, run_id: str, tenant: str = "default") -> str:
    """One more live event of the run (a preview whose URL says "marker"), saved after
    everything a test compares: its event id. A subscriber that received it has received
    whatever came before it in the log, so a duplicate of any of those would have shown."""
    run = container.studio.runs.get_run(tenant, run_id)
    run.share_preview({"url": MARKER_URL + uuid.uuid4().hex[:8], "status": "live"}, container.clock())
    container.event_store.save(run)
    return str(container.event_store.max_position())


def event_id(item: Any) -> str:
    """The event id of an SSE event, a WebSocket message, a fan-out (id, subject) pair or an id."""
    if isinstance(item, SseEvent):
        return item.id
    if isinstance(item, dict):
        return str(item["event_id"])
    if isinstance(item, int):
        return str(item)
    return str(item[0])


async def until_marker(marker: str, *collected: list[Any], timeout: float = 30.0) -> None:
    """Until every collector received the marker; then it is taken out of each of them, so
    what they hold is compared as it was, everything after the marker included."""
    deadline = time.monotonic() + timeout
    while not all(any(event_id(x) == marker for x in c) for c in collected):
        if time.monotonic() > deadline:
            raise AssertionError(f"marker {marker} not received; counts {[len(c) for c in collected]}")
        await asyncio.sleep(0.02)  # the poll interval of this wait
    for c in collected:
        c[:] = [x for x in c if event_id(x) != marker]


# -- Server-Sent Events ----------------------------------------------------------------------


class SseReader:
    """Parses an SSE byte stream into events (``workers.live_watch``'s parser, as ``squadops
    runs watch`` reads it); comments (``: ...``) are kept apart, by text."""

    def __init__(self) -> None:
        self.comments: list[str] = []
        self._parser = SseParser()

    def feed(self, chunk: bytes) -> list[SseEvent]:
        events = []
        for item in self._parser.feed(chunk):
            if isinstance(item, str):
                self.comments.append(item)
            else:
                events.append(item)
        return events


async def sse_events(
    client: httpx.AsyncClient,
    topic: str,
    *,
    last_event_id: str | None = None,
    headers: dict[str, str] | None = None,
    subscribed: asyncio.Event | None = None,
) -> AsyncIterator[SseEvent]:
    """Yields the topic's events; sets ``subscribed`` once the server confirmed."""
    request_headers = dict(headers or ADMIN)
    if last_event_id is not None:
        request_headers["Last-Event-ID"] = last_event_id
    reader = SseReader()
    async with client.stream("GET", LIVE, params={"topic": topic}, headers=request_headers) as response:
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_raw():
            events = reader.feed(chunk)
            if subscribed is not None and "subscribed" in reader.comments:
                subscribed.set()
            for event in events:
                yield event


def topic(run_id: str, tenant: str = "default") -> str:
    return topic_for(tenant, run_id)


def simulate(container: Container, runs: int = 2, ticks: int = 30, slug: str = "acme") -> list[str]:
    """Launches and executes ``runs`` runs and ticks them ``ticks`` times (no ticker thread)."""
    return drive_runs(container, runs=runs, ticks=ticks, project={**DEMO_LIKE, "project_key": slug})


def all_expected(container: Container) -> list[tuple[int, str]]:
    """Every live event of every run in log order: (event id, subject suffix tenant.run)."""
    envs = NotificationSource(container.event_store).read(1, 10_000_000)
    return [
        (env.position, f"tenant.{env.tenant}.run.{live_run_id(env)}")
        for env in envs
        if live_event(env) is not None
    ]


async def stream_contents(url: str, stream: str) -> list[tuple[int, str, int]]:
    """(event id, subject, stream seq) of every message the stream holds, in order."""
    nc = await nats.connect(url, connect_timeout=2)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        found: list[tuple[int, str, int]] = []
        if not info.state.messages:
            return found
        sub = await js.pull_subscribe(
            ">", stream=stream,
            config=js_api.ConsumerConfig(
                ack_policy=js_api.AckPolicy.NONE, mem_storage=True, inactive_threshold=10.0
            ),
        )
        while len(found) < info.state.messages:
            for msg in await sub.fetch(batch=1000, timeout=5):
                found.append((int(msg.headers["Nats-Msg-Id"]), msg.subject, msg.metadata.sequence.stream))
        await sub.unsubscribe()
        return found
    finally:
        await nc.close()


def wait_published(container: Container, timeout: float = 30.0) -> None:
    """Until the fan-out's position reached the end of the log."""
    eventually(lambda: container.fanout.position() >= container.event_store.max_position(), timeout=timeout)


@contextlib.contextmanager
def squadops_process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``squadops <args>`` in a subprocess, terminated (then killed) if still running after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli", *args],
        env=env,
        cwd=str(Path(__file__).resolve().parents[1]),
        stdout=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@contextlib.contextmanager
def service_process(
    settings: Settings, *, workers: str = "all", tick_seconds: float | None = None, **env: str
) -> Iterator[ServiceProcess]:
    """``squadops serve`` in a subprocess on a free loopback port, over ``settings``' stores."""
    if tick_seconds is not None:
        env["SQUADOPS_TICK_SECONDS"] = str(tick_seconds)
    process = ServiceProcess.serve("serve", service_env(settings, **env), infra.free_port(), workers=workers)
    try:
        process.start(ready_timeout=30)
        yield process
    finally:
        process.close()


@contextlib.contextmanager
def served_process(settings: Settings, *, workers: str = "all", tick_seconds: float | None = None) -> Iterator[str]:
    """``squadops serve`` in a subprocess; yields its URL."""
    with service_process(settings, workers=workers, tick_seconds=tick_seconds) as service:
        yield service.url

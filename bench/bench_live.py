"""Live channel: append -> SSE client latency, fan-out throughput against raw JetStream.

Latency: a service process (PostgreSQL, NATS, all workers) and, in this process, an SSE
client of one run plus an appender writing that run's live events straight to the event
store (another process, as a production API would); each sample is commit -> SSE receipt.
Throughput: the fan-out relaying a backlog of live events, and raw nats-py async
JetStream publishing of as many messages of the same size with the same acks in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid

import nats

from bench.context import BenchContext, percentile, sse_arrivals
from projections.engine.runner import NotificationSource
from projections.studio.live_channel import LiveMessage, live_message, topic_for
from tests.helpers import DEMO_LIKE
from tests.live_helpers import served_process
from workers.bootstrap import Container, broker_factory, build
from workers.fanout import TRACKING_NAME, LiveFanout
from workers.live_watch import SseEvent
from workers.settings import Settings

ROUNDS = 3
LATENCY_SAMPLES = 400
APPEND_RATE = 100.0  # appends per second during the latency run
BACKLOG = 20_000


def bench_settings(database_url: str, nats_url: str) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return Settings(
        database_url=database_url,
        nats_url=nats_url,
        log_level="warning",
        live_stream_name=f"BENCH_LIVE_{tag.upper()}",
        live_subject_prefix=f"bench_live_{tag}",
        projection_poll_seconds=0.5,
    )


async def _delete_stream(url: str, name: str) -> None:
    nc = await nats.connect(url)
    with contextlib.suppress(Exception):
        await nc.jetstream().delete_stream(name)
    await nc.close()


# -- latency ---------------------------------------------------------------------------------


def service(settings: Settings) -> contextlib.AbstractContextManager[str]:
    return served_process(settings, workers="projector,fanout")


def launch(container: Container) -> str:
    app = container
    app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="bench@example.com")
    run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="bench")
    return run.run_id


async def measure_latency(url: str, container: Container, run_id: str) -> list[float]:
    appended: dict[str, float] = {}
    received: dict[str, float] = {}
    subscribed = asyncio.Event()

    def arrived(event: SseEvent, now: float) -> None:
        received[event.id] = now

    def append() -> None:
        app = container
        interval = 1.0 / APPEND_RATE
        for n in range(LATENCY_SAMPLES):
            started = time.perf_counter()
            run = app.studio.runs.get_run("default", run_id)
            run.share_preview({"url": f"https://bench.example/{n}"}, app.clock())
            before = time.perf_counter()
            app.event_store.save(run)
            # The commit is done when save returns; charge the sample from before it.
            appended[str(app.event_store.last_saved_position())] = before
            time.sleep(max(0.0, interval - (time.perf_counter() - started)))

    reader = asyncio.create_task(sse_arrivals(url, topic_for("default", run_id), subscribed, arrived))
    await asyncio.wait_for(subscribed.wait(), 30)
    await asyncio.to_thread(append)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not set(appended) <= set(received):
        await asyncio.sleep(0.05)
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    return [(received[eid] - at) * 1000 for eid, at in appended.items() if eid in received]


# -- throughput --------------------------------------------------------------------------------


def backlog(container: Container, run_id: str, count: int) -> list[LiveMessage]:
    """Appends ``count`` live events; answers every live message the log then holds."""
    app = container
    run = app.studio.runs.get_run("default", run_id)
    for start in range(0, count, 2000):
        for n in range(start, min(count, start + 2000)):
            run.share_preview({"url": f"https://bench.example/{n}", "status": "live"}, app.clock())
        app.event_store.save(run)
    prefix = container.settings.live_subject_prefix
    envs = NotificationSource(app.event_store).read(1, 10**9)
    return [m for m in (live_message(e, prefix) for e in envs) if m]


def fanout_rate(container: Container, live_events: int) -> float:
    """One relay of the whole backlog into a stream of its own; events per second."""
    settings = container.settings
    store, top = container.store, container.event_store.max_position()
    store.commit(TRACKING_NAME, store.position(TRACKING_NAME), 0, [], [])  # from the start again
    fresh = settings.replace(live_stream_name=f"BENCH_LIVE_{uuid.uuid4().hex[:8].upper()}")
    fanout = LiveFanout(
        NotificationSource(container.event_store),
        store,
        broker_factory(fresh),
        subject_prefix=fresh.live_subject_prefix,
        page_size=fresh.live_fanout_page_size,
        gap_timeout=fresh.live_gap_timeout_seconds,
    )
    try:
        started = time.perf_counter()
        fanout.start()
        while fanout.position() < top:
            time.sleep(0.002)
        elapsed = time.perf_counter() - started
    finally:
        fanout.stop()
        asyncio.run(_delete_stream(fresh.nats_url, fresh.live_stream_name))
    return live_events / elapsed


async def raw_rate(nats_url: str, count: int, payload: bytes, max_pending: int) -> float:
    name = f"BENCH_RAW_{uuid.uuid4().hex[:8].upper()}"
    nc = await nats.connect(nats_url)
    js = nc.jetstream(publish_async_max_pending=max_pending)
    await js.add_stream(name=name, subjects=[f"{name.lower()}.>"], duplicate_window=120)
    try:
        started = time.perf_counter()
        futures = []
        for n in range(count):
            futures.append(
                await js.publish_async(f"{name.lower()}.tenant.default.run.r", payload, headers={"Nats-Msg-Id": str(n + 1)})
            )
        await asyncio.gather(*futures)
        return count / (time.perf_counter() - started)
    finally:
        await js.delete_stream(name)
        await nc.close()


def run(ctx: BenchContext) -> list[str]:
    lines: list[str] = []
    # Latency.
    with ctx.postgres() as url:
        settings = bench_settings(url, ctx.nats_url)
        container = build(settings)
        try:
            run_id = launch(container)
            with service(settings) as base:
                samples = asyncio.run(measure_latency(base, container, run_id))
        finally:
            container.close()
            asyncio.run(_delete_stream(ctx.nats_url, settings.live_stream_name))
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    lines.append(
        f"append -> SSE latency over {len(samples)}/{LATENCY_SAMPLES} events at {APPEND_RATE:.0f}/s: "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(samples):.1f} ms (target p99 < 50 ms)"
        + ("" if p99 < 50 else "  MISSED")
    )

    # Throughput: rounds of raw publishing and fan-out relaying, interleaved (fair under noise).
    with ctx.postgres() as url:
        settings = bench_settings(url, ctx.nats_url)
        container = build(settings)
        try:
            run_id = launch(container)
            messages = backlog(container, run_id, BACKLOG)
            rounds = []
            for _ in range(ROUNDS):
                raw = asyncio.run(
                    raw_rate(ctx.nats_url, len(messages), messages[-1].data, settings.live_max_acks_in_flight)
                )
                rounds.append((raw, fanout_rate(container, len(messages))))
        finally:
            container.close()
    raw, fanout = statistics.median(r for r, _ in rounds), statistics.median(f for _, f in rounds)
    ratio = statistics.median(f / r for r, f in rounds)
    lines.append(
        f"fan-out: {fanout:,.0f} events/s relaying {len(messages):,} live events, PostgreSQL -> JetStream "
        f"(median of {ROUNDS}; page {settings.live_fanout_page_size})"
    )
    lines.append(
        f"raw nats-py async JetStream publish: {raw:,.0f} msgs/s "
        f"({len(messages[-1].data)} B each, {settings.live_max_acks_in_flight} acks in flight, median of {ROUNDS})"
    )
    lines.append(f"fan-out / raw: {ratio:.2f} (target >= 0.5)" + ("" if ratio >= 0.5 else "  MISSED"))
    return lines

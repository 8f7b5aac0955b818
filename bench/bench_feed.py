"""Observability feed: reads over HTTP at 1,000 runs / >= 1M events, projection lag, rebuild.

On PostgreSQL:
- the store is filled with 1,000 runs and at least 1M events: ten runs of a 40-suit
  project simulated to completion through the domain (the operator replays blockers), then
  copied under new run ids straight through the event recorder, plus one live run of 50
  agents the reads look at;
- rebuild of every read model from position 0 (blue/green), in events/s, as a ratio to a
  raw read of the notification log in the same run (target >= 0.3);
- feed read p50/p99 over HTTP for the 50-agent run (target p99 < 10 ms), and the feed's
  throughput as a ratio to a static 2 KB Litestar endpoint served by the same process
  (target >= 0.4);
- projection lag, append -> visible in the feed, p99 while 2,000 events/s are appended
  (target < 100 ms).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
from eventsourcing.persistence import StoredEvent

from api.studio.feed import FeedReads
from bench.before_after_inputs import lag_samples
from bench.context import BenchContext, percentile
from bench.scale_support import project, simulate
from domain.shared.ids import session_key
from domain.studio.control import ControlIntent
from projections.engine.runner import NotificationSource
from projections.studio.feed_doc import FEED
from projections.studio.time_travel import EventSelector, TimeTravel
from tests.infra import free_port
from workers.bootstrap import Container, build, read_projectors
from workers.planes.simulator import SimulatorPlane
from workers.rebuild import rebuild_parallel
from workers.settings import Settings

TENANT = "default"
STUDIO_SEVEN = ("runs", "pixels", "surfaces", "log_dock", "fleet", "projects", "workspace_mirror")
ACTOR = "bench@example.com"
HEADERS = f"x-edge-claim-email: {ACTOR}\r\nx-edge-claim-groups: /org/platform/roles/super_admin\r\n"
RUNS = 1000
TEMPLATES = 10
MIN_EVENTS = 1_000_000
TARGET_SUITS = 45  # planner, curator, three lanes, 45 testers, compactor: 51 agents
APPEND_RATE = 2000
GENERATION_BUDGET_SECONDS = 240


def generate(container: Container) -> tuple[str, int, float, int]:
    """Fills the store; answers (the 50-agent run's id, events, seconds, runs)."""
    app, started = container, time.perf_counter()
    app.projects.create_project(tenant=TENANT, request=project("fleet", 48), created_by=ACTOR)
    app.projects.create_project(tenant=TENANT, request=project("bench", TARGET_SUITS), created_by=ACTOR)
    launch = lambda slug: app.studio.runs.launch_run(  # noqa: E731
        tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by=ACTOR
    )[0].run_id
    templates = [launch("fleet") for _ in range(TEMPLATES)]
    simulate(app, templates, ticks=800)
    assert all(app.studio.runs.get_run(TENANT, r).status != "running" for r in templates), "templates did not finish"
    envs = NotificationSource(app.event_store).read(1, 10**7)
    by_run: dict[str, list[Any]] = {r: [] for r in templates}
    for env in envs:
        if env.run_id in by_run:
            by_run[env.run_id].append(env.position)
    notes = {n.id: n for n in app.event_store.recorder.select_notifications(start=1, limit=10**7)}
    copies = RUNS - 1 - TEMPLATES
    # Runs' lengths follow their seeds: past RUNS, copies go on until MIN_EVENTS are stored.
    per_round = sum(len(by_run[r]) for r in templates)
    missing = MIN_EVENTS - app.event_store.max_position() - copies // TEMPLATES * per_round
    copies += max(0, -(-missing // per_round) * TEMPLATES)
    batch: list[StoredEvent] = []
    for index in range(copies):
        source = templates[index % TEMPLATES]
        clone = f"run-bench{index:05d}"
        old, new = source.encode(), clone.encode()
        for position in by_run[source]:
            note = notes[position]
            batch.append(
                StoredEvent(
                    originator_id=note.originator_id.replace(source, clone),
                    originator_version=note.originator_version,
                    topic=note.topic,
                    state=note.state.replace(old, new),
                )
            )
        if len(batch) >= 5_000:  # larger single inserts stall the recorder (see the report)
            app.event_store.recorder.insert_events(batch)
            batch = []
        if time.perf_counter() - started > GENERATION_BUDGET_SECONDS:
            break
    if batch:
        app.event_store.recorder.insert_events(batch)
    target = launch("bench")
    # Mid-run: the squad has grown to 50 agents, some done, some working, some blocked.
    app.studio.runs.request_execution(tenant=TENANT, run_id=target, requested_by=ACTOR)
    plane = SimulatorPlane()
    app.studio.ticks.tick_runs(plane, start=[(TENANT, target)])
    for tick in range(400):
        if len(app.studio.runs.get_run(TENANT, target).sessions) >= 50:
            break
        app.studio.ticks.tick_runs(plane, tick=[(TENANT, target)])
        if tick % 15 == 14:  # the operator keeps the squad moving (the control-line rule)
            app.studio.control.control_run(tenant=TENANT, run_id=target, intent=ControlIntent(verb="replay_blockers"), actor=ACTOR)
    return target, app.event_store.max_position(), time.perf_counter() - started, TEMPLATES + 1 + index + 1


def raw_read_rate(container: Container, page: int = 10_000) -> float:
    source, started, position, count = NotificationSource(container.event_store), time.perf_counter(), 0, 0
    head = source.max_position()
    while position < head:
        envs = source.read(position + 1, page, head)
        if not envs:
            break
        count += len(envs)
        position = envs[-1].position
    return count / (time.perf_counter() - started)


@contextmanager
def feed_server(url: str) -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.feed_server", url, str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the feed server did not start") from None
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=20)


class Connection:
    """A keep-alive HTTP/1.1 client connection reading into one buffer (cheap per response)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray(1 << 20)
        self.view = memoryview(self.buffer)

    def exchange(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        got = 0
        while True:
            got += self.sock.recv_into(self.view[got:])
            end = self.buffer.find(b"\r\n\r\n", 0, got)
            if end >= 0:
                break
        head = bytes(self.buffer[:end])
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        total = end + 4 + length
        while got < total:
            got += self.sock.recv_into(self.view[got:])
        return bytes(self.buffer[end + 4 : total])

    def close(self) -> None:
        self.sock.close()


def latencies(port: int, request: bytes, count: int) -> list[float]:
    connection, samples = Connection(port), []
    for _ in range(count):
        started = time.perf_counter()
        connection.exchange(request)
        samples.append(time.perf_counter() - started)
    connection.close()
    return samples


def throughput(port: int, request: bytes, connections: int, seconds: float) -> float:
    done = [0] * connections
    end = time.perf_counter() + seconds

    def client(index: int) -> None:
        connection = Connection(port)
        while time.perf_counter() < end:
            connection.exchange(request)
            done[index] += 1
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def http_figures(url: str, run_id: str) -> Iterator[str]:
    feed = f"GET /control-plane/studio/observability-feed?project_slug=bench&run_id={run_id} HTTP/1.1\r\n"
    feed_request = (feed + f"host: bench\r\n{HEADERS}\r\n").encode()
    static_request = b"GET /bench/static HTTP/1.1\r\nhost: bench\r\n\r\n"
    label = "stored feed, no cache"
    with feed_server(url) as port:
        first = Connection(port)
        body = first.exchange(feed_request)
        first.close()
        agents, size = msgspec.json.decode(body)["pixel_agent_count"], len(body)
        latencies(port, feed_request, 300)  # warm up
        samples = latencies(port, feed_request, 3000)
        throughput(port, static_request, 8, 1.0)
        static_rate = throughput(port, static_request, 8, 5.0)
        feed_rate = throughput(port, feed_request, 8, 5.0)
    yield (
        f"[{label}] feed read over HTTP ({agents} agents, {size:,} bytes): "
        f"p50 {percentile(samples, 50) * 1000:.2f} ms, p99 {percentile(samples, 99) * 1000:.2f} ms "
        "(target p99 < 5 ms)"
    )
    yield (
        f"[{label}] feed throughput {feed_rate:,.0f} req/s vs static 2 KB {static_rate:,.0f} req/s: "
        f"ratio {feed_rate / static_rate:.2f} (target >= 0.6)"
    )


def lag_figures(container: Container, target: str, seconds: float = 15.0) -> list[str]:
    """Append at APPEND_RATE events/s; probe how long an append takes to show in the feed."""
    app = container
    container.start(("projector",))
    # Read as the endpoint reads: the stored feed document.
    reads = FeedReads(
        container.store,
        TimeTravel(EventSelector(app.event_store)),
        app.event_store.max_position,
    )
    writers_runs = [
        app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="fleet", launched_by=ACTOR)[0]
        for _ in range(20)
    ]
    sessions = [
        app.event_store.repository.get(session_key(TENANT, r.run_id, sid, agent))
        for r in writers_runs
        for agent, sid in r.sessions.items()
    ]
    probe_run = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="bench", launched_by=ACTOR)[0]
    agent, sid = next(iter(probe_run.sessions.items()))
    probe = app.event_store.repository.get(session_key(TENANT, probe_run.run_id, sid, agent))
    target = probe_run.run_id
    if not container.await_reads(timeout=60):
        raise RuntimeError("the read models did not catch up with the launches")

    def shows(position: int) -> bool:
        feed = msgspec.json.decode(reads.feed(TENANT, "bench", target, 1))
        return bool(feed["live_events"]) and int(feed["live_events"][0]["event_id"]) >= position

    samples, rate = lag_samples(app, sessions, probe, APPEND_RATE, seconds, shows)
    container.stop()
    return [
        f"projection lag at {rate:,.0f} events/s appended: p50 {percentile(samples, 50) * 1000:.1f} ms, "
        f"p99 {percentile(samples, 99) * 1000:.1f} ms over {len(samples)} probes (target p99 < 100 ms)"
    ]


def run(ctx: BenchContext) -> Iterator[str]:
    """Yields each figure as soon as it is measured."""
    with ctx.postgres() as url:
        settings = Settings(database_url=url, log_level="warning", projection_poll_seconds=0.05)
        container = build(settings)
        try:
            target, events, seconds, runs = generate(container)
            yield f"store: {runs:,} runs, {events:,} events (generated in {seconds:.0f} s)"
            if events < MIN_EVENTS:
                yield f"note: generation stopped at its time box below {MIN_EVENTS:,} events"
            raw = raw_read_rate(container)
            names = [p.name for p in read_projectors()]
            # Every read model; those folded from events alone (the stored feed is composed
            # from five of them, as they are stored once rebuilt); and the seven of
            # the studio and projects areas, the set earlier figures were measured on.
            choices = (
                (names, "all"),
                ([n for n in names if n != FEED], "the event-folded"),
                ([n for n in names if n in STUDIO_SEVEN], "the studio and projects"),
            )
            for chosen, what in choices:
                report = rebuild_parallel(settings, chosen, workers=settings.rebuild_workers)
                yield (
                    f"rebuild of {what} {len(report.names)} read models ({settings.rebuild_workers} processes): "
                    f"{report.rate:,.0f} events/s vs raw log read {raw:,.0f} events/s: ratio {report.rate / raw:.2f} "
                    "(target >= 0.3)"
                )
        finally:
            container.close()
        yield from http_figures(url, target)
        container = build(settings)
        try:
            yield from lag_figures(container, target)
        finally:
            container.close()

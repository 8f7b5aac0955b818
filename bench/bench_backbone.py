"""Backbone: launch latency over HTTP, and the domain append rate of 100 runs ticking.

- Launch p50/p99 through a real uvicorn server (target p99 < 50 ms; the spec's system
  takes about 6 s), on PostgreSQL and on the embedded SQLite default.
- Append rate on PostgreSQL while 100 runs tick together (what one ticker pass changes is
  one save), as a ratio to a raw psycopg ``executemany`` of the same rows measured in the
  same run (target >= 0.25).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import uvicorn

from api.app import create_app
from bench.context import BenchContext, percentile
from tests.helpers import DEMO_LIKE
from tests.infra import free_port
from workers.bootstrap import build
from workers.planes.simulator import SimulatorPlane
from workers.settings import Settings

ADMIN = {"x-edge-claim-email": "bench@example.com", "x-edge-claim-groups": "/org/platform/roles/super_admin"}
LAUNCHES = 300
RUNS = 100
PROJECTS = 20  # five runs per project: each project's workspace has its own slots
PASSES = 40


@contextmanager
def served(settings: Settings) -> Iterator[str]:
    container = build(settings)
    container.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="bench@example.com")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(container), host="127.0.0.1", port=port, log_level="error", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        container.close()


def launch_latency(base: str) -> tuple[float, float]:
    samples = []
    with httpx.Client(base_url=base, headers=ADMIN, timeout=10) as http:
        body = {"template_id": "delivery-core", "project_slug": "acme"}
        for _ in range(20):  # warm-up
            http.post("/v1/admin/studio/runs", json=body).raise_for_status()
        for _ in range(LAUNCHES):
            started = time.perf_counter()
            http.post("/v1/admin/studio/runs", json=body).raise_for_status()
            samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 50), percentile(samples, 99)


def append_rate(url: str) -> tuple[float, float, float, int]:
    """(ticking events/s, saving events/s, raw executemany rows/s, events) on PostgreSQL.

    Ticking counts the whole pass (the simulator deciding, the aggregates' guards, the
    save); saving counts the time inside the one save per pass (mapping, transcoding,
    the insert).
    """
    container = build(Settings(database_url=url, log_level="warning"))
    app = container
    try:
        for p in range(PROJECTS):
            project = {**DEMO_LIKE, "project_key": f"acme-{p}"}
            app.projects.create_project(tenant="default", request=project, created_by="bench@example.com")
        plane = SimulatorPlane(activity=0.9)
        ids = []
        for i in range(RUNS):
            slug = f"acme-{i % PROJECTS}"
            run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug=slug, launched_by="b")
            app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="b")
            ids.append(("default", run.run_id))
        app.studio.ticks.tick_runs(plane, start=ids)
        before = app.event_store.max_position()
        saving = [0.0]
        save = app.event_store.save

        def timed_save(*objs: object, **kwargs: object) -> object:
            t0 = time.perf_counter()
            try:
                return save(*objs, **kwargs)
            finally:
                saving[0] += time.perf_counter() - t0

        app.event_store.save = timed_save  # type: ignore[method-assign]
        started = time.perf_counter()
        events = 0
        for _ in range(PASSES):
            events += app.studio.ticks.tick_runs(plane, tick=ids).events
        domain = events / (time.perf_counter() - started)
        appending = events / saving[0]
        rows = [
            (n.originator_id, n.originator_version, n.topic, n.state)
            for n in app.event_store.recorder.select_notifications(start=before + 1, limit=10**7)
        ]
    finally:
        container.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE raw_events (originator_id text NOT NULL, originator_version bigint NOT NULL, "
            "topic text, state bytea, notification_id bigserial, PRIMARY KEY (originator_id, originator_version))"
        )
        conn.execute("CREATE UNIQUE INDEX ON raw_events (notification_id)")
        started = time.perf_counter()
        batch = max(1, len(rows) // PASSES)
        for i in range(0, len(rows), batch):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO raw_events (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)",
                    rows[i : i + batch],
                )
        raw = len(rows) / (time.perf_counter() - started)
    return domain, appending, raw, events


def run(ctx: BenchContext) -> list[str]:
    lines = []
    with ctx.postgres() as url:
        with served(Settings(database_url=url, log_level="warning", tick_seconds=1.0)) as base:
            p50, p99 = launch_latency(base)
        lines.append(f"launch over HTTP, PostgreSQL: p50 {p50:.1f} ms, p99 {p99:.1f} ms (target p99 < 50 ms)")
    with tempfile.TemporaryDirectory() as scratch:
        sqlite = f"sqlite:///{Path(scratch) / 'bench.db'}"
        with served(Settings(database_url=sqlite, log_level="warning", tick_seconds=1.0)) as base:
            p50, p99 = launch_latency(base)
        lines.append(f"launch over HTTP, SQLite:     p50 {p50:.1f} ms, p99 {p99:.1f} ms (target p99 < 50 ms)")
    with ctx.postgres() as url:
        domain, appending, raw, events = append_rate(url)
    lines.append(
        f"{RUNS} runs ticking, {events} events in {PASSES} passes, one save a pass; "
        f"raw executemany of the same rows: {raw:,.0f} rows/s"
    )
    lines.append(
        f"  append (time in the save): {appending:,.0f} events/s, ratio {appending / raw:.2f} (target >= 0.25)"
    )
    lines.append(
        f"  whole pass (simulate + guards + save): {domain:,.0f} events/s, ratio {domain / raw:.2f}"
    )
    return lines

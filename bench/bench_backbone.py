"""Backbone: launch latency over HTTP, and the domain append rate of 100 runs ticking.

- Launch p50/p99 through a real uvicorn server (target p99 < 50 ms; the spec's system
  takes about 6 s), on PostgreSQL and on the embedded SQLite default.
- Append rate on PostgreSQL while 100 runs tick together (what one ticker pass changes is
  one save), as a ratio to a raw psycopg ``executemany`` of the same rows run right after
  every pass (target >= 0.25 for the save alone, >= 0.3 for the whole pass: simulate,
  guards and save); three rounds of fresh runs, medians and each round printed.

On SQLite no commit checkpoints the WAL (workers/eventstore/sqlite.py): a checkpointer
thread does, off the request path, so a launch never pays a checkpoint of megabytes.
"""

from __future__ import annotations

import gc
import statistics
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
from workers.heap import collect_young_less_often
from workers.planes.simulator import SimulatorPlane
from workers.settings import Settings

ADMIN = {"x-edge-claim-email": "bench@example.com", "x-edge-claim-groups": "/org/platform/roles/super_admin"}
LAUNCHES = 300
RUNS = 100
PROJECTS = 20  # five runs per project: each project's workspace has its own slots
PASSES = 40
ROUNDS = 3  # tick rounds, each followed by its raw executemany


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


def raw_insert(conn: psycopg.Connection, rows: list[tuple[object, ...]]) -> float:
    """Seconds a raw psycopg ``executemany`` of ``rows`` takes, in one transaction."""
    started = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO raw_events (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)",
            rows,
        )
    return time.perf_counter() - started


def append_rate(url: str, rounds: int = ROUNDS) -> list[tuple[float, float, float, int]]:
    """Per round: (ticking events/s, saving events/s, raw executemany rows/s, events).

    Ticking counts the whole pass (the simulator deciding, the aggregates' guards, the
    save); saving counts the time inside the one save per pass (mapping, transcoding,
    the insert). Right after each pass, a raw ``executemany`` inserts that pass's very
    rows into a table of the same shape (side by side, pass by pass: the shared
    machine's load changes from one second to the next). Each round ticks runs of its
    own, in projects of its own, from their start. The cyclic collector is set as in the
    ticker's process (``squadops worker ticker`` and ``serve``: workers/heap.py).
    """
    thresholds = gc.get_threshold()
    collect_young_less_often()
    container = build(Settings(database_url=url, log_level="warning"))
    app = container
    raw_conn = psycopg.connect(url, autocommit=True)
    raw_conn.execute(
        "CREATE TABLE raw_events (originator_id text NOT NULL, originator_version bigint NOT NULL, "
        "topic text, state bytea, notification_id bigserial, PRIMARY KEY (originator_id, originator_version))"
    )
    raw_conn.execute("CREATE UNIQUE INDEX ON raw_events (notification_id)")
    recorder = app.event_store.recorder
    results = []
    try:
        plane = SimulatorPlane(activity=0.9)
        saving = [0.0]
        save = app.event_store.save

        def timed_save(*objs: object, **kwargs: object) -> object:
            t0 = time.perf_counter()
            try:
                return save(*objs, **kwargs)
            finally:
                saving[0] += time.perf_counter() - t0

        app.event_store.save = timed_save  # type: ignore[method-assign]
        for r in range(rounds):
            for p in range(PROJECTS):
                project = {**DEMO_LIKE, "project_key": f"acme-{r}-{p}"}
                app.projects.create_project(tenant="default", request=project, created_by="bench@example.com")
            ids = []
            for i in range(RUNS):
                slug = f"acme-{r}-{i % PROJECTS}"
                run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug=slug, launched_by="b")
                app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="b")
                ids.append(("default", run.run_id))
            app.studio.ticks.tick_runs(plane, start=ids)
            saving[0], ticking, raw_seconds, events = 0.0, 0.0, 0.0, 0
            for _ in range(PASSES):
                before = app.event_store.max_position()
                started = time.perf_counter()
                events += app.studio.ticks.tick_runs(plane, tick=ids).events
                ticking += time.perf_counter() - started
                rows = [
                    (n.originator_id, n.originator_version, n.topic, n.state)
                    for n in recorder.select_notifications(start=before + 1, limit=10**7)
                ]
                raw_seconds += raw_insert(raw_conn, rows)
            results.append((events / ticking, events / saving[0], events / raw_seconds, events))
    finally:
        container.close()
        raw_conn.close()
        gc.set_threshold(*thresholds)
    return results


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
        rounds = append_rate(url)
    raw = statistics.median(r for _, _, r, _ in rounds)
    events = statistics.median(e for *_, e in rounds)
    lines.append(
        f"{RUNS} runs ticking, {events:,.0f} events in {PASSES} passes a round, one save a pass; "
        f"raw executemany of the same rows right after each pass: {raw:,.0f} rows/s (median of {len(rounds)} rounds)"
    )
    appending = statistics.median(a / r for _, a, r, _ in rounds)
    whole = statistics.median(d / r for d, _, r, _ in rounds)
    lines.append(
        f"  append (time in the save): ratio {appending:.2f} (target >= 0.25); rounds "
        + ", ".join(f"{a / r:.2f}" for _, a, r, _ in rounds)
    )
    lines.append(
        f"  whole pass (simulate + guards + save): {statistics.median(d for d, *_ in rounds):,.0f} events/s, "
        f"ratio {whole:.2f} (target >= 0.3); rounds " + ", ".join(f"{d / r:.2f}" for d, _, r, _ in rounds)
    )
    return lines

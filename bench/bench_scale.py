"""Cost as work grows: each cost at a small and a large size, with the ratio between the ends.

On PostgreSQL (``SQUADOPS_BENCH_QUICK=1`` shrinks every size):
- launch p99 and feed p99 over HTTP at 10, 100 and 1,000 runs (target: flat), against a
  ``squadops serve`` process running the projector (launch waits for its read models);
- rebuild of every read model at 100k, 1M and 3M events (target: linear, events/s flat);
- memory (RSS) of the API and of each worker process, started at 1M events and living
  while the log grows, at 2M and at 3M events (target: bounded, no growth with the log's
  length);
- projection lag (append -> every read model includes it, with the projector in its own
  process) at 500, 2,000, 8,000 events/s appended and on, doubling, until it breaks: its
  p99 over 1 s, or the lag still growing at the end, or the appender falling short.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.context import BenchContext, percentile
from bench.scale_support import (
    ACTOR,
    QUICK,
    TENANT,
    GrowingLog,
    caught_up,
    launch,
    project,
    ratio_line,
    rss_mb,
    simulate,
    sizes,
)
from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE
from tests.infra import free_port
from tests.processes import ServiceProcess, service_env
from workers.bootstrap import Container, build, read_projectors
from workers.rebuild import rebuild_parallel
from workers.settings import Settings

RUN_COUNTS = sizes("SQUADOPS_BENCH_RUN_COUNTS", (10, 100, 1000), (10, 100, 300))
REBUILD_SIZES = sizes("SQUADOPS_BENCH_REBUILD_SIZES", (100_000, 1_000_000, 3_000_000), (20_000, 60_000, 150_000))
LAG_RATES = sizes("SQUADOPS_BENCH_LAG_RATES", (500, 2000, 8000, 16000, 32000), (500, 2000, 8000))
SAMPLES = 100 if QUICK else 300
TARGET_AGENTS = 20 if QUICK else 50
LAG_SECONDS = 6.0 if QUICK else 15.0
LAG_BREAK_SECONDS = 1.0


def settings_for(url: str, ctx: BenchContext) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return Settings(
        database_url=url,
        nats_url=ctx.nats_url,
        log_level="warning",
        live_stream_name=f"BENCH_SCALE_{tag.upper()}",
        live_subject_prefix=f"bench_scale_{tag}",
        projection_poll_seconds=0.05,
    )


@contextlib.contextmanager
def processes(
    settings: Settings, spec: dict[str, str], scratch: Path, extra: dict[str, str] | None = None
) -> Iterator[dict[str, ServiceProcess]]:
    """``spec``: name -> worker (``serve`` for the API without workers, ``serve:W`` with
    workers W); all started, with ``extra`` in their environment."""
    env = service_env(settings, **(extra or {}))
    started: dict[str, ServiceProcess] = {}
    try:
        for name, worker in spec.items():
            log = scratch / f"{name}.log"
            if worker == "serve":
                started[name] = ServiceProcess.serve(name, env, free_port(), workers="none", log_path=log).start()
            elif worker.startswith("serve:"):
                workers = worker.removeprefix("serve:")
                started[name] = ServiceProcess.serve(name, env, free_port(), workers=workers, log_path=log).start()
            else:
                started[name] = ServiceProcess.worker(name, env, worker, log_path=log).start()
        yield started
    finally:
        for process in started.values():
            process.close()


# -- launch and feed p99 as runs grow ------------------------------------------------------


def http_p99(http: httpx.Client, method: str, path: str, count: int, **kwargs: object) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        http.request(method, path, **kwargs).raise_for_status()  # type: ignore[arg-type]
        samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 99)


def runs_figures(ctx: BenchContext) -> Iterator[str]:
    launches: list[tuple[int, float]] = []
    feeds: list[tuple[int, float]] = []
    with ctx.postgres() as url, tempfile.TemporaryDirectory() as scratch:
        settings = settings_for(url, ctx)
        app = build(settings)
        try:
            app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by=ACTOR)
            app.projects.create_project(tenant=TENANT, request=project("bench", TARGET_AGENTS), created_by=ACTOR)
            target = launch(app, "bench")
            simulate(app, [target], ticks=400, until_agents=TARGET_AGENTS)
            agents = len(app.studio.runs.get_run(TENANT, target).sessions)
            with processes(settings, {"api": "serve:projector"}, Path(scratch)) as procs, httpx.Client(
                base_url=procs["api"].url, headers=ADMIN, timeout=30
            ) as http:
                body = {"template_id": "delivery-core", "project_slug": "acme"}
                feed = "/control-plane/studio/observability-feed"
                params = {"project_slug": "bench", "run_id": target}
                runs = 1
                for count in RUN_COUNTS:
                    while runs < count:
                        launch(app, "acme")
                        runs += 1
                    if not caught_up(app, 300):
                        raise RuntimeError("the projector did not catch up")
                    http_p99(http, "POST", "/v1/admin/studio/runs", 10, json=body)  # warm-up
                    launches.append((count, http_p99(http, "POST", "/v1/admin/studio/runs", SAMPLES // 2, json=body)))
                    http_p99(http, "GET", feed, 20, params=params)
                    feeds.append((count, http_p99(http, "GET", feed, SAMPLES, params=params)))
                    runs += 10 + SAMPLES // 2
        finally:
            app.close()
    yield ratio_line("launch p99 over HTTP as runs grow", "ms", launches, "{:.1f}") + " (target: flat, < 50 ms)"
    yield ratio_line(f"feed p99 ({agents} agents) as runs grow", "ms", feeds, "{:.2f}") + " (target: flat, < 5 ms)"


# -- rebuild, memory and lag as the log grows --------------------------------------------


def rebuild_point(settings: Settings) -> tuple[float, float]:
    names = [p.name for p in read_projectors()]
    # A page of the log may take more than the request path's statement bound (1.5 s) to
    # read on a loaded machine: the rebuild then fails (seen at 600k events on 2 shared cores).
    patient = settings.replace(database_statement_seconds=60.0)
    report = rebuild_parallel(patient, names, workers=settings.rebuild_workers)
    return report.seconds, report.rate


def memory_points(app: Container, log: GrowingLog, settings: Settings, scratch: Path, lengths: tuple[int, int]) -> list[str]:
    """RSS of the API and each worker at two log lengths, the workers living throughout."""
    spec = {"api": "serve", "projector": "projector", "ticker": "ticker", "fanout": "fanout", "jobs": "jobs"}
    samples: dict[str, list[float]] = {name: [] for name in spec}
    with processes(settings, spec, scratch) as procs, httpx.Client(base_url=procs["api"].url, headers=ADMIN, timeout=60) as http:
        for length in lengths:
            log.grow_to(length)
            if not caught_up(app, 1800):
                raise RuntimeError("the projector worker did not catch up")
            for _ in range(20):  # the API has answered reads over the whole log
                http.get("/control-plane/studio/runs", params={"project_slug": "fleet"}).raise_for_status()
            for name, process in procs.items():
                assert process.pid is not None
                samples[name].append(rss_mb(process.pid))
    return [
        f"RSS {name}: {values[0]:.0f} MB at {lengths[0]:,} events, {values[1]:.0f} MB at {lengths[1]:,}: "
        f"ratio {values[1] / values[0]:.2f} (target: bounded, ~1.0)"
        for name, values in samples.items()
    ]


def lag_at(app: Container, log: GrowingLog, rate: int, seconds: float) -> tuple[float, float, float, bool]:
    """Appends copies at ``rate`` events/s; answers (achieved rate, p50 s, p99 s, still
    growing) where each sample is append -> every read model includes it."""
    recorder, stored = app.event_store.recorder, app.store
    names = [p.name for p in read_projectors()]
    appended: list[tuple[int, float]] = []
    seen: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:
        index = 0
        while not done.is_set() or index < len(appended):
            positions = stored.positions()
            low = min(positions.get(n, 0) for n in names)
            now = time.perf_counter()
            while index < len(appended) and appended[index][0] <= low:
                seen[index] = now
                index += 1
            if done.is_set() and time.perf_counter() - done_at[0] > 30:
                return
            time.sleep(0.003)

    done_at = [0.0]
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    interval, pending = 0.02, []
    started = time.perf_counter()
    next_at, count = started, 0
    while time.perf_counter() - started < seconds:
        while len(pending) < rate * interval:
            pending.extend(log.copy_events())
        chunk, pending = pending[: max(1, round(rate * interval))], pending[max(1, round(rate * interval)) :]
        ids = recorder.insert_events(chunk) or []
        appended.append((max(ids), time.perf_counter()))
        count += len(chunk)
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    achieved = count / (time.perf_counter() - started)
    done_at[0] = time.perf_counter()
    done.set()
    watcher.join(timeout=40)
    lags = [seen[i] - at for i, (_, at) in enumerate(appended) if i in seen]
    lags += [LAG_BREAK_SECONDS * 10] * (len(appended) - len(lags))  # never seen: broken
    tail = lags[-max(1, len(lags) // 5) :]
    head = lags[: max(1, len(lags) // 5)]
    growing = percentile(tail, 50) > max(4 * percentile(head, 50), 0.25)
    return achieved, percentile(lags, 50), percentile(lags, 99), growing


def lag_figures(app: Container, log: GrowingLog, settings: Settings, scratch: Path) -> list[str]:
    lines, broke = [], None
    with processes(settings, {"projector": "projector"}, scratch):
        caught_up(app, 600)
        for rate in LAG_RATES:
            achieved, p50, p99, growing = lag_at(app, log, rate, LAG_SECONDS)
            short = achieved < 0.9 * rate
            reason = (
                "appender fell short" if short else "lag still growing" if growing
                else "p99 over 1 s" if p99 > LAG_BREAK_SECONDS else ""
            )
            lines.append(
                f"projection lag at {rate:,} events/s (achieved {achieved:,.0f}): p50 {p50 * 1000:.0f} ms, "
                f"p99 {p99 * 1000:.0f} ms" + (f"  BREAKS: {reason}" if reason else "")
            )
            if reason:
                broke = (rate, reason)
                break
            caught_up(app, 600)
    if broke:
        lines.append(f"projection lag breaking point: {broke[0]:,} events/s appended ({broke[1]})")
    else:
        lines.append(f"projection lag: no break up to {LAG_RATES[-1]:,} events/s appended")
    return lines


def log_figures(ctx: BenchContext) -> Iterator[str]:
    with ctx.postgres() as url, tempfile.TemporaryDirectory() as scratch:
        settings = settings_for(url, ctx)
        app = build(settings)
        try:
            started = time.perf_counter()
            log = GrowingLog(app)
            yield f"log: {len(log.templates)} simulated template runs, {log.events_per_copy():,.0f} events each, copied"
            points: list[tuple[int, float]] = []
            rates: list[tuple[int, float]] = []
            for n, size in enumerate(REBUILD_SIZES):
                grown = time.perf_counter()
                if n == len(REBUILD_SIZES) - 1 and n >= 1:
                    # Memory: the workers start at the size before, live while the log grows,
                    # and are measured half-way and at the end (both after work on the log).
                    half = (REBUILD_SIZES[-2] + size) // 2
                    yield from memory_points(app, log, settings, Path(scratch), (half, size))
                else:
                    log.grow_to(size)
                grew = time.perf_counter() - grown
                seconds, rate = rebuild_point(settings)
                points.append((size, seconds))
                rates.append((size, rate))
                yield f"rebuild at {app.event_store.max_position():,} events: {seconds:.1f} s, {rate:,.0f} events/s (log grown in {grew:.0f} s)"
            yield ratio_line("rebuild time as the log grows", "s", points, "{:.1f}") + " (target: linear, ratio = the size's)"
            yield ratio_line("rebuild rate as the log grows", "events/s", rates, "{:,.0f}") + " (target: flat, ~1.0)"
            if len(points) >= 2 and points[-1][1] > points[0][1]:
                (n0, t0), (n1, t1) = points[0], points[-1]
                fixed = t0 - (t1 - t0) / (n1 - n0) * n0
                yield (
                    f"rebuild marginal rate between the ends: {(n1 - n0) / (t1 - t0):,.0f} events/s; "
                    f"fixed cost (processes starting, tables swapped) about {max(0.0, fixed):.1f} s"
                )
            yield from lag_figures(app, log, settings, Path(scratch))
            yield f"(log figures took {time.perf_counter() - started:.0f} s)"
        finally:
            app.close()


def run(ctx: BenchContext) -> Iterator[str]:
    yield from runs_figures(ctx)
    yield from log_figures(ctx)

"""Before and after the redesign (issue 24): the user-facing figures of both, side by side.

"Before" is the code at ``BEFORE`` (the start of the redesign), checked out into a scratch
folder (``git archive``); "after" is this checkout. Each version runs as its own
``squadops`` processes (the same venv, ``PYTHONPATH`` and working directory at its code),
and this harness measures both the same way, over HTTP, SSE, JetStream and the CLI:

- launch p50/p99: ``POST /v1/admin/studio/runs`` against ``squadops serve`` (PostgreSQL);
- feed p99 and throughput: the stored feed of a 50-agent run, with the store filled as
  ``bench_feed`` fills it, served by ``squadops serve --workers none``;
- rebuild: ``squadops projections rebuild --all`` over that store, in events/s;
- projection lag: an append at 2,000 events/s until it shows in the feed over HTTP, the
  version's projector following the log;
- append -> SSE p99: ``POST .../preview`` sent until its event arrives on the run's SSE;
- fan-out: a ``squadops worker fanout`` relaying a backlog of live events into JetStream,
  in events/s (from its first message to its last).

The inputs (the feed's store, the fan-out's backlog, the lag's appends) are written by the
"before" code (bench/before_after_inputs.py), so both versions read the same log in the
stored format the redesign started from. The versions alternate figure by figure on the
same machine in one run; each row prints after/before, and ``WORSE`` where the after
figure is more than 10% worse. ``SQUADOPS_BENCH_QUICK=1`` shrinks the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import nats
import psycopg

from bench.bench_backbone import launch_latency
from bench.bench_feed import latencies, throughput
from bench.context import BenchContext, percentile, sse_arrivals
from bench.scale_support import QUICK
from tests import infra
from tests.helpers import DEMO_LIKE
from tests.processes import ROOT, ServiceProcess, service_env
from workers.settings import Settings

BEFORE = "490f8af"
INPUTS = Path(__file__).with_name("before_after_inputs.py")
ADMIN = {"x-edge-claim-email": "bench@example.com", "x-edge-claim-groups": "/org/platform/roles/super_admin"}
FEED_RUNS, FEED_EVENTS = (100, 100_000) if QUICK else (1000, 1_000_000)
BACKLOG = 5_000 if QUICK else 20_000
LAG_SECONDS, LAG_RATE = (8.0, 2000.0) if QUICK else (15.0, 2000.0)
SSE_SAMPLES, SSE_RATE = (100, 50.0) if QUICK else (400, 100.0)
WORSE = 0.10  # an after figure more than 10% worse than before is flagged


@dataclass(frozen=True)
class Version:
    name: str
    root: Path

    def env(self, settings: Settings, **extra: str) -> dict[str, str]:
        return service_env(settings, PYTHONPATH=str(self.root), **extra)

    def run(self, args: list[str], env: dict[str, str], timeout: float = 1800) -> str:
        done = subprocess.run(
            [sys.executable, *args], env=env, cwd=self.root, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: {' '.join(args[:3])} failed: {done.stderr[-2000:]}")
        return done.stdout

    def log(self, settings: Settings, what: str) -> Path:
        """A log file of its own for a process (its lines stay out of the table)."""
        return Path(settings.data_dir) / f"{self.name}-{what}.log"

    @contextlib.contextmanager
    def serve(self, settings: Settings, workers: str, **extra: str) -> Iterator[str]:
        process = ServiceProcess.serve(
            f"{self.name}-serve", self.env(settings, **extra), infra.free_port(), workers=workers, root=self.root,
            log_path=self.log(settings, "serve"),
        )
        try:
            process.start(ready_timeout=120)
            yield process.url
        finally:
            process.close()


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    higher_is_better: bool
    before: float
    after: float

    def row(self) -> str:
        ratio = self.after / self.before if self.before else float("inf")
        worse = ratio < 1 - WORSE if self.higher_is_better else ratio > 1 + WORSE
        return (
            f"{self.name:<34} {self.before:>12,.1f} {self.after:>12,.1f} {self.unit:<10} x{ratio:5.2f}"
            + ("  WORSE (>10%)" if worse else "")
        )


@contextlib.contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """The code at ``commit`` in a scratch folder (``git archive``), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"squadops-{commit}-") as scratch:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", scratch], input=archive.stdout, check=True)
        yield Path(scratch)


def settings(url: str, nats_url: str, scratch: str) -> Settings:
    """A store's settings, with a data dir of its own under ``scratch`` (each version's
    provisioned repositories apart)."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        database_url=url, nats_url=nats_url, log_level="warning", data_dir=tempfile.mkdtemp(dir=scratch),
        live_stream_name=f"BENCH_BA_{tag.upper()}", live_subject_prefix=f"bench_ba_{tag}",
    )


@contextlib.contextmanager
def copy_of(ctx: BenchContext, template_url: str) -> Iterator[str]:
    """A database copied from ``template_url``'s (so each version starts from the same log)."""
    name = f"squadops_bench_{uuid.uuid4().hex[:12]}"
    template = psycopg.conninfo.conninfo_to_dict(template_url)["dbname"]
    with psycopg.connect(ctx.pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield infra.with_database(ctx.pg_admin_url, name)
    finally:
        infra.drop_database(ctx.pg_admin_url, name)


def inputs(before: Version, command: str, url: str, *args: object) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(before.root)}
    out = before.run([str(INPUTS), command, url, *map(str, args)], env)
    return json.loads(out.strip().splitlines()[-1])


def create_project(base: str) -> None:
    httpx.post(f"{base}/v1/project-factory/projects", json=DEMO_LIKE, headers=ADMIN, timeout=30).raise_for_status()


# -- the figures, one version at a time --------------------------------------------------------


def launch_figures(ctx: BenchContext, version: Version, scratch: str) -> tuple[float, float]:
    with ctx.postgres() as url, version.serve(settings(url, ctx.nats_url, scratch), "all", SQUADOPS_TICK_SECONDS="1.0") as base:
        create_project(base)
        return launch_latency(base)


def sse_figures(ctx: BenchContext, version: Version, scratch: str) -> list[float]:
    """Milliseconds from sending ``POST .../preview`` to its event on the run's SSE."""
    with ctx.postgres() as url, version.serve(settings(url, ctx.nats_url, scratch), "projector,fanout") as base:
        create_project(base)
        with httpx.Client(base_url=base, headers=ADMIN, timeout=30) as http:
            launched = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
            run_id = launched.raise_for_status().json()["run_id"]
            return asyncio.run(_sse_samples(http, base, run_id))


async def _sse_samples(http: httpx.Client, base: str, run_id: str) -> list[float]:
    received: list[float] = []
    subscribed = asyncio.Event()

    def send() -> list[float]:
        sent = []
        for n in range(SSE_SAMPLES):
            started = time.perf_counter()
            sent.append(started)
            http.post(f"/v1/admin/studio/runs/{run_id}/preview", json={"url": f"https://bench.example/{n}"}).raise_for_status()
            time.sleep(max(0.0, 1 / SSE_RATE - (time.perf_counter() - started)))  # pacing: the append rate
        return sent

    topic = f"portal_live_events:tenant:default:run:{run_id}"
    reader = asyncio.create_task(sse_arrivals(base, topic, subscribed, lambda _, now: received.append(now)))
    await asyncio.wait_for(subscribed.wait(), 30)
    sent = await asyncio.to_thread(send)
    deadline = time.monotonic() + 30
    while len(received) < len(sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # the poll interval of this bounded wait
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    return [(got - at) * 1000 for at, got in zip(sent, received, strict=False)]


def store_figures(ctx: BenchContext, version: Version, store_url: str, facts: dict[str, object], scratch: str) -> dict[str, float]:
    """Rebuild of every read model over the feed's store, then the feed read over HTTP."""
    with copy_of(ctx, store_url) as url:
        config = settings(url, ctx.nats_url, scratch)
        started = time.perf_counter()
        version.run(["-m", "workers.cli", "projections", "rebuild", "--all"], version.env(config))
        rebuild = int(facts["events"]) / (time.perf_counter() - started)  # type: ignore[call-overload]
        with version.serve(config, "none") as base:
            port = int(base.rsplit(":", 1)[1])
            path = f"/control-plane/studio/observability-feed?project_slug=bench&run_id={facts['run_id']}"
            request = (
                f"GET {path} HTTP/1.1\r\nhost: bench\r\n"
                f"x-edge-claim-email: {ADMIN['x-edge-claim-email']}\r\n"
                f"x-edge-claim-groups: {ADMIN['x-edge-claim-groups']}\r\n\r\n"
            ).encode()
            latencies(port, request, 300)  # warm up
            samples = latencies(port, request, 3000)
            rate = throughput(port, request, 8, 5.0)
    return {"rebuild": rebuild, "feed_p50": percentile(samples, 50) * 1000, "feed_p99": percentile(samples, 99) * 1000, "feed_rate": rate}


def lag_figures(ctx: BenchContext, version: Version, before: Version, scratch: str) -> float:
    with ctx.postgres() as url, version.serve(settings(url, ctx.nats_url, scratch), "projector") as base:
        result = inputs(before, "lag", url, base, LAG_SECONDS, LAG_RATE)
    return percentile(list(result["samples"]), 99) * 1000  # type: ignore[arg-type]


def fanout_figures(ctx: BenchContext, version: Version, backlog_url: str, live: int, scratch: str) -> float:
    """Events/s of one fan-out process relaying the backlog, from its first message to its last."""
    with copy_of(ctx, backlog_url) as url:
        config = settings(url, ctx.nats_url, scratch)
        process = ServiceProcess.worker(
            f"{version.name}-fanout", version.env(config), "fanout", root=version.root, log_path=version.log(config, "fanout")
        )
        process.start()
        try:
            return asyncio.run(_relay_rate(ctx.nats_url, config.live_stream_name, live))
        finally:
            process.close()
            asyncio.run(_delete_stream(ctx.nats_url, config.live_stream_name))


async def _relay_rate(nats_url: str, stream: str, live: int, timeout: float = 300) -> float:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # the stream is made by the fan-out when it starts
                count = (await js.stream_info(stream)).state.messages
                now = time.perf_counter()
                if count and first is None:
                    first = (now, count)
                if count >= live and first is not None:
                    return (count - first[1]) / max(now - first[0], 1e-6)
            await asyncio.sleep(0.01)  # the poll interval of this bounded wait
        raise RuntimeError(f"the fan-out did not relay {live} live events within {timeout:.0f}s")
    finally:
        await nc.close()


async def _delete_stream(url: str, name: str) -> None:
    nc = await nats.connect(url)
    with contextlib.suppress(Exception):
        await nc.jetstream().delete_stream(name)
    await nc.close()


# -- the table ---------------------------------------------------------------------------------


def both(versions: list[Version], measure: Callable[[Version], float]) -> tuple[float, float]:
    before, after = (measure(v) for v in versions)
    return before, after


def run(ctx: BenchContext) -> Iterator[str]:
    with checkout(BEFORE) as before_root, tempfile.TemporaryDirectory(prefix="squadops-bench-ba-") as scratch:
        before, after = Version("before", before_root), Version("after", ROOT)
        versions = [before, after]
        yield f"before: {BEFORE} ({before_root}); after: this checkout ({ROOT})"
        figures: list[Figure] = []

        launches = [launch_figures(ctx, v, scratch) for v in versions]
        figures.append(Figure("launch p50 (HTTP, PostgreSQL)", "ms", False, launches[0][0], launches[1][0]))
        figures.append(Figure("launch p99 (HTTP, PostgreSQL)", "ms", False, launches[0][1], launches[1][1]))
        yield figures[-1].row()

        sse = [sse_figures(ctx, v, scratch) for v in versions]
        lost = [SSE_SAMPLES - len(s) for s in sse]
        figures.append(Figure(f"append -> SSE p99 ({SSE_SAMPLES} at {SSE_RATE:.0f}/s)", "ms", False, *(percentile(s, 99) for s in sse)))
        yield figures[-1].row() + (f"  (not received: before {lost[0]}, after {lost[1]})" if any(lost) else "")

        with ctx.postgres() as store_url:
            facts = inputs(before, "feed", store_url, FEED_RUNS, FEED_EVENTS)
            yield f"feed store (written by {BEFORE}): {facts['runs']:,} runs, {facts['events']:,} events"
            stored = [store_figures(ctx, v, store_url, facts, scratch) for v in versions]
        figures.append(Figure("rebuild, every read model (CLI)", "events/s", True, stored[0]["rebuild"], stored[1]["rebuild"]))
        figures.append(Figure("feed p50 (HTTP, 50 agents)", "ms", False, stored[0]["feed_p50"], stored[1]["feed_p50"]))
        figures.append(Figure("feed p99 (HTTP, 50 agents)", "ms", False, stored[0]["feed_p99"], stored[1]["feed_p99"]))
        figures.append(Figure("feed throughput (8 connections)", "req/s", True, stored[0]["feed_rate"], stored[1]["feed_rate"]))
        yield from (f.row() for f in figures[-4:])

        lag = both(versions, lambda v: lag_figures(ctx, v, before, scratch))
        figures.append(Figure(f"projection lag p99 ({LAG_RATE:,.0f} ev/s)", "ms", False, *lag))
        yield figures[-1].row()

        with ctx.postgres() as backlog_url:
            facts = inputs(before, "backlog", backlog_url, BACKLOG)
            live = int(facts["live"])  # type: ignore[call-overload]
            fanout = both(versions, lambda v: fanout_figures(ctx, v, backlog_url, live, scratch))
        figures.append(Figure(f"fan-out ({live:,} live events)", "events/s", True, *fanout))
        yield figures[-1].row()

        yield "=" * 90
        yield f"{'figure':<34} {'before':>12} {'after':>12} {'unit':<10} after/before"
        yield from (f.row() for f in figures)
        worse = [f.name for f in figures if "WORSE" in f.row()]
        yield f"worse by more than 10%: {', '.join(worse) if worse else 'none'}"

"""Scale-out: two ticker and two projector processes on one PostgreSQL against one of each.

The same load for both set-ups, each on a fresh database: runs queued for execution,
ticker processes driving them through the simulator as fast as they can
(``SQUADOPS_TICK_SECONDS`` 0.02), projector processes keeping every read model. Measured
over the same window after a warm-up: events appended per second (the log's head) and
events projected per second (the slowest read model's position). The factor is two of
each over one of each; 2.0 would be linear. Every append takes the event table's lock
(the order of notification ids is the order of commits), so appends are serialised by
design whatever the number of tickers.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bench_scale import processes, settings_for
from bench.context import BenchContext
from bench.scale_support import ACTOR, QUICK, TENANT, project
from workers.bootstrap import build, read_projectors

PROJECTS = 40
RUNS_PER_PROJECT = 5  # each project's workspace has its own slots
SUITS = 12
WARM_UP = 8.0 if QUICK else 15.0
WINDOW = 12.0 if QUICK else 40.0


def measure(ctx: BenchContext, tickers: int, projectors: int) -> tuple[float, float]:
    """(appended events/s, projected events/s) for one set-up."""
    with ctx.postgres() as url, tempfile.TemporaryDirectory() as scratch:
        settings = settings_for(url, ctx).replace(tick_seconds=0.02, max_active_runs=PROJECTS * RUNS_PER_PROJECT)
        app = build(settings)
        names = [p.name for p in read_projectors()]
        try:
            for p in range(PROJECTS):
                app.projects.create_project(tenant=TENANT, request=project(f"scale-{p}", SUITS), created_by=ACTOR)
            for p in range(PROJECTS):
                for _ in range(RUNS_PER_PROJECT):
                    run, _ = app.studio.runs.launch_run(
                        tenant=TENANT, template_id="delivery-core", project_slug=f"scale-{p}", launched_by=ACTOR
                    )
                    app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by=ACTOR)
            spec = {f"projector-{i}": "projector" for i in range(projectors)}
            spec |= {f"ticker-{i}": "ticker" for i in range(tickers)}
            env_extra = {"SQUADOPS_TICK_SECONDS": "0.02", "SQUADOPS_MAX_ACTIVE_RUNS": str(PROJECTS * RUNS_PER_PROJECT)}
            with processes(settings, spec, Path(scratch), extra=env_extra):
                time.sleep(WARM_UP)

                def point() -> tuple[float, int, int]:
                    positions = app.store.positions()
                    return time.perf_counter(), app.event_store.max_position(), min(positions.get(n, 0) for n in names)

                t0, head0, low0 = point()
                time.sleep(WINDOW)
                t1, head1, low1 = point()
        finally:
            app.close()
    return (head1 - head0) / (t1 - t0), (low1 - low0) / (t1 - t0)


def run(ctx: BenchContext) -> Iterator[str]:
    one = measure(ctx, 1, 1)
    yield f"1 ticker + 1 projector:   {one[0]:,.0f} events/s appended, {one[1]:,.0f} events/s projected"
    two = measure(ctx, 2, 2)
    yield f"2 tickers + 2 projectors: {two[0]:,.0f} events/s appended, {two[1]:,.0f} events/s projected"
    yield (
        f"scale-out factor (two of each / one of each): appended x{two[0] / one[0]:.2f}, "
        f"projected x{two[1] / one[1]:.2f} (linear would be x2.00)"
    )

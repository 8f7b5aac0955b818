"""The stored feed composed for every touched run at once, and rebuilt from its stored sources.

A pass gathers the documents of all the runs its batches touched from the batch, the
runner's memory and the store in one or two round trips; on both stores, across any batch
edges and with the runner's memory lost (a restart), the stored feed must still be the
composed feed byte for byte. A rebuild composes every run from the source read models as
stored, while the live runner goes on: the runs that events touched meanwhile are composed
again before the swap, so the swapped-in feed equals the composition and a live projection
from scratch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from api.studio.feed import FeedReads
from domain.shared.event_store import EventStore
from projections.engine.pg_store import PostgresDocStore
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource, ProjectionRunner
from projections.engine.store import DocStore, SqliteDocStore
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT
from projections.studio.feed_doc import FEED, FeedProjector, feed_doc_key
from projections.studio.time_travel import EventSelector, TimeTravel
from tests.conftest import settings_for
from tests.feed_scenarios import ACTOR, TENANT, Scenario, apply_all, launch
from tests.service.recovery_support import DEMO_LIKE
from workers.bootstrap import Services, eventsourcing_env, read_projectors, wire_services
from workers.planes.simulator import FaultRates, SimulatorPlane


@contextmanager
def world(url: str) -> Iterator[tuple[Services, DocStore, FeedReads]]:
    settings = settings_for(url)
    app = wire_services(EventStore(eventsourcing_env(settings)))
    store: DocStore = PostgresDocStore(url) if settings.is_postgres else SqliteDocStore(Path(settings.sqlite_path))
    try:
        reads = FeedReads(store, TimeTravel(EventSelector(app.event_store)), app.event_store.max_position)
        yield app, store, reads
    finally:
        store.close()
        app.event_store.close()


def runner(app: Services, store: DocStore, page_size: int) -> ProjectionRunner:
    return ProjectionRunner(NotificationSource(app.event_store), store, read_projectors(), page_size=page_size)


def drain(live: ProjectionRunner) -> None:
    while live.run_once():
        pass


def assert_every_run_served_as_composed(app: Services, store: DocStore, reads: FeedReads, slug: str, runs: list[str]) -> None:
    positions = store.positions()
    assert {positions[p.name] for p in read_projectors()} == {app.event_store.max_position()}
    for run_id in runs:
        assert store.get(FEED, feed_doc_key(TENANT, slug, run_id)) is not None  # served stored, not composed
        for limit in (1, 7, DEFAULT_LIMIT, MAX_LIMIT):
            assert reads.feed(TENANT, slug, run_id, limit) == reads.composed_feed(TENANT, slug, run_id, limit), (run_id, limit)


def squad(app: Services, runs: int) -> tuple[str, list[str], Callable[[int], None]]:
    """A project of several runs on the simulator (sessions, logs, workspace leases);
    answers its slug, the runs and a step that ticks some of them."""
    app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by=ACTOR)
    slug = app.projects.get_project(TENANT, str(DEMO_LIKE["project_key"])).project_slug
    plane = SimulatorPlane(faults=FaultRates())
    run_ids = []
    for _ in range(runs):
        run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by=ACTOR)
        app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by=ACTOR)
        run_ids.append(run.run_id)
    app.studio.ticks.tick_runs(plane, start=[(TENANT, r) for r in run_ids])

    def tick(step: int) -> None:
        app.studio.ticks.tick_runs(plane, tick=[(TENANT, r) for r in run_ids[: 1 + step % len(run_ids)]])

    return slug, run_ids, tick


def test_on_postgres_the_stored_feed_of_many_runs_is_the_composed_feed_across_batch_edges(pg_url: str) -> None:
    chance = random.Random(7)
    with world(pg_url) as (app, store, reads):
        slug, run_ids, tick = squad(app, runs=3)
        live = runner(app, store, page_size=13)
        for step in range(30):
            tick(step)
            for _ in range(chance.randint(0, 2)):  # batches end anywhere, several runs in one
                live.run_once()
            if step == 15:  # a restart: the runner's memory of the documents is gone
                live = runner(app, store, page_size=chance.randint(5, 200))
        drain(live)
        assert_every_run_served_as_composed(app, store, reads, slug, run_ids)


def test_a_chat_heavy_run_keeps_its_newest_lines_across_sealed_chunks_on_postgres(pg_url: str) -> None:
    with world(pg_url) as (app, store, reads):
        first = launch(app, {"project_key": "acme"})
        other = Scenario(
            app,
            app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by=ACTOR)[0].run_id,
            {"project_key": "acme"},
        )
        live = runner(app, store, page_size=9)
        for round_ in range(12):  # far more lines than a lane keeps: chunks sealed and dropped
            apply_all(first, [("say", i % 3) for i in range(25)])
            apply_all(other, [("say", 0)] * (round_ % 3))
            live.run_once()
        drain(live)
        assert_every_run_served_as_composed(app, store, reads, "acme", [first.run_id, other.run_id])


@pytest.mark.parametrize("runner_moves", [True, False])
def test_a_rebuilt_feed_is_composed_again_for_the_runs_touched_while_it_was_filled(
    database_url: str, runner_moves: bool
) -> None:
    with world(database_url) as (app, store, reads):
        slug, run_ids, tick = squad(app, runs=3)
        live = runner(app, store, page_size=50)
        for step in range(12):
            tick(step)
        drain(live)
        real = store.swap_in
        filled: list[int] = []

        def swap_in(name: str, rows: Any, position: int, catch_up: Any) -> int:
            written = list(rows)  # the shadow is filled from the sources as they were
            for step in range(6):  # then events come in (the workspace mirror's too)
                tick(step + 1)
            if runner_moves:  # and the live runner projects them into the sources and the old feed
                drain(live)
            filled.append(len(written))
            return real(name, written, position, catch_up)

        store.swap_in = swap_in  # type: ignore[method-assign]
        rebuild(store, NotificationSource(app.event_store), [FeedProjector()], page_size=7)
        store.swap_in = real  # type: ignore[method-assign]
        assert filled == [2 * len(run_ids)]
        drain(live)
        assert_every_run_served_as_composed(app, store, reads, slug, run_ids)
        rebuilt = store.dump(FEED)
        rebuild(store, NotificationSource(app.event_store), [FeedProjector()])
        assert store.dump(FEED) == rebuilt

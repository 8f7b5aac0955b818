"""The feed is a stored document: what it answers is what a composition answers, byte for byte.

Live projection runs the real runner over a real store in batches that end anywhere; the
stored feed (served as the endpoint serves it, ``limit`` sliced from the stored answer)
must equal the feed composed from the read models at that moment, for every ``limit``;
a broken surface falls back to its defaults alone; a rebuild, or a feed found behind its
sources, gives the same bytes again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.studio.feed import FeedReads
from domain.shared.event_store import EventStore
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource, ProjectionRunner
from projections.engine.store import Change, DocStore, Row, SqliteDocStore
from projections.studio import feed_doc, surfaces
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT
from projections.studio.feed_doc import FEED, FeedProjector, feed_doc_key, feed_max_key, slice_feed
from projections.studio.surfaces import surfaces_doc_key
from projections.studio.time_travel import EventSelector, TimeTravel
from tests.conftest import settings_for
from tests.feed_scenarios import (
    ACTOR,
    OPERATIONS,
    TENANT,
    Scenario,
    apply_all,
    launch,
    project_requests,
)
from workers.bootstrap import Services, eventsourcing_env, read_projectors, wire_services

LIMITS = st.lists(st.integers(min_value=1, max_value=MAX_LIMIT), min_size=1, max_size=4)
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def world() -> Iterator[tuple[Services, DocStore, ProjectionRunner, FeedReads]]:
    with tempfile.TemporaryDirectory() as tmp:
        app = wire_services(EventStore(eventsourcing_env(settings_for(f"sqlite:///{Path(tmp) / 'squadops.db'}"))))
        store = SqliteDocStore(Path(tmp) / "squadops.db")
        try:
            runner = ProjectionRunner(NotificationSource(app.event_store), store, read_projectors())
            reads = FeedReads(store, TimeTravel(EventSelector(app.event_store)), app.event_store.max_position)
            yield app, store, runner, reads
        finally:
            store.close()
            app.event_store.close()


def drain(runner: ProjectionRunner) -> None:
    while runner.run_once():
        pass


def stored(store: DocStore, run_id: str, project_slug: str = "acme") -> bytes | None:
    return store.get(FEED, feed_doc_key(TENANT, project_slug, run_id))


def assert_served_as_composed(reads: FeedReads, run_id: str, limits: list[int]) -> None:
    for limit in {*limits, DEFAULT_LIMIT, MAX_LIMIT}:
        served = reads.feed(TENANT, "acme", run_id, limit)
        assert served == reads.composed_feed(TENANT, "acme", run_id, limit), limit


@FAST
@given(
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=5, max_size=40),
    page_size=st.integers(min_value=1, max_value=40),
    passes=st.lists(st.integers(min_value=0, max_value=2), min_size=40, max_size=40),
    limits=LIMITS,
)
def test_the_stored_feed_is_the_composed_feed_byte_for_byte(
    request: dict[str, Any], operations: list[tuple[Any, ...]], page_size: int, passes: list[int], limits: list[int]
) -> None:
    with world() as (app, store, runner, reads):
        runner.page_size = page_size
        scenario = launch(app, request)
        step = iter(passes)

        def project_some() -> None:  # batches end wherever the interleaving puts them
            for _ in range(next(step, 1)):
                runner.run_once()
            if set(runner.positions().values()) == {app.event_store.max_position()}:
                assert_served_as_composed(reads, scenario.run_id, limits)

        apply_all(scenario, operations, after_each=project_some)
        drain(runner)
        assert stored(store, scenario.run_id) is not None  # served from the store, not composed
        assert_served_as_composed(reads, scenario.run_id, limits)
        # time travel keeps its own path and agrees at the head
        for limit in limits:
            past, _ = reads.feed_at(TENANT, "acme", scenario.run_id, limit, position=app.event_store.max_position())
            assert past == reads.feed(TENANT, "acme", scenario.run_id, limit)


@FAST
@given(
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=5, max_size=30),
    page_size=st.integers(min_value=1, max_value=40),
)
def test_a_rebuilt_feed_and_a_feed_found_behind_its_sources_give_the_same_bytes(
    request: dict[str, Any], operations: list[tuple[Any, ...]], page_size: int
) -> None:
    with world() as (app, store, runner, _):
        runner.page_size = page_size
        scenario = launch(app, request)
        apply_all(scenario, operations, after_each=runner.run_once)
        drain(runner)
        live = store.dump(FEED)
        assert live and runner.positions()[FEED] == app.event_store.max_position()
        rebuild(store, NotificationSource(app.event_store), [FeedProjector()], page_size=page_size)
        assert store.dump(FEED) == live
        # Lost: the feed's rows gone and its position back at 0, its sources still at the head.
        # The next pass finds it behind them and composes every run again.
        position = store.position(FEED)
        assert store.commit_many([Change(FEED, position, 0, [], [row.key for row in live])])
        assert store.dump(FEED) == []
        app.studio.runs.get_run(TENANT, scenario.run_id)  # nothing new appended
        drain(runner)
        assert store.dump(FEED) == live
        assert store.position(FEED) == app.event_store.max_position()


def driven(app: Services, runs: int = 2) -> list[Scenario]:
    request = {"project_key": "acme"}
    first = launch(app, request)
    others = [
        Scenario(
            app,
            app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by=ACTOR)[0].run_id,
            request,
        )
        for _ in range(runs - 1)
    ]
    operations = [("start", i) for i in range(4)] + [("say", i) for i in range(6)]
    for scenario in [first, *others]:
        apply_all(scenario, operations)
    return [first, *others]


def test_a_surface_broken_by_its_fold_falls_back_to_its_default_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    with world() as (app, store, runner, reads):
        scenario = driven(app, runs=1)[0]
        drain(runner)
        run_id = scenario.run_id
        before = msgspec.json.decode(reads.feed(TENANT, "acme", run_id, DEFAULT_LIMIT))

        def broken(*_: Any) -> None:
            raise ValueError("a malformed event")

        # the delivery surface's fold of the events that move only the sessions' statuses
        monkeypatch.setitem(surfaces.STATUS_FOLDS, "delivery", broken)
        apply_all(scenario, [("block", 0, "sandbox_missing"), ("say", 1)])  # a blocker is one of them
        drain(runner)
        served = reads.feed(TENANT, "acme", run_id, DEFAULT_LIMIT)
        assert served == stored(store, run_id) == reads.composed_feed(TENANT, "acme", run_id, DEFAULT_LIMIT)
        after = msgspec.json.decode(served)
        assert after["delivery"] == surfaces.DEFAULTS["delivery"]()  # typed default
        for surface in ("source_ref", "proposal", "lineage", "evidence"):  # the other surfaces are intact
            assert after[surface] == before[surface]
        assert after["event_count"] > before["event_count"] > 0
        assert after["progress"]["blocked"] == 1 and after["pixel_agent_count"] == before["pixel_agent_count"]


def test_an_undecodable_document_falls_back_to_its_defaults_alone() -> None:
    with world() as (app, store, runner, reads):
        scenario = driven(app, runs=1)[0]
        drain(runner)
        run_id = scenario.run_id
        before = msgspec.json.decode(reads.feed(TENANT, "acme", run_id, DEFAULT_LIMIT))
        # The run's surfaces document is damaged in the store, and its feed composed again.
        position = store.position("surfaces")
        bad = Row(surfaces_doc_key(TENANT, run_id), f"surfaces/{TENANT}", "", "", "", b'{"delivery": [1, 2')
        assert store.commit_many([Change("surfaces", position, position, [bad], [])])
        assert store.commit_many([Change(FEED, store.position(FEED), 0, [], [])])
        drain(runner)
        served = reads.feed(TENANT, "acme", run_id, DEFAULT_LIMIT)
        assert served == stored(store, run_id) == reads.composed_feed(TENANT, "acme", run_id, DEFAULT_LIMIT)
        after = msgspec.json.decode(served)
        for surface in ("delivery", "source_ref", "proposal", "queue", "lineage", "delivery_feedback", "evidence"):
            assert after[surface] == surfaces.DEFAULTS[surface](), surface
        for part in ("pixel_agents", "progress", "run_cost", "live_events", "runtime_logs", "event_count"):
            assert after[part] == before[part], part


def test_a_run_whose_feed_cannot_be_composed_keeps_no_stored_feed_and_the_others_are_untouched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with world() as (app, store, runner, reads):
        broken, healthy = driven(app, runs=2)
        real = feed_doc.compose_feed

        def compose(tenant: str, run_id: str, *args: Any, **kwargs: Any) -> bytes:
            if run_id == broken.run_id:
                raise ValueError("this run's documents cannot be composed")
            return real(tenant, run_id, *args, **kwargs)

        monkeypatch.setattr(feed_doc, "compose_feed", compose)
        drain(runner)
        assert runner.positions()[FEED] == app.event_store.max_position()  # the feed is not stuck
        assert stored(store, broken.run_id) is None and store.get(FEED, feed_max_key(TENANT, "acme", broken.run_id)) is None
        assert stored(store, healthy.run_id) is not None
        assert_served_as_composed(reads, healthy.run_id, [3])
        # The broken run's reads compose on request, with the same per-surface rule.
        assert reads.feed(TENANT, "acme", broken.run_id, 5) == reads.composed_feed(TENANT, "acme", broken.run_id, 5)


def test_limit_slices_the_stored_answer() -> None:
    with world() as (app, store, runner, reads):
        scenario = driven(app, runs=1)[0]
        apply_all(scenario, [("say", i) for i in range(60)])
        drain(runner)
        body = store.get(FEED, feed_max_key(TENANT, "acme", scenario.run_id))
        assert body is not None
        full = msgspec.json.decode(body)
        assert len(full["live_events"]) > DEFAULT_LIMIT  # more than the default: slicing matters
        for limit in (1, 2, 17, DEFAULT_LIMIT, DEFAULT_LIMIT + 1, len(full["live_events"]), MAX_LIMIT):
            cut = slice_feed(body, limit)
            assert cut == reads.composed_feed(TENANT, "acme", scenario.run_id, limit)
            feed = msgspec.json.decode(cut)
            assert feed["live_events"] == full["live_events"][:limit]
            assert feed["runtime_logs"] == full["runtime_logs"][:limit]
            assert feed["runtime_log_count"] == len(feed["runtime_logs"]) <= limit
            assert {k: v for k, v in feed.items() if k not in ("live_events", "runtime_logs", "runtime_log_count")} == {
                k: v for k, v in full.items() if k not in ("live_events", "runtime_logs", "runtime_log_count")
            }
        assert stored(store, scenario.run_id) == slice_feed(body, DEFAULT_LIMIT)


def test_a_read_naming_another_project_or_an_unknown_run_finds_no_stored_feed() -> None:
    with world() as (app, _, runner, reads):
        scenario = driven(app, runs=1)[0]
        app.projects.create_project(tenant=TENANT, request={"project_key": "other"}, created_by=ACTOR)
        drain(runner)
        for project_slug, run_id in (("other", scenario.run_id), ("acme", "run-nope")):
            with pytest.raises(Exception) as missing:
                reads.feed(TENANT, project_slug, run_id, DEFAULT_LIMIT)
            assert getattr(missing.value, "code", "") == "run_not_found"
        with pytest.raises(Exception) as no_project:
            reads.feed(TENANT, "nope", scenario.run_id, DEFAULT_LIMIT)
        assert getattr(no_project.value, "code", "") == "project_not_found"


def test_workspace_changes_reach_the_stored_feed_of_every_run_of_the_project() -> None:
    from tests.service.recovery_support import DEMO_LIKE
    from workers.planes.simulator import FaultRates, SimulatorPlane

    with world() as (app, store, runner, reads):
        app.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by=ACTOR)
        slug = app.projects.get_project(TENANT, str(DEMO_LIKE["project_key"])).project_slug
        plane = SimulatorPlane(faults=FaultRates())
        run_ids = []
        for _ in range(2):
            run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by=ACTOR)
            app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by=ACTOR)
            app.studio.ticks.tick_runs(plane, start=[(TENANT, run.run_id)])
            run_ids.append(run.run_id)
        seen = set()
        for tick in range(40):
            app.studio.ticks.tick_runs(plane, tick=[(TENANT, r) for r in run_ids[: 1 + tick % 2]])  # one run, then both
            drain(runner)
            for run_id in run_ids:
                served = reads.feed(TENANT, slug, run_id, DEFAULT_LIMIT)
                assert served == store.get(FEED, feed_doc_key(TENANT, slug, run_id))
                assert served == reads.composed_feed(TENANT, slug, run_id, DEFAULT_LIMIT)
                mirror = msgspec.json.decode(served)["execution_workspace_mirror"]
                seen |= {(w["workspace_name"], w["workspace_status"]) for w in mirror["workspaces"]}
        assert seen  # the mirror took part


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    operations=st.lists(OPERATIONS, min_size=5, max_size=30),
    sizes=st.tuples(st.integers(min_value=1, max_value=20), st.integers(min_value=1, max_value=20)),
    turns=st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_two_runners_on_one_store_leave_the_feed_a_rebuild_gives(
    operations: list[tuple[Any, ...]], sizes: tuple[int, int], turns: list[bool]
) -> None:
    with world() as (app, store, first, _):
        second = ProjectionRunner(NotificationSource(app.event_store), store, read_projectors(), page_size=sizes[1])
        first.page_size = sizes[0]
        scenario = launch(app, {"project_key": "acme"})
        turn = iter(turns)
        apply_all(scenario, operations, after_each=lambda: (first if next(turn, True) else second).run_once())
        while first.run_once() + second.run_once():
            pass
        live = store.dump(FEED)
        rebuild(store, NotificationSource(app.event_store), [FeedProjector()])
        assert store.dump(FEED) == live

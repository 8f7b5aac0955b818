"""The projection runner on both stores: exactly once, resumable, contiguous, isolated."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from projections.engine.docs import Projector
from projections.engine.envelope import Envelope
from projections.engine.runner import NotificationSource, ProjectionRunner, contiguous
from projections.engine.store import DocStore
from projections.studio.feed_doc import FEED, SOURCES
from tests.conftest import settings_for
from tests.helpers import DEMO_LIKE, burn_a_position, drive_runs, eventually, log_positions
from workers.bootstrap import Container, Services, build, read_projectors


def simulate(app: Services, runs: int = 3, ticks: int = 40) -> list[str]:
    return drive_runs(app, runs=runs, ticks=ticks)


def folded_rows(app: Services, projector: Projector) -> list[tuple]:
    """The read model folded in memory from position 0: what live projection must equal."""
    docs = projector.memory_docs()  # a derived model folds its sources in its own
    for env in NotificationSource(app.event_store).read(1, 10**9):
        if projector.wants(env):
            projector.apply(env, docs)
    return [tuple(r) for r in docs.rows()]


def runner_for(container: Container, **kw: object) -> ProjectionRunner:
    return ProjectionRunner(NotificationSource(container.event_store), container.store, read_projectors(), **kw)


@pytest.mark.parametrize("cache_bytes", [64 << 20, 40_000, 0], ids=["remembered", "mostly-evicted", "no-memory"])
def test_live_projection_equals_a_fold_from_zero(container: Container, cache_bytes: int) -> None:
    simulate(container)
    # odd pages: batch edges must not matter; nor what the runner remembers between passes
    runner = runner_for(container, page_size=97, cache_bytes=cache_bytes)
    while runner.run_once():
        pass
    top = container.event_store.max_position()
    positions = container.store.positions()
    assert {positions[p.name] for p in read_projectors()} == {top}
    for projector in read_projectors():
        live = [tuple(r) for r in container.store.dump(projector.name)]
        assert live == folded_rows(container, projector), projector.name


def test_a_crashed_runner_resumes_where_it_stopped(container: Container) -> None:
    simulate(container, runs=2, ticks=20)
    first = runner_for(container, page_size=10)  # idle ticks append nothing: a short log
    first.run_once()
    first.run_once()
    partway = container.store.position("runs")
    assert 0 < partway < container.event_store.max_position()
    simulate(container, runs=1, ticks=10)
    second = runner_for(container, page_size=50)  # a new process, same store
    while second.run_once():
        pass
    for projector in read_projectors():
        assert [tuple(r) for r in container.store.dump(projector.name)] == folded_rows(container, projector)


def test_two_runners_at_once_apply_each_event_once(container: Container) -> None:
    simulate(container, runs=3, ticks=30)
    runners = [runner_for(container, page_size=40) for _ in range(2)]

    def drain(runner: ProjectionRunner) -> None:
        while runner.run_once():
            pass

    threads = [threading.Thread(target=drain, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    drain(runners[0])
    for projector in read_projectors():
        assert [tuple(r) for r in container.store.dump(projector.name)] == folded_rows(container, projector)


class Exploding(Projector):
    name = "exploding"
    topics = frozenset({"Run.ExecutionRequested"})

    def apply(self, env: Envelope, docs) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("broken projector")


def test_a_failing_projector_does_not_stop_the_others(container: Container) -> None:
    simulate(container, runs=1, ticks=5)
    projectors = [*read_projectors(), Exploding()]
    runner = ProjectionRunner(NotificationSource(container.event_store), container.store, projectors)
    while runner.run_once():
        pass
    top = container.event_store.max_position()
    positions = container.store.positions()
    assert positions["runs"] == positions["projects"] == top
    assert positions["exploding"] < top
    status = runner.stats.statuses["exploding"]
    assert status.failures >= 1 and "broken projector" in status.last_error


class Watching(Projector):
    """Notes, as it folds each event, where the feed and its sources stand in the store."""

    name = "watching"

    def __init__(self, store: DocStore, names: tuple[str, ...]) -> None:
        self.store, self.names, self.seen = store, names, []  # type: list[tuple[int, dict[str, int]]]

    def apply(self, env: Envelope, docs) -> None:  # type: ignore[no-untyped-def]
        stored = self.store.positions()
        self.seen.append((env.position, {n: stored.get(n, 0) for n in self.names}))


def test_the_feed_and_its_sources_are_committed_before_the_other_read_models_fold(container: Container) -> None:
    """The office's feed moves first: a pass commits the derived feed with what it is made
    of, then folds and commits the rest (the transcripts, the pulls, ...) after it."""
    simulate(container, runs=1, ticks=5)
    names = (FEED, *SOURCES)
    watching = Watching(container.store, names)
    runner = ProjectionRunner(NotificationSource(container.event_store), container.store,
                              [*read_projectors(), watching], page_size=10)
    passes = 0
    while runner.run_once():
        passes += 1
    assert passes >= 2 and watching.seen
    for position, stored in watching.seen:  # every event it folded: the feed's models already past it
        assert all(at >= position for at in stored.values()), (position, stored)
    top = container.event_store.max_position()
    assert set(runner.positions().values()) == {top}


class GappySource:
    """A log whose position 3 is not visible yet (a transaction still in flight)."""

    def __init__(self, envs: list[Envelope]) -> None:
        self.envs = envs

    def read(self, start: int, limit: int, stop: int | None = None) -> list[Envelope]:
        return [e for e in self.envs if e.position >= start][:limit]

    def max_position(self) -> int:
        return max(e.position for e in self.envs)


class Counting(Projector):
    name = "counting"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def apply(self, env: Envelope, docs) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(env.position)


def env(position: int) -> Envelope:
    return Envelope(position=position, originator_id="run:t:r", version=position, kind="Run.X", at="")


def test_contiguous_prefix() -> None:
    assert contiguous([env(4), env(5), env(7)], after=3) == 2
    assert contiguous([env(5)], after=3) == 0
    assert contiguous([], after=3) == 0


def test_runner_waits_on_a_gap_then_accepts_it_after_the_timeout(sqlite_url: str) -> None:
    container = build(settings_for(sqlite_url))
    try:
        clock = {"now": 0.0}
        projector = Counting()
        source = GappySource([env(1), env(2), env(4), env(5)])
        runner = ProjectionRunner(
            source, container.store, [projector], gap_timeout=5.0, clock=lambda: clock["now"]  # type: ignore[arg-type]
        )
        runner.run_once()
        assert projector.seen == [1, 2] and container.store.position("counting") == 2
        assert runner.run_once() == 0  # position 3 may still commit: wait
        clock["now"] = 4.0
        assert runner.run_once() == 0
        source.envs.insert(2, env(3))  # it committed: no gap after all
        runner.run_once()
        assert projector.seen == [1, 2, 3, 4, 5]
        source.envs.extend([env(7), env(8)])  # 6 rolled back: never fills
        clock["now"] = 10.0
        assert runner.run_once() == 0
        clock["now"] = 16.0
        runner.run_once()
        assert projector.seen == [1, 2, 3, 4, 5, 7, 8] and runner.stats.gaps_accepted == 1
    finally:
        container.close()


def listening(url: str, channel: str) -> bool:
    """Whether a session of this database has run ``LISTEN`` on ``channel`` (and stays)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
            (f'LISTEN "{channel}"',),
        ).fetchone()
    return bool(row and row[0])


def test_postgres_listen_wakes_a_runner_in_another_process(pg_url: str) -> None:
    """An append by another process reaches a runner that would otherwise poll only every 30 s."""
    reader = build(settings_for(pg_url, projection_poll_seconds=30.0))
    writer = build(settings_for(pg_url))
    try:
        reader.runner.poll_seconds = 30.0
        reader.start(("projector",))
        channel = reader.event_store.recorder.channel_name  # type: ignore[attr-defined]
        eventually(lambda: listening(pg_url, channel), timeout=10, interval=0.02)
        writer.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
        target = writer.event_store.max_position()
        started = time.monotonic()
        eventually(lambda: reader.store.position("projects") >= target, timeout=5, interval=0.01)
        assert time.monotonic() - started < 2.0
    finally:
        reader.close()
        writer.close()


@pytest.fixture
def store(container: Container) -> DocStore:
    return container.store


def test_commit_is_guarded_by_the_expected_position(store: DocStore) -> None:
    store.ensure("guarded")
    assert store.commit("guarded", 0, 5, [], [])
    assert not store.commit("guarded", 0, 9, [], [])  # someone else moved it to 5
    assert store.position("guarded") == 5


def test_a_rolled_back_append_leaves_a_gap_that_is_accepted_at_once(pg_url: str) -> None:
    """A version conflict burns a position; no append is in flight, so no waiting."""
    container = build(settings_for(pg_url, projection_gap_timeout_seconds=60.0))
    try:
        burn_a_position(container)
        positions = log_positions(container)
        runner = runner_for(container, gap_timeout=60.0)
        started = time.monotonic()
        while runner.run_once():
            pass
        assert container.store.position("runs") == positions[-1]
        assert time.monotonic() - started < 5
        assert runner.stats.gaps_accepted >= 1
    finally:
        container.close()

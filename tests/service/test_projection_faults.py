"""Exactly once through failed commits: live read models equal a rebuild, byte for byte.

A commit can fail before it reaches the database, inside its transaction (the connection
cut mid-write: the database rolls it back) or after the database committed (the answer
lost on the way back). Whichever it is, the runner must retry the page from what the
database holds, never from documents its failed fold left mutated in memory.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.engine.pg_store import PostgresDocStore
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource, ProjectionRunner
from projections.engine.store import Change, DocStore, Row
from tests.feed_scenarios import OPERATIONS, apply_all, launch, project_requests
from tests.helpers import drive_runs
from tests.service.test_rebuild import dumps, parts
from workers.bootstrap import Container, read_projectors

MODES = ("before", "inside", "after")


class CommitCut(Exception):
    """The injected failure, as the runner would see a dropped connection."""


class CommitFaults:
    """Fails a share of the store's commits, each at a random point of the commit."""

    def __init__(self, store: DocStore, rng: random.Random, rate: float) -> None:
        self.store, self.rng, self.rate = store, rng, rate
        self.injected = {mode: 0 for mode in MODES}
        self._commit_many = store.commit_many
        self._write_rows = store._write_rows  # type: ignore[attr-defined]
        self._cut_inside = False
        store.commit_many = self.commit_many  # type: ignore[method-assign]
        store._write_rows = self.write_rows  # type: ignore[attr-defined]

    def commit_many(self, changes: Sequence[Change]) -> bool:
        mode = self.rng.choice(MODES) if self.rng.random() < self.rate else ""
        if mode:
            self.injected[mode] += 1
        if mode == "before":
            raise CommitCut("connection lost before the commit")
        self._cut_inside = mode == "inside"
        try:
            committed = self._commit_many(changes)
        finally:
            self._cut_inside = False
        if mode == "after":
            raise CommitCut("connection lost after the commit, before its answer")
        return committed

    def write_rows(self, conn: Any, table: str, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        self._write_rows(conn, table, upserts, deletes)
        if self._cut_inside:  # some rows written, the transaction still open
            self._cut_inside = False
            if isinstance(self.store, PostgresDocStore):
                conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # a real cut
            raise CommitCut("connection cut inside the transaction")

    def stop(self) -> None:
        self.rate = 0.0


def drain(runner: ProjectionRunner, top: Callable[[], int], budget: int = 5000) -> None:
    """Runs passes as the runner's loop does (a failed pass is retried) until caught up."""
    for _ in range(budget):
        try:
            runner.run_once()
        except Exception:  # the loop logs and retries; so do we
            continue
        if set(runner.positions().values()) == {top()}:
            return
    raise AssertionError(f"not caught up after {budget} passes: {runner.positions()} < {top()}")


def equals_rebuild(store: DocStore, source: NotificationSource) -> None:
    live = dumps(store)
    rebuild(store, source, read_projectors(), page_size=13)
    rebuilt = dumps(store)
    for name in live:
        assert live[name] == rebuilt[name], f"{name}: live differs from a rebuild"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=5, max_size=40),
    page_size=st.integers(min_value=1, max_value=30),
    seed=st.integers(min_value=0, max_value=2**32),
    rate=st.floats(min_value=0.2, max_value=0.7),
)
def test_failed_commits_at_random_points_apply_nothing_twice(
    request: dict[str, Any], operations: list[tuple[Any, ...]], page_size: int, seed: int, rate: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app, store = parts(f"sqlite:///{Path(tmp) / 'squadops.db'}")
        try:
            source = NotificationSource(app.event_store)
            faults = CommitFaults(store, random.Random(seed), rate)
            runner = ProjectionRunner(source, store, read_projectors(), page_size=page_size)
            scenario = launch(app, request)

            def project_some() -> None:
                for _ in range(2):
                    with contextlib.suppress(CommitCut, sqlite3.Error):
                        runner.run_once()

            apply_all(scenario, operations, after_each=project_some)
            drain(runner, app.event_store.max_position)
            faults.stop()
            equals_rebuild(store, source)
        finally:
            store.close()
            app.event_store.close()


def test_connections_cut_mid_pass_on_both_databases(container: Container) -> None:
    """Simulated runs, small pages, a third of the commits cut: still exactly once."""
    app, store = container, container.store
    source = NotificationSource(app.event_store)
    injected = dict.fromkeys(MODES, 0)
    for seed in (1, 2, 3):
        drive_runs(app, runs=2, ticks=15)  # more events each round, over the same store
        faults = CommitFaults(store, random.Random(seed), 0.35)
        runner = ProjectionRunner(source, store, read_projectors(), page_size=7)
        drain(runner, app.event_store.max_position)
        faults.stop()
        equals_rebuild(store, source)
        for mode, count in faults.injected.items():
            injected[mode] += count
    assert sum(injected.values()) >= 15 and all(injected.values()), injected

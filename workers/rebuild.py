"""Rebuilding read models with several processes: one group of projectors each.

Each process reads the log itself and rebuilds its own read models (each swapped in on its
own, blue/green, see ``projections.engine.rebuild``), so the folds use every core instead of
taking turns under one interpreter lock. Groups are balanced by how much each projector
costs per event. Each process keeps its documents within ``SQUADOPS_REBUILD_MEMORY_MIB``
(the cold ones wait in the shadow tables). A derived read model (the stored feed) reads no event: it is composed
from its sources as stored, so it is rebuilt once the groups have swapped theirs in.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import queue
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from projections.engine.pg_store import PostgresDocStore
from projections.engine.rebuild import Progress, RebuildReport, rebuild
from projections.engine.runner import NotificationSource
from projections.engine.store import DocStore, SqliteDocStore
from workers.settings import Settings

# Relative cost of each read model's rebuild, its fold and its rows: the CPU a process rebuilding
# it alone spends beyond reading the log, in tenths of a second per 110k events (the quick
# before/after bench's log of simulated 50-agent runs). The others cost about 1 (0.05-0.1 s).
WEIGHTS = {"runs": 6.0, "pixels": 8.0, "transcripts": 8.5, "log_dock": 7.0, "surfaces": 5.0, "fleet": 5.0,
           "projects": 0.5, "workspace_mirror": 0.5}


def derived_names() -> set[str]:
    """The read models composed from others (``DerivedProjector``), not folded from events."""
    from projections.engine.docs import DerivedProjector
    from workers.bootstrap import read_projectors

    return {p.name for p in read_projectors() if isinstance(p, DerivedProjector)}


def groups(names: Sequence[str], workers: int) -> list[list[str]]:
    """``names`` in at most ``workers`` groups of about equal cost (heaviest first)."""
    count = max(1, min(workers, len(names)))
    bins: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(count)]
    for name in sorted(names, key=lambda n: -WEIGHTS.get(n, 1.0)):
        index = min(range(count), key=lambda i: bins[i][0])
        cost, members = bins[index]
        bins[index] = (cost + WEIGHTS.get(name, 1.0), [*members, name])
    order = {name: i for i, name in enumerate(names)}
    return [sorted(members, key=order.__getitem__) for _, members in bins if members]


# A rebuild reads the whole log in large pages, offline: the request path's statement
# timeout (``SQUADOPS_DATABASE_STATEMENT_SECONDS``, 1.5 s) would stop a page read of a big
# log on a busy server, so its statements get this long instead.
REBUILD_STATEMENT_SECONDS = 300.0


def open_parts(settings: Settings, *, create_tables: bool = True) -> tuple[Any, DocStore]:
    """The event store and the read-model store, for a rebuild or a check.

    Rebuild processes run side by side: only the process that starts them creates the
    event store's tables (two PostgreSQL sessions creating them at once can fail with
    "tuple concurrently updated"); each group then opens them with ``create_tables=False``.
    """
    from domain.shared.event_store import EventStore
    from workers.bootstrap import eventsourcing_env

    settings = settings.replace(
        database_statement_seconds=max(settings.database_statement_seconds, REBUILD_STATEMENT_SECONDS)
    )
    env = eventsourcing_env(settings)
    if not create_tables:
        env["CREATE_TABLE"] = "n"
    event_store = EventStore(env)
    store: DocStore = (
        PostgresDocStore(
            settings.database_url, min_size=settings.read_model_pool_min, max_size=settings.read_model_pool_max
        )
        if settings.is_postgres
        else SqliteDocStore(Path(settings.sqlite_path))
    )
    return event_store, store


# What a group process imports before it folds: loaded once, by the fork server, and not again
# by each group process (a fresh interpreter importing the service costs about a second of CPU).
PRELOAD = ["workers.rebuild", "workers.bootstrap", "domain.shared.event_store", "projections.engine.pg_store"]


def pool_context() -> Any:
    """The processes of the groups: forked from a fork server that has loaded ``PRELOAD``
    (started now, so its imports overlap the caller's work until the first group starts).
    The server is a fresh, single-threaded process, so forking it is safe, unlike forking
    the caller (its pools' threads)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()
    return context


def memory_bytes(settings: Settings) -> int | None:
    """The budget of one rebuild process's documents (None: unbounded)."""
    return settings.rebuild_memory_mib << 20 if settings.rebuild_memory_mib > 0 else None


def rebuild_group(settings: Settings, names: Sequence[str], index: int, progress: Any = None) -> RebuildReport:
    """Rebuilds the named read models in this process (a pool worker, or the caller)."""
    from workers.bootstrap import read_projectors

    event_store, store = open_parts(settings, create_tables=False)
    try:
        projectors = [p for p in read_projectors() if p.name in names]

        def report(*figures: Any) -> None:
            if progress is not None:
                progress.put((index, figures))

        return rebuild(
            store,
            NotificationSource(event_store),
            projectors,
            page_size=settings.rebuild_page_size,
            progress=report,
            memory_bytes=memory_bytes(settings),
        )
    finally:
        store.close()
        event_store.close()


def rebuild_parallel(
    settings: Settings, names: Sequence[str], *, workers: int, progress: Progress | None = None
) -> RebuildReport:
    """Rebuilds ``names`` with up to ``workers`` processes; one report for them all."""
    started = time.perf_counter()
    derived = [n for n in names if n in derived_names()]
    parts = groups([n for n in names if n not in derived], workers)
    context = pool_context() if len(parts) > 1 else None  # its modules load while the tables are made
    event_store, store = open_parts(settings)  # the tables, once, before the groups start
    try:
        for name in names:
            store.ensure(name)
    finally:
        store.close()
        event_store.close()
    if context is None:  # one process: the engine composes the derived ones after the others
        return rebuild_group(settings, [*(parts[0] if parts else []), *derived], 0, _Direct(progress, started))
    pool = ProcessPoolExecutor(len(parts), mp_context=context)
    try:
        with context.Manager() as manager:
            shared = manager.Queue()
            futures = [pool.submit(rebuild_group, settings, group, i, shared) for i, group in enumerate(parts)]
            latest: dict[int, tuple[Any, ...]] = {}
            while not all(f.done() for f in futures):
                _drain(shared, latest, progress, started, wait=0.2)
            reports = [f.result() for f in futures]
            _drain(shared, latest, progress, started)
        pool.shutdown(wait=False)  # the group processes wind down while the derived models are composed
        if derived:  # composed from the sources the groups have just swapped in
            reports.append(rebuild_group(settings, derived, len(parts)))
    finally:
        pool.shutdown(wait=True)
    return RebuildReport(
        tuple(n for n in names if any(n in r.names for r in reports)),
        max(r.events for r in reports),
        time.perf_counter() - started,
        min(r.position for r in reports),
        sum(r.spilled for r in reports),
        sum(r.reloaded for r in reports),
    )


class _Direct:
    """One group in this process: its figures go to ``progress`` as they come, not at the end."""

    def __init__(self, progress: Progress | None, started: float) -> None:
        self.progress, self.started = progress, started

    def put(self, item: tuple[int, tuple[Any, ...]]) -> None:
        if self.progress is not None:
            position, target = item[1][:2]
            self.progress(position, target, position, time.perf_counter() - self.started)


def _drain(
    source: Any, latest: dict[int, tuple[Any, ...]], progress: Progress | None, started: float, wait: float = 0.0
) -> None:
    """Merges the groups' progress: as far as the slowest group, at the pace it took."""
    try:
        item = source.get(timeout=wait) if wait else source.get_nowait()
        while True:
            index, figures = item
            latest[index] = figures
            item = source.get_nowait()
    except queue.Empty:
        pass
    if progress is not None and latest:
        position = min(f[0] for f in latest.values())
        target = max(f[1] for f in latest.values())
        progress(position, target, position, time.perf_counter() - started)

"""Rebuilds read models from the event log, blue/green.

Each read model's shadow table is opened first (``DocStore.open_shadow``); the projectors
fold every event from position 0 into documents in memory (the same pure fold as live
projection), the coldest of them written to the shadow whenever they outgrow the budget
(``projections.engine.spill``); then what is left is written and each shadow is swapped in
atomically (``Shadow.swap``): readers see the old model until the new one is complete,
never a half-built one. Events appended meanwhile are folded in before the swap, the last
ones with the live runner held off, so nothing is missed or applied twice. A rebuild that
fails drops the shadows it has not swapped in: those read models stay as they were.
A derived read model (``DerivedProjector``) is not folded: once the others are swapped in,
it is composed from its sources as stored (``swap_composed``), blue/green as well.

Only read models are touched: side effects (notifications, the NATS fan-out) follow their
own tracking positions and are never re-fired by a rebuild.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from projections.engine.docs import DerivedProjector, Docs, Projector
from projections.engine.envelope import Envelope
from projections.engine.runner import NotificationSource
from projections.engine.spill import SpillDocs, SpillMemory
from projections.engine.store import DocStore, Row, Shadow

Progress = Callable[[int, int, int, float], None]  # (position, target, events, seconds)


@dataclass(frozen=True)
class RebuildReport:
    names: tuple[str, ...]
    events: int
    seconds: float
    position: int
    spilled: int = 0  # documents written to the shadows before the swap (over the budget)
    reloaded: int = 0  # spilled documents read back by the fold

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def read_pages(source: NotificationSource, start: int, stop: int, page_size: int) -> Callable[[], list[Envelope]]:
    """Pages of ``start..stop``, read ahead in a thread so reading overlaps folding."""
    pages: queue.Queue[list[Envelope] | BaseException] = queue.Queue(maxsize=3)

    def reader() -> None:
        position = start - 1
        try:
            while position < stop:
                page = source.read(position + 1, page_size, stop)
                pages.put(page)
                if not page:
                    return
                position = page[-1].position
            pages.put([])
        except BaseException as exc:  # handed to the folding thread, which raises it
            pages.put(exc)

    threading.Thread(target=reader, name="rebuild-reader", daemon=True).start()

    def next_page() -> list[Envelope]:
        item = pages.get()
        if isinstance(item, BaseException):
            raise item
        return item

    return next_page


Route = list[tuple[Callable[..., None], Any, Docs]]


def fold_envelopes(projectors: Sequence[Projector], docs: Mapping[str, Docs]) -> Callable[[list[Envelope]], None]:
    """A fold of pages of events into ``docs``: each event goes to the projectors that want its
    kind, asked once per kind (``Projector.wants`` answers from the kind alone), straight to the
    handler of its class (``Projector.apply``'s lookup, made once per kind and class) unless
    the projector folds in an ``apply`` of its own."""
    routes: dict[str, dict[type, Route]] = {}
    everyone = [(p, docs[p.name]) for p in projectors]

    def route_of(env: Envelope) -> Route:
        route: Route = []
        for p, target in everyone:
            if not p.wants(env):
                continue
            if type(p).apply is not Projector.apply:
                route.append((_applied, p, target))
            elif (handler := p.handler(type(env.event))) is not None:
                route.append((handler, p, target))
        return route

    def fold(page: list[Envelope]) -> None:
        for env in page:
            event = env.event
            by_class = routes.get(env.kind)
            if by_class is None:
                by_class = routes[env.kind] = {}
            route = by_class.get(type(event))
            if route is None:
                route = by_class[type(event)] = route_of(env)
            for handler, p, target in route:
                handler(p, event, env, target)

    return fold


def _applied(projector: Projector, event: Any, env: Envelope, docs: Docs) -> None:
    """A projector with an ``apply`` of its own, called as a handler."""
    projector.apply(env, docs)


def fold_pages(
    source: NotificationSource,
    projectors: Sequence[Projector],
    docs: Mapping[str, Docs],
    start: int,
    stop: int,
    page_size: int,
    on_page: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Folds events ``start..stop`` into ``docs``; answers (last position, events read).
    ``on_page(position, events)`` is called after each page."""
    position, events = start - 1, 0
    if stop < start:
        return position, 0
    fold = fold_envelopes(projectors, docs)
    next_page = read_pages(source, start, stop, page_size)
    while True:
        page = next_page()
        if not page:
            break
        fold(page)
        position = page[-1].position
        events += len(page)
        if on_page is not None:
            on_page(position, events)
    return position, events


def rebuild(
    store: DocStore,
    source: NotificationSource,
    projectors: Sequence[Projector],
    *,
    page_size: int = 10_000,
    progress: Progress | None = None,
    memory_bytes: int | None = None,
) -> RebuildReport:
    """Replays the whole log into ``projectors``' read models and swaps them in; their
    documents stay within ``memory_bytes`` (None: all in memory until the swap)."""
    started = time.perf_counter()
    target = source.max_position()
    derived = [p for p in projectors if isinstance(p, DerivedProjector)]
    projectors = [p for p in projectors if not isinstance(p, DerivedProjector)]
    for projector in (*projectors, *derived):
        store.ensure(projector.name)
    memory = SpillMemory(memory_bytes)
    shadows: list[Shadow] = []
    # The fold allocates millions of small containers, most alive for long (all of them
    # when there is no budget): the cyclic collector would walk that heap again and again
    # for nothing (documents are trees: dropping one frees it without the collector).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for projector in projectors:
            shadows.append(store.open_shadow(projector.name))
        docs = {shadow.name: memory.docs(shadow) for shadow in shadows}

        def on_page(position: int, events: int) -> None:
            memory.settle()
            if progress is not None:
                progress(position, target, events, time.perf_counter() - started)

        position, events = target, 0
        if projectors:
            position, events = fold_pages(source, projectors, docs, 1, target, page_size, on_page)
        # Events appended during the pass: fold them too, outside any lock, until few remain.
        for _ in range(5 if projectors else 0):
            head = source.max_position()
            if head - position <= page_size:
                break
            position, more = fold_pages(source, projectors, docs, position + 1, head, page_size, on_page)
            events += more
        spilled, reloaded = memory.figures()
        caught = 0
        for projector, shadow in zip(projectors, shadows, strict=True):
            caught = max(caught, swap(source, projector, shadow, docs.pop(projector.name), position, page_size))
            memory.release(shadow.name)
        events += caught
        for composed in derived:  # from the sources just swapped in (or as stored), not folded again
            at = composed.swap_composed(store, source, page_size)
            position = position if projectors else at
    finally:
        for shadow in shadows:  # those not swapped in: a failed rebuild leaves no shadow
            with suppress(Exception):  # (one left behind anyway goes at the next open_shadow)
                shadow.drop()
        memory.members.clear()
        if collecting:
            gc.enable()
    seconds = time.perf_counter() - started
    if progress is not None:
        progress(target, target, events, seconds)
    names = tuple(p.name for p in (*projectors, *derived))
    return RebuildReport(names, events, seconds, position, spilled, reloaded)


def swap(
    source: NotificationSource, projector: Projector, shadow: Shadow, docs: SpillDocs, position: int, page_size: int
) -> int:
    """Writes what is left of ``docs`` to the shadow table and swaps it in; answers events
    caught up."""
    docs.flush()
    caught = [0]

    def catch_up(since: int) -> tuple[list[Row], list[str], int]:
        # Called with the live runner held off this read model: the final stretch.
        head = source.max_position()
        last, events = fold_pages(source, [projector], {projector.name: docs}, since + 1, head, page_size)
        caught[0] = events
        upserts, deletes = docs.take_changes()
        return upserts, deletes, max(last, since)

    shadow.swap(position, catch_up)
    return caught[0]

"""The observability feed as a stored document: the read model that is the answer.

The ``feed`` read model holds every run's feed already encoded as JSON, in two rows: the
answer for the default ``limit`` (served as it is) and the answer for ``MAX_LIMIT``
(served as it is, or sliced for any other ``limit``: the newest ``limit`` live events and
runtime logs, the count set to match; the bytes are those ``compose_feed`` gives for that
``limit``).

It is derived, not folded. Live, the runner folds the other projectors' batches, then the
feed of every run whose documents a batch changed is composed once (``compose_feed``, the
one composition the time-travel path uses too) from the documents as the batch leaves
them, gathered for all those runs at once (``projections.studio.feed.StoreView``: the batch
and the runner's memory first, the store in one or two round trips), and committed in the
same transaction. A rebuild composes every run from the source read models as they are
stored (rebuilt first when rebuilt together), blue/green, without folding them again:
same documents, same composition, same bytes. ``FeedMemory`` is the same composition over
sources folded in memory from the log: the definition live projection must equal.

``compose_feed`` is best-effort per surface (a broken document falls back to its
empty-typed defaults alone); a run whose composition fails outright keeps no stored feed,
and its reads compose on request instead, with the same rule.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from typing import Any

import msgspec
import structlog

from projections.engine.docs import BatchDocs, DerivedProjector, Docs, MemoryDocs, Projector, encode
from projections.engine.envelope import Envelope
from projections.engine.follower import NotificationSource
from projections.engine.store import Change, DocStore, Row
from projections.engine.unavailable import unavailable
from projections.studio.feed import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Run,
    StoreView,
    View,
    compose_feed,
    slice_feed,
    source_projectors,
)
from projections.studio.time_travel import MemoryView
from projections.studio.workspace_mirror import MIRROR_NAME

log = structlog.get_logger("squadops.feed")

FEED = "feed"
MIRROR = MIRROR_NAME
SOURCES = ("fleet", "pixels", "surfaces", "log_dock", MIRROR)
_RUN_KEYED = {"fleet": "fleet", "pixels": "pixels", "surfaces": "surfaces", "log_dock": "logdock"}
GATHER = 100  # runs whose documents are gathered in one round trip


def feed_doc_key(tenant: str, project_slug: str, run_id: str) -> str:
    """The row answering the default ``limit``; the project is in the key, so a read naming
    another project finds nothing."""
    return f"feed/{tenant}/{project_slug}/{run_id}"


def feed_max_key(tenant: str, project_slug: str, run_id: str) -> str:
    """The row answering ``MAX_LIMIT`` (sliced for the other limits)."""
    return feed_doc_key(tenant, project_slug, run_id) + "/max"


def feed_partition(tenant: str) -> str:
    return f"feed/{tenant}"


# -- which runs a change touches ----------------------------------------------------------------


class Touched(msgspec.Struct):
    runs: set[tuple[str, str]] = msgspec.field(default_factory=set)  # (tenant, run_id)
    projects: set[tuple[str, str]] = msgspec.field(default_factory=set)  # (tenant, project_slug)

    def add(self, name: str, key: str) -> None:
        parts = key.split("/")
        if len(parts) < 3:
            return
        if name == MIRROR:
            self.projects.add((parts[1], parts[2]))
        elif name in _RUN_KEYED and parts[0].startswith(_RUN_KEYED[name]):
            self.runs.add((parts[1], parts[2]))


def wanted_runs(view: View, touched: Touched) -> dict[Run, str]:
    """Every touched run with its project (a touched project touches each of its runs); a run
    with no board row is not a run yet: its reads compose on request."""
    wanted: dict[Run, str] = {}
    for tenant, project_slug in touched.projects:
        for run_id in view.project_runs(tenant, project_slug):
            wanted[(tenant, run_id)] = project_slug
    for run, project_slug in view.projects(touched.runs - set(wanted)).items():
        if project_slug:
            wanted[run] = project_slug
    return wanted


def compose_many(view: View, wanted: Mapping[Run, str]) -> tuple[list[Row], list[str]]:
    """The feed rows of the runs (run -> project), their documents gathered a page at a time."""
    upserts: list[Row] = []
    deletes: list[str] = []
    order = sorted(wanted)
    for start in range(0, len(order), GATHER):
        page = {run: wanted[run] for run in order[start : start + GATHER]}
        gathered = view.gather(page)
        for (tenant, run_id), project_slug in page.items():
            key, big = feed_doc_key(tenant, project_slug, run_id), feed_max_key(tenant, project_slug, run_id)
            try:
                parts, rows = gathered[(tenant, run_id)]
                body = compose_feed(tenant, run_id, project_slug, parts, rows, MAX_LIMIT)
                default = slice_feed(body, DEFAULT_LIMIT)
            except Exception as exc:  # this run keeps no stored feed; the others are unaffected
                if unavailable(exc) is not None:
                    raise
                log.error("feed_compose_failed", run_id=run_id, error=repr(exc))
                deletes += [key, big]
                continue
            upserts.append(Row(key, feed_partition(tenant), project_slug, "", "", default))
            upserts.append(Row(big, feed_partition(tenant), project_slug, "", "", body))
    upserts.sort()
    return upserts, sorted(deletes)


def compose_rows(view: View, touched: Touched) -> tuple[list[Row], list[str]]:
    """The feed rows of every touched run."""
    return compose_many(view, wanted_runs(view, touched))


def every_run(store: DocStore, batches: Mapping[str, BatchDocs] | None = None) -> dict[Run, str]:
    """Every run on the board with its project (the batch's new rows too)."""
    runs = {(row.partition.partition("/")[2], row.key.rpartition("/")[2]): row.group for row in store.dump("fleet")}
    board = (batches or {}).get("fleet")
    if board is not None:
        for key in board.dirty:
            runs[(board.meta[key].partition.partition("/")[2], key.rpartition("/")[2])] = board.meta[key].group
    return {run: project_slug for run, project_slug in runs.items() if project_slug}


class SealedBodies:
    """The encoded bytes of the lane chunks last composed, kept across passes (bounded).

    A log lane's chunk is written once, when its tail is sealed, and never changed in place
    afterwards (a lane emptied after a break seals new chunk objects, even under a number
    used before): while memory holds the very same object, its bytes are the same. The
    entry keeps the object alive, so its identity cannot be taken by another one.
    """

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[str, str], tuple[Any, bytes]] = OrderedDict()

    def encode(self, name: str, key: str, doc: Any) -> bytes:
        entry = self.entries.get((name, key))
        if entry is not None and entry[0] is doc:
            self.entries.move_to_end((name, key))
            return entry[1]
        body = encode(doc)
        self.entries[(name, key)] = (doc, body)
        self.entries.move_to_end((name, key))
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return body


# -- the definition: the sources folded in memory ---------------------------------------------


class FeedMemory(MemoryDocs):
    """The feed's rows composed from source documents folded in memory from the log."""

    def __init__(self, sources: Iterable[Projector]) -> None:
        super().__init__()
        self.sources = list(sources)
        self.private = {p.name: MemoryDocs() for p in self.sources}
        self.bodies: dict[str, Row] = {}

    def fold(self, env: Envelope) -> None:
        for projector in self.sources:
            if projector.wants(env):
                projector.apply(env, self.private[projector.name])

    def _compose(self) -> None:
        touched = Touched()
        for name, docs in self.private.items():
            for key in (*docs.dirty, *docs.deleted):
                touched.add(name, key)
            docs.dirty, docs.deleted = set(), set()
        upserts, deletes = compose_rows(MemoryView(self.private), touched)
        for row in upserts:
            self.bodies[row.key] = row
            self.dirty.add(row.key)
            self.deleted.discard(row.key)
        for key in deletes:
            self.bodies.pop(key, None)
            self.dirty.discard(key)
            self.deleted.add(key)

    def rows(self) -> Iterator[Row]:
        self._compose()
        for key in sorted(self.bodies):
            yield self.bodies[key]

    def take_changes(self) -> tuple[list[Row], list[str]]:
        self._compose()
        upserts = [self.bodies[key] for key in sorted(self.dirty)]
        deletes = sorted(self.deleted)
        self.dirty, self.deleted = set(), set()
        return upserts, deletes


# -- the projector ------------------------------------------------------------------------------


class FeedProjector(DerivedProjector):
    """Keeps every run's feed as stored JSON (see the module's docstring)."""

    name = FEED
    announced = True  # the API keeps copies of stored feeds (projections.engine.copies)
    sources = SOURCES

    def __init__(self) -> None:
        self._folds = source_projectors()
        self._sealed = SealedBodies()  # the lane chunks' bytes, from one pass to the next

    def wants(self, env: Envelope) -> bool:
        return any(p.wants(env) for p in self._folds)

    def apply(self, env: Envelope, docs: Docs) -> None:
        if isinstance(docs, FeedMemory):
            docs.fold(env)

    def memory_docs(self) -> MemoryDocs:
        return FeedMemory(source_projectors())

    def derive(
        self, store: DocStore, batches: Mapping[str, BatchDocs], positions: Mapping[str, int], last: int
    ) -> Change | None:
        own = positions.get(FEED, 0)
        floor = min((positions[n] for n in SOURCES if n in positions), default=own)
        view = StoreView(store, batches, self._sealed.encode)
        # Behind its sources (new, or a pass whose feed did not commit with them): every run
        # is composed again, from the sources as they are.
        behind = own < floor
        touched = _batch_touched(batches)
        target = max(own, last, floor)
        if not behind and not touched.runs and not touched.projects and target == own:
            return None
        if behind:
            wanted = every_run(store, batches)
            wanted.update(wanted_runs(view, touched))
        else:
            wanted = wanted_runs(view, touched)
        upserts, deletes = compose_many(view, wanted)
        return Change(FEED, own, target, upserts, deletes)

    def swap_composed(self, store: DocStore, source: NotificationSource, page_size: int) -> int:
        """Rebuild: every run's feed composed from the source read models as they are stored
        (rebuilt and swapped in first when rebuilt together), blue/green.

        The shadow table is filled from the sources at position ``start`` or later; then,
        with the live runner held off (it commits the feed with its sources), the runs that
        events past ``start`` touched are composed again, and the feed takes the sources'
        position. Nothing is folded again but those few events, to name the runs.
        """
        start = _floor(store.positions())[0]
        view = StoreView(store)

        def rows() -> Iterator[Row]:
            every = every_run(store)
            order = sorted(every)
            for first in range(0, len(order), GATHER):
                upserts, _ = compose_many(view, {run: every[run] for run in order[first : first + GATHER]})
                yield from upserts

        def catch_up(_since: int) -> tuple[list[Row], list[str], int]:
            floor, top = _floor(store.positions())
            touched = touched_between(source, self._folds, start, top, page_size)
            upserts, deletes = compose_rows(StoreView(store), touched)
            return upserts, deletes, floor

        return store.swap_in(FEED, rows(), start, catch_up)


def _floor(positions: Mapping[str, int]) -> tuple[int, int]:
    """(lowest, highest) position of the feed's sources."""
    held = [positions[n] for n in SOURCES if n in positions]
    return min(held, default=0), max(held, default=0)


def _batch_touched(batches: Mapping[str, BatchDocs]) -> Touched:
    touched = Touched()
    for name in SOURCES:
        batch = batches.get(name)
        if batch is not None:
            for key in (*batch.dirty, *batch.deleted):
                touched.add(name, key)
    return touched


class _Recorder:
    """Documents that know nothing and remember every key a fold asked for or wrote."""

    def __init__(self, name: str, touched: Touched) -> None:
        self.name, self.touched = name, touched

    def get(self, key: str) -> None:
        self.touched.add(self.name, key)

    def put(self, key: str, doc: dict[str, Any], **_: str) -> None:
        self.touched.add(self.name, key)

    def delete(self, key: str) -> None:
        self.touched.add(self.name, key)


def touched_between(source: NotificationSource, folds: Iterable[Projector], start: int, stop: int, page_size: int) -> Touched:
    """The runs and projects whose source documents events ``start+1..stop`` may change:
    every document key the sources' folds ask for or write (a fold reads the document it
    changes before it changes it), whatever they would have written."""
    touched = Touched()
    recorders = [(p, _Recorder(p.name, touched)) for p in folds]
    position = start
    while position < stop:
        page = source.read(position + 1, page_size, stop)
        if not page:
            break
        for env in page:
            for projector, recorder in recorders:
                if projector.wants(env):
                    with suppress(Exception):  # knowing nothing, a fold may stop early: its keys are noted
                        projector.apply(env, recorder)
        position = page[-1].position
    return touched


def stored_feed_key(tenant: str, project_slug: str, run_id: str, limit: int) -> str:
    """The row to read for ``limit``: the default answer, or the one to slice."""
    if limit == DEFAULT_LIMIT:
        return feed_doc_key(tenant, project_slug, run_id)
    return feed_max_key(tenant, project_slug, run_id)


def answer(body: bytes, limit: int) -> bytes:
    """The stored row read for ``limit`` (``stored_feed_key``) as the answer for it."""
    return body if limit in (DEFAULT_LIMIT, MAX_LIMIT) else slice_feed(body, limit)

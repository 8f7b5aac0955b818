"""The observability feed as a stored document: the read model that is the answer.

The ``feed`` read model holds every run's feed already encoded as JSON, in two rows: the
answer for the default ``limit`` (served as it is) and the answer for ``MAX_LIMIT``
(served as it is, or sliced for any other ``limit``: the newest ``limit`` live events and
runtime logs, the count set to match; the bytes are those ``compose_feed`` gives for that
``limit``).

It is derived, not folded. Live, the runner folds the other projectors' batches, then the
feed of every run whose documents a batch changed is composed (``compose_feed``, the one
composition the time-travel path uses too) from the documents as the batch leaves them,
and committed in the same transaction. A rebuild folds the same source projectors
privately and composes once at the end: same documents, same composition, same bytes.

``compose_feed`` is best-effort per surface (a broken document falls back to its
empty-typed defaults alone); a run whose composition fails outright keeps no stored feed,
and its reads compose on request instead, with the same rule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping

import msgspec
import structlog

from projections.engine.docs import BatchDocs, DerivedProjector, Docs, MemoryDocs, Projector, encode
from projections.engine.envelope import Envelope
from projections.engine.lookups import Newest, fetch
from projections.engine.store import Change, DocStore, Row
from projections.engine.unavailable import unavailable
from projections.studio import mirror_surface
from projections.studio.feed import DEFAULT_LIMIT, MAX_LIMIT, compose_feed, feed_reads, feed_scans
from projections.studio.fleet import FleetProjector, fleet_doc_key, fleet_partition
from projections.studio.log_dock import LogDockProjector
from projections.studio.pixels import PixelsProjector
from projections.studio.surfaces import SurfacesProjector

log = structlog.get_logger("squadops.feed")

FEED = "feed"
MIRROR = mirror_surface.MIRROR_NAME
SOURCES = ("fleet", "pixels", "surfaces", "log_dock", MIRROR)
_RUN_KEYED = {"fleet": "fleet", "pixels": "pixels", "surfaces": "surfaces", "log_dock": "logdock"}
PAGE = 500


def feed_doc_key(tenant: str, project_slug: str, run_id: str) -> str:
    """The row answering the default ``limit``; the project is in the key, so a read naming
    another project finds nothing."""
    return f"feed/{tenant}/{project_slug}/{run_id}"


def feed_max_key(tenant: str, project_slug: str, run_id: str) -> str:
    """The row answering ``MAX_LIMIT`` (sliced for the other limits)."""
    return feed_doc_key(tenant, project_slug, run_id) + "/max"


def feed_partition(tenant: str) -> str:
    return f"feed/{tenant}"


def feed_sources() -> list[Projector]:
    """The projectors whose documents make up a run's feed (the board row says the run exists)."""
    projectors: list[Projector] = [FleetProjector(), PixelsProjector(), SurfacesProjector(), LogDockProjector()]
    mirror = mirror_surface.mirror_projector()
    if mirror is not None:
        projectors.append(mirror)
    return projectors


# -- limit: slicing the stored answer ----------------------------------------------------------


class _Sliceable(msgspec.Struct, gc=False):
    """``Feed`` with every field kept as it was encoded but the two bounded lists (same order)."""

    run_id: msgspec.Raw
    project_slug: msgspec.Raw
    live_channel_topic: msgspec.Raw
    live_events: list[msgspec.Raw]
    pixel_agents: msgspec.Raw
    runtime_logs: list[msgspec.Raw]
    execution_workspace_mirror: msgspec.Raw
    delivery: msgspec.Raw
    source_ref: msgspec.Raw
    proposal: msgspec.Raw
    queue: msgspec.Raw
    lineage: msgspec.Raw
    delivery_feedback: msgspec.Raw
    evidence: msgspec.Raw
    progress: msgspec.Raw
    run_cost: msgspec.Raw
    freshness: msgspec.Raw
    latest_activity_at: msgspec.Raw
    event_count: msgspec.Raw
    pixel_agent_count: msgspec.Raw
    runtime_log_count: int
    coordination_friction: msgspec.Raw


_sliceable = msgspec.json.Decoder(_Sliceable)
_encode = msgspec.json.Encoder().encode


def slice_feed(body: bytes, limit: int) -> bytes:
    """The stored ``MAX_LIMIT`` answer cut to ``limit``: what ``compose_feed`` answers for it."""
    feed = _sliceable.decode(body)
    if len(feed.live_events) <= limit and len(feed.runtime_logs) <= limit:
        return body
    feed.live_events = feed.live_events[:limit]
    feed.runtime_logs = feed.runtime_logs[:limit]
    feed.runtime_log_count = len(feed.runtime_logs)
    return _encode(feed)


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


class View(ABC):
    """The source documents as the feed composes them (in the store, a batch or memory)."""

    @abstractmethod
    def doc(self, name: str, key: str) -> bytes | None: ...

    @abstractmethod
    def lookup(
        self, reads: Mapping[str, tuple[str, str]], scans: Mapping[str, Newest]
    ) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]: ...

    @abstractmethod
    def project_runs(self, tenant: str, project_slug: str) -> set[str]: ...


def compose_run(view: View, tenant: str, run_id: str, project_slug: str) -> tuple[bytes, bytes]:
    """(default answer, ``MAX_LIMIT`` answer) of one run's feed."""
    parts, rows = view.lookup(feed_reads(tenant, run_id, project_slug), feed_scans(tenant, run_id, MAX_LIMIT))
    body = compose_feed(tenant, run_id, project_slug, parts, rows, MAX_LIMIT)
    return slice_feed(body, DEFAULT_LIMIT), body


def compose_rows(view: View, touched: Touched) -> tuple[list[Row], list[str]]:
    """The feed rows of every touched run (a touched project touches each of its runs)."""
    wanted: dict[tuple[str, str], str] = {}  # (tenant, run_id) -> project
    for tenant, project_slug in touched.projects:
        for run_id in view.project_runs(tenant, project_slug):
            wanted[(tenant, run_id)] = project_slug
    for tenant, run_id in touched.runs - set(wanted):
        board = view.doc("fleet", fleet_doc_key(tenant, run_id))
        project_slug = msgspec.json.decode(board).get("project_slug", "") if board is not None else ""
        if project_slug:  # no board row: not a run (yet); its reads compose on request
            wanted[(tenant, run_id)] = project_slug
    upserts: list[Row] = []
    deletes: list[str] = []
    for (tenant, run_id), project_slug in sorted(wanted.items()):
        key, big = feed_doc_key(tenant, project_slug, run_id), feed_max_key(tenant, project_slug, run_id)
        try:
            default, body = compose_run(view, tenant, run_id, project_slug)
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


# -- live: the documents as the runner's batches leave them ---------------------------------------


class BatchView(View):
    """The store overlaid with the (uncommitted) documents of this pass's batches."""

    def __init__(self, store: DocStore, batches: Mapping[str, BatchDocs]) -> None:
        self.store = store
        self.batches = batches
        self._by_partition: dict[str, dict[str, list[str]]] = {}

    def doc(self, name: str, key: str) -> bytes | None:
        parts, _ = self.lookup({"doc": (name, key)}, {})
        return parts["doc"]

    def lookup(
        self, reads: Mapping[str, tuple[str, str]], scans: Mapping[str, Newest]
    ) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]:
        found: dict[str, bytes | None] = {}
        rest: dict[str, tuple[str, str]] = {}
        for part, (name, key) in reads.items():
            batch = self.batches.get(name)
            if batch is not None and key in batch.cache:  # as this pass leaves it
                doc = batch.cache[key]
                found[part] = encode(doc) if doc is not None else None
            else:
                rest[part] = (name, key)
        plain = {part: scan for part, scan in scans.items() if scan.name not in self.batches}
        stored, rows = fetch(self.store, rest, plain) if rest or plain else ({}, {})
        found.update(stored)
        for part, scan in scans.items():
            if scan.name in self.batches:
                rows[part] = self._newest(self.batches[scan.name], scan)
        return found, rows

    def _newest(self, batch: BatchDocs, scan: Newest) -> list[bytes]:
        """The partition's newest rows: the store's, with this batch's writes and deletes."""
        stored = self.store.scan(scan.name, p=scan.p, limit=scan.limit + len(batch.deleted), descending=True)
        rows = {r.key: (r.s, r.body) for r in stored if r.key not in batch.deleted and r.key not in batch.dirty}
        for key in self._partition(batch).get(scan.p, ()):
            rows[key] = (batch.meta[key].s, encode(batch.cache[key]))
        return [body for _, body in sorted(rows.values(), reverse=True)[: scan.limit]]

    def _partition(self, batch: BatchDocs) -> dict[str, list[str]]:
        index = self._by_partition.get(batch.name)
        if index is None:
            index = {}
            for key in batch.dirty:
                index.setdefault(batch.meta[key].p, []).append(key)
            self._by_partition[batch.name] = index
        return index

    def project_runs(self, tenant: str, project_slug: str) -> set[str]:
        runs, after = set(), ""
        while True:
            page = self.store.scan("fleet", p=fleet_partition(tenant), g=project_slug, after=after, limit=PAGE)
            runs |= {row.key.rpartition("/")[2] for row in page}
            if len(page) < PAGE:
                break
            after = page[-1].s
        board = self.batches.get("fleet")
        if board is not None:
            runs |= {k.rpartition("/")[2] for k in board.dirty if board.meta[k].g == project_slug
                     and board.meta[k].p == fleet_partition(tenant)}
        return runs

    def touched(self) -> Touched:
        touched = Touched()
        for name in SOURCES:
            batch = self.batches.get(name)
            if batch is not None:
                for key in (*batch.dirty, *batch.deleted):
                    touched.add(name, key)
        return touched

    def every_run(self) -> Touched:
        touched = self.touched()
        touched.runs |= {(row.p.partition("/")[2], row.key.rpartition("/")[2]) for row in self.store.dump("fleet")}
        return touched


# -- rebuild: the sources folded privately ------------------------------------------------------


class FeedMemory(MemoryDocs):
    """The feed's rows in a rebuild, composed from source documents folded in memory."""

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
        upserts, deletes = compose_rows(_MemoryView(self.private), touched)
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


class _MemoryView(View):
    def __init__(self, docs: Mapping[str, MemoryDocs]) -> None:
        self.docs = docs
        self._partitions: dict[str, dict[str, list[tuple[str, str]]]] = {}

    def doc(self, name: str, key: str) -> bytes | None:
        docs = self.docs.get(name)
        doc = docs.get(key) if docs is not None else None
        return encode(doc) if doc is not None else None

    def lookup(
        self, reads: Mapping[str, tuple[str, str]], scans: Mapping[str, Newest]
    ) -> tuple[dict[str, bytes | None], dict[str, list[bytes]]]:
        found = {part: self.doc(name, key) for part, (name, key) in reads.items()}
        rows = {}
        for part, scan in scans.items():
            newest = sorted(self._partition(scan.name).get(scan.p, []), reverse=True)[: scan.limit]
            rows[part] = [encode(self.docs[scan.name].docs[key][1]) for _, key in newest]
        return found, rows

    def _partition(self, name: str) -> dict[str, list[tuple[str, str]]]:
        index = self._partitions.get(name)
        if index is None:
            index = {}
            docs = self.docs.get(name)
            for key, (meta, _) in (docs.docs.items() if docs is not None else ()):
                if meta.p:
                    index.setdefault(meta.p, []).append((meta.s, key))
            self._partitions[name] = index
        return index

    def project_runs(self, tenant: str, project_slug: str) -> set[str]:
        board = self.docs.get("fleet")
        prefix = fleet_doc_key(tenant, "")
        return {
            key.rpartition("/")[2]
            for key, (meta, _) in (board.docs.items() if board is not None else ())
            if key.startswith(prefix) and meta.g == project_slug
        }


# -- the projector ------------------------------------------------------------------------------


class FeedProjector(DerivedProjector):
    """Keeps every run's feed as stored JSON (see the module's docstring)."""

    name = FEED
    sources = SOURCES

    def __init__(self) -> None:
        self._folds = feed_sources()

    def wants(self, env: Envelope) -> bool:
        return any(p.wants(env) for p in self._folds)

    def apply(self, env: Envelope, docs: Docs) -> None:
        if isinstance(docs, FeedMemory):
            docs.fold(env)

    def memory_docs(self) -> MemoryDocs:
        return FeedMemory(feed_sources())

    def derive(
        self, store: DocStore, batches: Mapping[str, BatchDocs], positions: Mapping[str, int], last: int
    ) -> Change | None:
        own = positions.get(FEED, 0)
        floor = min((positions[n] for n in SOURCES if n in positions), default=own)
        view = BatchView(store, batches)
        # Behind its sources (new, or a pass whose feed did not commit with them): every run
        # is composed again, from the sources as they are.
        behind = own < floor
        touched = view.every_run() if behind else view.touched()
        target = max(own, last, floor)
        if not touched.runs and not touched.projects and target == own:
            return None
        upserts, deletes = compose_rows(view, touched)
        return Change(FEED, own, target, upserts, deletes)


def stored_feed_key(tenant: str, project_slug: str, run_id: str, limit: int) -> str:
    """The row to read for ``limit``: the default answer, or the one to slice."""
    if limit == DEFAULT_LIMIT:
        return feed_doc_key(tenant, project_slug, run_id)
    return feed_max_key(tenant, project_slug, run_id)


def answer(body: bytes, limit: int) -> bytes:
    """The stored row read for ``limit`` (``stored_feed_key``) as the answer for it."""
    return body if limit in (DEFAULT_LIMIT, MAX_LIMIT) else slice_feed(body, limit)

"""The documents a feed is composed from, for many runs at once, and the one production of
a run's feed from them (``run_feed``).

The documents are seen through a ``View``: ``StoreView`` (the store, overlaid with a live
pass's batches) for the stored feed and for a read that finds none stored; ``MemoryView``
(source read models folded in memory) for time travel and for the definition tests
compare with. Every answer is the feed composed for ``MAX_LIMIT`` (``compose_feed``), cut
to the limit asked (``slice_feed``): the same bytes whichever way the documents came.

A pass composes the feed of every run its batches touched (a rebuild: of every run, page
by page). Each source document is taken from where it already is: this pass's batch (as
the fold leaves it), then the runner's memory of that read model (trusted at the position
the batch started from), and only then the store, in one round trip for all the runs (the
documents by key, and the keys of each log lane's newest chunks), plus one more for the
chunk bodies no memory holds. The lanes' newest chunks are what a scan of the store
answers with this batch's writes and deletes laid over it, as ``compose_feed`` reads them
on request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from projections.engine.bulk import Newest, read_many
from projections.engine.docs import BatchDocs, MemoryDocs, Projector, encode
from projections.engine.store import DocStore
from projections.studio import mirror_surface
from projections.studio.feed import MAX_LIMIT, compose_feed, feed_reads, feed_scans, slice_feed
from projections.studio.fleet import FleetProjector, fleet_doc_key, fleet_partition
from projections.studio.log_dock import LogDockProjector
from projections.studio.pixels import PixelsProjector
from projections.studio.surfaces import SurfacesProjector

Run = tuple[str, str]  # (tenant, run_id)
Parts = tuple[dict[str, bytes | None], dict[str, list[bytes]]]  # as compose_feed reads them
PAGE = 500
_MISSING = object()


class _Board(msgspec.Struct, gc=False):
    project_slug: str = ""


_board = msgspec.json.Decoder(_Board)


def source_projectors() -> list[Projector]:
    """The projectors whose documents make up a run's feed (the board row says the run exists)."""
    projectors: list[Projector] = [FleetProjector(), PixelsProjector(), SurfacesProjector(), LogDockProjector()]
    mirror = mirror_surface.mirror_projector()
    if mirror is not None:
        projectors.append(mirror)
    return projectors


def reads_of(tenant: str, run_id: str, project_slug: str) -> dict[str, tuple[str, str]]:
    """The documents a run's composition reads (``run``, the board row, only says that the
    run exists: the caller knows that already)."""
    reads = feed_reads(tenant, run_id, project_slug)
    del reads["run"]
    return reads


def board_project(doc: Any) -> str:
    """The project of a board row (a document or its stored bytes; '' if there is none)."""
    if doc is None:
        return ""
    if isinstance(doc, dict):
        return str(doc.get("project_slug", "") or "")
    try:
        return _board.decode(doc).project_slug
    except (msgspec.DecodeError, msgspec.ValidationError):  # a damaged row: no stored feed
        return ""


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


class View(ABC):
    """The source documents of many runs, wherever they are (store, batch or memory)."""

    @abstractmethod
    def projects(self, runs: Iterable[Run]) -> dict[Run, str]:
        """Each run's project, from its board row ('' when it has none: not a run yet)."""

    @abstractmethod
    def project_runs(self, tenant: str, project_slug: str) -> set[str]: ...

    @abstractmethod
    def gather(self, wanted: Mapping[Run, str]) -> dict[Run, Parts]:
        """The documents and the newest lane chunks of each run (run -> project)."""


class StoreView(View):
    """The store overlaid with this pass's (uncommitted) batches and the runner's memory."""

    def __init__(
        self, store: DocStore, batches: Mapping[str, BatchDocs] | None = None, sealed: SealedBodies | None = None
    ) -> None:
        self.store = store
        self.batches = batches or {}
        self.sealed = sealed if sealed is not None else SealedBodies()
        self._by_partition: dict[str, dict[str, list[str]]] = {}

    def held(self, name: str, key: str) -> Any:
        """The document as this pass leaves it, if memory has it (None: known absent)."""
        batch = self.batches.get(name)
        if batch is None:
            return _MISSING
        doc = batch.cache.get(key, _MISSING)
        if doc is _MISSING and batch.remembered is not None:
            doc = batch.remembered.peek(key, _MISSING)
        return doc

    def projects(self, runs: Iterable[Run]) -> dict[Run, str]:
        found: dict[Run, str] = {}
        unknown: dict[str, Run] = {}
        for run in runs:
            key = fleet_doc_key(*run)
            doc = self.held("fleet", key)
            if doc is _MISSING:
                unknown[key] = run
            else:
                found[run] = board_project(doc)
        if unknown:
            bodies, _ = read_many(self.store, {"fleet": unknown}, {}, 0)
            for key, run in unknown.items():
                found[run] = board_project(bodies.get(("fleet", key)))
        return found

    def project_runs(self, tenant: str, project_slug: str) -> set[str]:
        runs, after = set(), ""
        while True:
            page = self.store.scan("fleet", partition=fleet_partition(tenant), group=project_slug, after=after, limit=PAGE)
            runs |= {row.key.rpartition("/")[2] for row in page}
            if len(page) < PAGE:
                break
            after = page[-1].sort_key
        board = self.batches.get("fleet")
        if board is not None:
            runs |= {k.rpartition("/")[2] for k in board.dirty if board.meta[k].group == project_slug
                     and board.meta[k].partition == fleet_partition(tenant)}
        return runs

    def gather(self, wanted: Mapping[Run, str]) -> dict[Run, Parts]:
        reads = {run: reads_of(run[0], run[1], project) for run, project in wanted.items()}
        scans = {run: feed_scans(run[0], run[1], MAX_LIMIT) for run in wanted}
        docs: dict[tuple[str, str], bytes | None] = {}
        unknown: dict[str, set[str]] = {}
        for parts in reads.values():
            for name, key in parts.values():
                if (name, key) not in docs:
                    docs[(name, key)] = self._body(name, key, unknown)
        partitions: dict[str, set[str]] = {}
        for run_scans in scans.values():
            for scan in run_scans.values():
                partitions.setdefault(scan.name, set()).add(scan.partition)
        limit = max((s.limit for run_scans in scans.values() for s in run_scans.values()), default=0)
        limit += max((len(self.batches[n].deleted) for n in partitions if n in self.batches), default=0)
        found, newest = read_many(self.store, unknown, partitions, limit)
        for item in _items(unknown):
            docs[item] = found.get(item)
        chosen = {(name, p): self._newest(name, p, newest.get((name, p), []), limit) for name, ps in partitions.items() for p in ps}
        rows: dict[tuple[str, str], bytes | None] = {}
        missing: dict[str, set[str]] = {}
        for (name, _), items in chosen.items():
            for _, key, body in items:
                rows[(name, key)] = body if body is not None else self._body(name, key, missing, self.sealed)
        if missing:
            found, _ = read_many(self.store, missing, {}, 0)
            rows.update({item: found.get(item) for item in _items(missing)})
        answers: dict[Run, Parts] = {}
        for run in wanted:
            parts = {part: docs[(name, key)] for part, (name, key) in reads[run].items()}
            lanes = {}
            for part, scan in scans[run].items():
                items = chosen[(scan.name, scan.partition)][: scan.limit]
                lanes[part] = [body for _, key, _ in items if (body := rows.get((scan.name, key))) is not None]
            answers[run] = (parts, lanes)
        return answers

    def _body(
        self, name: str, key: str, unknown: dict[str, set[str]], sealed: SealedBodies | None = None
    ) -> bytes | None:
        """The document's bytes from memory; None, noted in ``unknown``, when the store must say."""
        doc = self.held(name, key)
        if doc is _MISSING:
            unknown.setdefault(name, set()).add(key)
            return None
        if doc is None:
            return None
        return sealed.encode(name, key, doc) if sealed is not None else encode(doc)

    def _newest(
        self, name: str, p: str, stored: list[tuple[str, str, bytes | None]], limit: int
    ) -> list[tuple[str, str, bytes | None]]:
        """The partition's newest rows: the store's, with this batch's writes and deletes."""
        batch = self.batches.get(name)
        if batch is None:
            return stored[:limit]
        rows = [r for r in stored if r[1] not in batch.deleted and r[1] not in batch.dirty]
        rows += [(batch.meta[key].sort_key, key, None) for key in self._partition(batch).get(p, ())]
        rows.sort(reverse=True)
        return rows[:limit]

    def _partition(self, batch: BatchDocs) -> dict[str, list[str]]:
        index = self._by_partition.get(batch.name)
        if index is None:
            index = {}
            for key in batch.dirty:
                index.setdefault(batch.meta[key].partition, []).append(key)
            self._by_partition[batch.name] = index
        return index

    def every_run(self) -> dict[Run, str]:
        """Every run on the board with its project (the batch's new rows too)."""
        runs = {(row.partition.partition("/")[2], row.key.rpartition("/")[2]): row.group for row in self.store.dump("fleet")}
        board = self.batches.get("fleet")
        if board is not None:
            for key in board.dirty:
                runs[(board.meta[key].partition.partition("/")[2], key.rpartition("/")[2])] = board.meta[key].group
        return {run: project_slug for run, project_slug in runs.items() if project_slug}


def _items(names: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    return [(name, key) for name, keys in names.items() for key in keys]


class MemoryView(View):
    """Source documents folded in memory (``name -> MemoryDocs``)."""

    def __init__(self, docs: Mapping[str, MemoryDocs]) -> None:
        self.docs = docs
        self._partitions: dict[str, dict[str, list[tuple[str, str]]]] = {}

    def _get(self, name: str, key: str) -> Any:
        docs = self.docs.get(name)
        return docs.get(key) if docs is not None else None

    def projects(self, runs: Iterable[Run]) -> dict[Run, str]:
        return {run: board_project(self._get("fleet", fleet_doc_key(*run))) for run in runs}

    def gather(self, wanted: Mapping[Run, str]) -> dict[Run, Parts]:
        answers: dict[Run, Parts] = {}
        for (tenant, run_id), project_slug in wanted.items():
            parts = {}
            for part, (name, key) in reads_of(tenant, run_id, project_slug).items():
                doc = self._get(name, key)
                parts[part] = encode(doc) if doc is not None else None
            rows = {}
            for part, scan in feed_scans(tenant, run_id, MAX_LIMIT).items():
                newest = sorted(self._partition(scan.name).get(scan.partition, []), reverse=True)[: scan.limit]
                rows[part] = [encode(self.docs[scan.name].docs[key][1]) for _, key in newest]
            answers[(tenant, run_id)] = (parts, rows)
        return answers

    def _partition(self, name: str) -> dict[str, list[tuple[str, str]]]:
        index = self._partitions.get(name)
        if index is None:
            index = {}
            docs = self.docs.get(name)
            for key, (meta, _) in (docs.docs.items() if docs is not None else ()):
                if meta.partition:
                    index.setdefault(meta.partition, []).append((meta.sort_key, key))
            self._partitions[name] = index
        return index

    def project_runs(self, tenant: str, project_slug: str) -> set[str]:
        board = self.docs.get("fleet")
        prefix = fleet_doc_key(tenant, "")
        return {
            key.rpartition("/")[2]
            for key, (meta, _) in (board.docs.items() if board is not None else ())
            if key.startswith(prefix) and meta.group == project_slug
        }


def run_feed(view: View, tenant: str, run_id: str, project_slug: str, limit: int) -> bytes:
    """The run's feed for ``limit`` from ``view``'s documents: composed for ``MAX_LIMIT`` and
    cut to ``limit``, the bytes its stored rows answer (``projections.studio.feed_doc``)."""
    parts, rows = view.gather({(tenant, run_id): project_slug})[(tenant, run_id)]
    return slice_feed(compose_feed(tenant, run_id, project_slug, parts, rows, MAX_LIMIT), limit)


__all__ = [
    "PAGE", "MemoryView", "Newest", "Parts", "Run", "SealedBodies", "StoreView", "View", "board_project", "reads_of",
    "run_feed", "source_projectors",
]

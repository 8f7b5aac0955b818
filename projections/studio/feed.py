"""The observability feed of one run, and its one production from the run's documents.

``compose_feed`` splices the run's documents (its pixels, surfaces and log dock views, the
project's mirror) and the newest chunks of its two log lanes into the answer: everything
is stored in the feed's shape already, so it is copied in as pre-encoded JSON
(``msgspec.Raw``) instead of decoded and encoded again. ``run_feed`` is the one production
of a run's feed: composed for ``MAX_LIMIT`` from the documents seen through a ``View``, cut
to the limit asked (``slice_feed``). ``StoreView`` sees the store, overlaid with a live
pass's batches and the runner's memory (the stored feed, ``projections.studio.feed_doc``, and
a read that finds none stored); ``MemoryView`` sees source read models folded in memory
(time travel, and the definition tests compare with). Whichever way the documents came,
the bytes are the same. A view gathers the documents of many runs at once: from the batch,
then the runner's memory, and only then the store, in one round trip for all of them (plus
one for the lane chunks no memory holds).

Every surface is best-effort: a missing, undecodable or broken document makes only its
own surfaces fall back to their empty-typed defaults (and says why in the log). ``limit``
bounds ``live_events`` and ``runtime_logs``, both most recent first; ``runtime_logs`` lists
the current-state entries first (one per agent that needs an operator now), then
diagnostic excerpts. ``event_count`` counts every live event of the run so far;
``runtime_log_count`` and ``pixel_agent_count`` count the lists returned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec
import structlog

from projections.engine.bulk import Newest, read_many
from projections.engine.docs import BatchDocs, Projector, decode, encode
from projections.engine.stamps import seconds_between
from projections.engine.store import DocStore
from projections.studio.fleet import FleetProjector, fleet_doc_key, fleet_partition
from projections.studio.log_dock import (
    LogDockProjector,
    chunks_for,
    live_partition,
    log_dock_doc_key,
    logs_partition,
)
from projections.studio.pixels import (
    PixelsProjector,
    empty_friction,
    empty_progress,
    empty_run_cost,
    pixels_doc_key,
)
from projections.studio.surfaces import DEFAULTS, SurfacesProjector, surfaces_doc_key
from projections.studio.workspace_mirror import (
    MIRROR_NAME,
    MirrorProjector,
    compose_mirror,
    default_mirror,
    mirror_doc_key,
)

log = structlog.get_logger("squadops.feed")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
EMPTY_LIST = msgspec.Raw(b"[]")


def _raw(value: Any) -> msgspec.Raw:
    return msgspec.Raw(encode(value))


def live_channel_topic(tenant: str, run_id: str) -> str:
    """C9: the colon form of the run's live channel."""
    return f"portal_live_events:tenant:{tenant}:run:{run_id}"


# -- the stored documents, as the feed reads them ------------------------------------------------


class PixelsPart(msgspec.Struct, gc=False):
    broken: str = ""
    latest_activity_at: str = ""
    pixel_agent_count: int = 0
    pixel_agents: msgspec.Raw = EMPTY_LIST
    progress: msgspec.Raw = _raw(empty_progress())
    run_cost: msgspec.Raw = _raw(empty_run_cost())
    coordination_friction: msgspec.Raw = _raw(empty_friction())
    current_logs: list[msgspec.Raw] = []
    sessions: list[dict[str, str]] = []


class SurfacesPart(msgspec.Struct, gc=False):
    broken: dict[str, str] = {}
    latest_activity_at: str = ""
    heartbeat_at: str = ""
    delivery: msgspec.Raw = _raw(DEFAULTS["delivery"]())
    source_ref: msgspec.Raw = _raw(DEFAULTS["source_ref"]())
    proposal: msgspec.Raw = _raw(DEFAULTS["proposal"]())
    queue: msgspec.Raw = _raw(DEFAULTS["queue"]())
    lineage: msgspec.Raw = _raw(DEFAULTS["lineage"]())
    delivery_feedback: msgspec.Raw = _raw(DEFAULTS["delivery_feedback"]())
    evidence: msgspec.Raw = _raw(DEFAULTS["evidence"]())


class _Lane(msgspec.Struct, gc=False):
    tail: list[msgspec.Raw] = []


class LogDockPart(msgspec.Struct, gc=False):
    broken: str = ""
    latest_activity_at: str = ""
    event_count: int = 0
    live: _Lane = msgspec.field(default_factory=_Lane)
    logs: _Lane = msgspec.field(default_factory=_Lane)


_encode_feed = msgspec.json.Encoder().encode


class Feed(msgspec.Struct, gc=False):
    """The observability feed (spec: Resources / Observability feed)."""

    run_id: str
    project_slug: str
    live_channel_topic: str
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
    freshness: dict[str, str]
    latest_activity_at: str
    event_count: int
    pixel_agent_count: int
    runtime_log_count: int
    coordination_friction: msgspec.Raw


# ``Feed`` as the limit slices it: every field kept as it was encoded but the two bounded
# lists and the count that follows them (same fields, same order).
_BOUNDED = {"live_events": list[msgspec.Raw], "runtime_logs": list[msgspec.Raw], "runtime_log_count": int}
_Sliceable = msgspec.defstruct(
    "_Sliceable", [(name, _BOUNDED.get(name, msgspec.Raw)) for name in Feed.__struct_fields__], gc=False
)
_sliceable = msgspec.json.Decoder(_Sliceable)


def slice_feed(body: bytes, limit: int) -> bytes:
    """A feed's JSON composed for a larger limit cut to ``limit``: what ``compose_feed``
    answers for ``limit`` (the newest ``limit`` live events and runtime logs, the count set
    to match)."""
    feed: Any = _sliceable.decode(body)
    if len(feed.live_events) <= limit and len(feed.runtime_logs) <= limit:
        return body
    feed.live_events = feed.live_events[:limit]
    feed.runtime_logs = feed.runtime_logs[:limit]
    feed.runtime_log_count = len(feed.runtime_logs)
    return _encode_feed(feed)


_pixels = msgspec.json.Decoder(PixelsPart)
_surfaces = msgspec.json.Decoder(SurfacesPart)
_log_dock = msgspec.json.Decoder(LogDockPart)


def feed_reads(tenant: str, run_id: str, project_slug: str) -> dict[str, tuple[str, str]]:
    """Part -> (read model, key) of every document the feed of one run reads.

    (The fleet board row, which says the run exists and in which project, is the caller's.)
    """
    return {
        "pixels": ("pixels", pixels_doc_key(tenant, run_id)),
        "surfaces": ("surfaces", surfaces_doc_key(tenant, run_id)),
        "log_dock": ("log_dock", log_dock_doc_key(tenant, run_id)),
        "mirror": (MIRROR_NAME, mirror_doc_key(tenant, project_slug)),
    }


def feed_scans(tenant: str, run_id: str, limit: int) -> dict[str, Newest]:
    """The chunks holding the newest ``limit`` live events and log excerpts of the run."""
    return {
        "live_events": Newest("log_dock", live_partition(tenant, run_id), chunks_for(limit)),
        "runtime_logs": Newest("log_dock", logs_partition(tenant, run_id), chunks_for(limit)),
    }


class _Chunk(msgspec.Struct, gc=False):
    items: list[msgspec.Raw] = []


_chunk = msgspec.json.Decoder(_Chunk)


def newest_items(tail: list[msgspec.Raw], chunks: list[bytes], limit: int) -> list[msgspec.Raw]:
    """The newest ``limit`` items: the tail's, then the chunks' (given newest first); items are
    oldest first inside the tail and each chunk."""
    items: list[msgspec.Raw] = list(reversed(tail))
    for body in chunks:
        if len(items) >= limit:
            break
        items.extend(reversed(_chunk.decode(body).items))
    return items[:limit]


def _part(decoder: Any, raw: bytes | None, default: Any, run_id: str, part: str) -> Any:
    if raw is None:
        return default
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("feed_surface_default", run_id=run_id, part=part, reason=f"undecodable document: {exc}")
        return default


def _aged(queue: msgspec.Raw, heartbeat_at: str, latest: str, run_id: str) -> msgspec.Raw:
    """The queue with the heartbeat's age at the run's latest recorded activity."""
    try:
        doc = decode(queue)
        doc["heartbeat_age_seconds"] = seconds_between(heartbeat_at, max(latest, heartbeat_at))
        return _raw(doc)
    except Exception as exc:  # best-effort: the queue keeps its stored answer
        log.warning("feed_surface_default", run_id=run_id, part="queue", reason=repr(exc))
        return queue


def _mirror(raw: bytes | None, sessions: list[dict[str, Any]], run_id: str, project_slug: str) -> msgspec.Raw:
    """The mirror, its workspaces correlated with the run's sessions (their ids)."""
    try:
        doc = decode(raw) if raw is not None else None
        return _raw(compose_mirror(doc, sessions if doc is not None else [], project_slug))
    except Exception as exc:  # best-effort: the mirror falls back to its default alone
        log.warning("feed_surface_default", run_id=run_id, part="execution_workspace_mirror", reason=repr(exc))
        return _raw(default_mirror(project_slug))


def compose_feed(
    tenant: str,
    run_id: str,
    project_slug: str,
    parts: dict[str, bytes | None],
    rows: dict[str, list[bytes]],
    limit: int = DEFAULT_LIMIT,
) -> bytes:
    """The feed's JSON from the run's documents and rows (as ``feed_reads`` and
    ``feed_scans`` name them; rows newest first)."""
    pixels = _part(_pixels, parts.get("pixels"), PixelsPart(), run_id, "pixels")
    surfaces = _part(_surfaces, parts.get("surfaces"), SurfacesPart(), run_id, "surfaces")
    dock = _part(_log_dock, parts.get("log_dock"), LogDockPart(), run_id, "log_dock")
    if pixels.broken:
        log.warning("feed_surface_default", run_id=run_id, part="pixels", reason=pixels.broken)
    for surface, reason in surfaces.broken.items():
        log.warning("feed_surface_default", run_id=run_id, part=surface, reason=reason)
    if dock.broken:
        log.warning("feed_surface_default", run_id=run_id, part="log_dock", reason=dock.broken)
    queue = surfaces.queue
    if surfaces.heartbeat_at and "queue" not in surfaces.broken:
        queue = _aged(queue, surfaces.heartbeat_at, surfaces.latest_activity_at, run_id)
    if dock.broken:
        rows = {}
    live_events = newest_items(dock.live.tail, rows.get("live_events", []), limit)
    excerpts = newest_items(dock.logs.tail, rows.get("runtime_logs", []), limit)
    runtime_logs = (pixels.current_logs + excerpts)[:limit]
    latest = max(pixels.latest_activity_at, surfaces.latest_activity_at, dock.latest_activity_at)
    feed = Feed(
        run_id=run_id,
        project_slug=project_slug,
        live_channel_topic=live_channel_topic(tenant, run_id),
        live_events=live_events,
        pixel_agents=pixels.pixel_agents,
        runtime_logs=runtime_logs,
        execution_workspace_mirror=_mirror(parts.get("mirror"), pixels.sessions, run_id, project_slug),
        delivery=surfaces.delivery,
        source_ref=surfaces.source_ref,
        proposal=surfaces.proposal,
        queue=queue,
        lineage=surfaces.lineage,
        delivery_feedback=surfaces.delivery_feedback,
        evidence=surfaces.evidence,
        progress=pixels.progress,
        run_cost=pixels.run_cost,
        freshness={"latest_activity_at": latest},
        latest_activity_at=latest,
        event_count=dock.event_count,
        pixel_agent_count=pixels.pixel_agent_count,
        runtime_log_count=len(runtime_logs),
        coordination_friction=pixels.coordination_friction,
    )
    return _encode_feed(feed)


# -- the documents, wherever they are ---------------------------------------------------------


Run = tuple[str, str]  # (tenant, run_id)
Parts = tuple[dict[str, bytes | None], dict[str, list[bytes]]]  # as compose_feed reads them
PAGE = 500
_MISSING = object()
ChunkEncoder = Callable[[str, str, Any], bytes] | None  # (read model, key, document) -> its bytes


class _Board(msgspec.Struct, gc=False):
    project_slug: str = ""


_board = msgspec.json.Decoder(_Board)


def source_projectors() -> list[Projector]:
    """The projectors whose documents make up a run's feed (the board row says the run exists)."""
    return [FleetProjector(), PixelsProjector(), SurfacesProjector(), LogDockProjector(), MirrorProjector()]


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
        self, store: DocStore, batches: Mapping[str, BatchDocs] | None = None, encode_chunk: ChunkEncoder = None
    ) -> None:
        self.store = store
        self.batches = batches or {}
        self.encode_chunk = encode_chunk  # lane chunks' bytes kept across passes (feed_doc.SealedBodies)
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
        reads = {run: feed_reads(run[0], run[1], project) for run, project in wanted.items()}
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
                rows[(name, key)] = body if body is not None else self._body(name, key, missing, self.encode_chunk)
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
        self, name: str, key: str, unknown: dict[str, set[str]], encode_chunk: ChunkEncoder = None
    ) -> bytes | None:
        """The document's bytes from memory; None, noted in ``unknown``, when the store must say."""
        doc = self.held(name, key)
        if doc is _MISSING:
            unknown.setdefault(name, set()).add(key)
            return None
        if doc is None:
            return None
        return encode_chunk(name, key, doc) if encode_chunk is not None else encode(doc)

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


def _items(names: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    return [(name, key) for name, keys in names.items() for key in keys]


def run_feed(view: View, tenant: str, run_id: str, project_slug: str, limit: int) -> bytes:
    """The run's feed for ``limit`` from ``view``'s documents: composed for ``MAX_LIMIT`` and
    cut to ``limit``, the bytes its stored rows answer (``projections.studio.feed_doc``)."""
    parts, rows = view.gather({(tenant, run_id): project_slug})[(tenant, run_id)]
    return slice_feed(compose_feed(tenant, run_id, project_slug, parts, rows, MAX_LIMIT), limit)

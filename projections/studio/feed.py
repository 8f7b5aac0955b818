"""The observability feed of one run, composed from its read-model documents.

A feed read is one round trip: a few key lookups (the run's board row, its pixels and
surfaces views, its log dock head, the project's mirror) and the newest ``limit`` rows of
its live events and log excerpts; then a splice: everything is stored already in the
feed's shape, so it is copied into the answer as pre-encoded JSON (``msgspec.Raw``)
instead of being decoded and encoded again.
Live reads and time travel both compose through ``compose_feed``, so they agree byte for
byte on the same documents.

Every surface is best-effort: a missing, undecodable or broken document makes only its
own surfaces fall back to their empty-typed defaults (and says why in the log).

``limit`` bounds ``live_events`` and ``runtime_logs``; both are most recent first.
``runtime_logs`` lists the current-state entries first (one per agent that needs an
operator now), then diagnostic excerpts. ``event_count`` counts every live event of the
run so far; ``runtime_log_count`` and ``pixel_agent_count`` count the lists returned.
"""

from __future__ import annotations

from typing import Any

import msgspec
import structlog

from projections.engine.bulk import Newest
from projections.engine.docs import decode, encode
from projections.engine.stamps import seconds_between
from projections.studio import mirror_surface
from projections.studio.fleet import fleet_doc_key
from projections.studio.log_dock import chunks_for, live_partition, log_dock_doc_key, logs_partition
from projections.studio.pixels import empty_friction, empty_progress, empty_run_cost, pixels_doc_key
from projections.studio.surfaces import DEFAULTS, surfaces_doc_key

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

    ``run`` is the run's fleet board row: the small index that says the run exists and
    which project it belongs to.
    """
    reads = {
        "run": ("fleet", fleet_doc_key(tenant, run_id)),
        "pixels": ("pixels", pixels_doc_key(tenant, run_id)),
        "surfaces": ("surfaces", surfaces_doc_key(tenant, run_id)),
        "log_dock": ("log_dock", log_dock_doc_key(tenant, run_id)),
    }
    key = mirror_surface.mirror_key(tenant, project_slug)
    if key is not None:
        reads["mirror"] = (mirror_surface.MIRROR_NAME, key)
    return reads


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
        return _raw(mirror_surface.compose(doc, sessions if doc is not None else [], project_slug))
    except Exception as exc:  # best-effort: the mirror falls back to its default alone
        log.warning("feed_surface_default", run_id=run_id, part="execution_workspace_mirror", reason=repr(exc))
        return _raw(mirror_surface.default_mirror(project_slug))


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

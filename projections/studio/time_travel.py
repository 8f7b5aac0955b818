"""Time travel: a run's feed exactly as it was at a log position, from the event log.

Only the events that can change the run's feed are read: the run's own events, those of
its sessions (named by the run's ``SessionOpened`` events), those of its project's
workspace leases (the mirror is per project), the gate's events for the run (from the
threads named by the run's id or its proposal's) and its metered model requests, selected by aggregate id with the log
position bound in SQL. They are folded in memory by the same projectors that keep the
live read models, and the feed is produced from them as the stored one is
(``feed.run_feed``, over a ``MemoryView``): nothing is stored, nothing re-fires. Every per-run document
depends only on those events, so the answer equals the live feed at that position byte
for byte.

``as_of`` (a timestamp) answers the feed right after the last of those events stamped
at or before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from eventsourcing.persistence import Notification

from domain.gate import events as gate
from domain.gate.thread import thread_key_id
from domain.shared.clock import iso
from domain.shared.ids import lease_key, run_key, session_key
from domain.studio import events as ev
from projections.engine.docs import MemoryDocs, decode, encode
from projections.engine.envelope import Envelope, envelope
from projections.studio.feed import (
    MAX_LIMIT,
    Parts,
    Run,
    View,
    board_project,
    feed_reads,
    feed_scans,
    run_feed,
    source_projectors,
)
from projections.studio.fleet import fleet_doc_key


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
            for part, (name, key) in feed_reads(tenant, run_id, project_slug).items():
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


class RunNotYet(LookupError):
    """The run had no event at or before the asked position or time."""


class EventSelector:
    """Selects events by aggregate id up to a position, straight from the event store."""

    def __init__(self, event_store: Any) -> None:
        self.recorder = event_store.recorder
        self.mapper = event_store.mapper
        self.dialect = recorder_dialect(self.recorder)

    def select(self, ids: Sequence[str], upto: int) -> list[Envelope]:
        ids = sorted(set(ids))
        if not ids or upto <= 0:
            return []
        if self.dialect == "postgres":
            notes = self._postgres(ids, upto)
        elif self.dialect == "sqlite":
            notes = self._sqlite(ids, upto)
        else:
            notes = self._scan(ids, upto)
        return [envelope(n, self.mapper) for n in notes]

    def max_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    def _postgres(self, ids: list[str], upto: int) -> list[Notification]:
        from psycopg.sql import SQL, Identifier

        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {}.{} "
            "WHERE originator_id = ANY(%s) AND notification_id <= %s ORDER BY notification_id"
        ).format(Identifier(self.recorder.datastore.schema), Identifier(self.recorder.events_table_name))
        with self.recorder.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(statement, (ids, upto))
            rows = cursor.fetchall()
        return [
            _note(r["notification_id"], r["originator_id"], r["originator_version"], r["topic"], r["state"]) for r in rows
        ]

    def _sqlite(self, ids: list[str], upto: int) -> list[Notification]:
        table = self.recorder.events_table_name
        marks = ",".join("?" * len(ids))
        statement = (
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {table} "
            f"WHERE originator_id IN ({marks}) AND rowid <= ? ORDER BY rowid"
        )
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [*ids, upto])
            rows = cursor.fetchall()
        return [_note(*r) for r in rows]

    def _scan(self, ids: list[str], upto: int) -> list[Notification]:
        wanted, found, position = set(ids), [], 0
        while position < upto:
            page = self.recorder.select_notifications(start=position + 1, limit=5000, stop=upto)
            if not page:
                break
            found.extend(n for n in page if n.originator_id in wanted)
            position = page[-1].id
        return found


def _note(position: int, originator_id: str, version: int, topic: str, state: bytes) -> Notification:
    return Notification(
        id=position, originator_id=originator_id, originator_version=version, topic=topic, state=bytes(state)
    )


def recorder_dialect(recorder: Any) -> str:
    from eventsourcing.postgres import PostgresApplicationRecorder
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    if isinstance(recorder, PostgresApplicationRecorder):
        return "postgres"
    if isinstance(recorder, SQLiteApplicationRecorder):
        return "sqlite"
    return "other"


UsageIds = Callable[[str, str, int], Sequence[str]]


class TimeTravel:
    """Answers a run's feed at a past position (or time) from the event log alone.

    ``usage_ids(tenant, run_id, upto)`` names the run's metered model requests (each its own
    aggregate: ``projections.workspaces.usage.record_ids``), so its cost is as it was too."""

    def __init__(self, selector: EventSelector, usage_ids: UsageIds | None = None) -> None:
        self.selector = selector
        self.usage_ids = usage_ids

    def run_events(
        self, tenant: str, run_id: str, project_slug: str, upto: int, workspaces: Sequence[str] = ()
    ) -> list[Envelope]:
        """Every event up to ``upto`` that can change the feed of this run."""
        run_events = self.selector.select([run_key(tenant, run_id)], upto)
        if not run_events:
            return []
        sessions = [
            session_key(tenant, run_id, e.event.session_id, e.event.agent_id)
            for e in run_events
            if isinstance(e.event, ev.RunSessionOpened)
        ]
        session_events = self.selector.select(sessions, upto)
        names = set(workspaces) | {
            e.event.workspace_name
            for e in session_events
            if isinstance(e.event, ev.ProcessStarted) and e.event.workspace_name
        }
        leases = [lease_key(tenant, project_slug, name) for name in names]
        lease_events = self.selector.select(leases, upto)
        # The gate publishes for a run from a thread named by the run's id or its proposal's.
        launched = next((e.event for e in run_events if isinstance(e.event, ev.RunLaunched)), None)
        proposal = str(((launched.proposal or {}).get("proposal_id") or "") if launched else "")
        threads = [thread_key_id(tenant, key) for key in (run_id, proposal) if key]
        gate_events = [e for e in self.selector.select(threads, upto) if gate.run_of(e.event) == run_id]
        usage_events = self.selector.select(self.usage_ids(tenant, run_id, upto), upto) if self.usage_ids else []
        return sorted(run_events + session_events + lease_events + gate_events + usage_events, key=lambda e: e.position)

    def position_at(self, events: Sequence[Envelope], moment: str) -> int:
        """The position of the last event stamped at or before ``moment`` (0: none)."""
        stamped = [e.position for e in events if e.at <= moment]
        return max(stamped, default=0)

    def feed(
        self,
        tenant: str,
        run_id: str,
        project_slug: str,
        *,
        position: int | None = None,
        moment: str = "",
        limit: int,
        workspaces: Sequence[str] = (),
    ) -> tuple[bytes, int]:
        """(the feed's JSON, the position it answers) at ``position`` or at ``moment``."""
        head = self.selector.max_position()
        upto = head if position is None else min(position, head)
        events = self.run_events(tenant, run_id, project_slug, upto, workspaces)
        if moment:
            upto = self.position_at(events, moment)
            events = [e for e in events if e.position <= upto]
        if not any(e.kind == "Run.Launched" for e in events):
            raise RunNotYet(run_id)
        return run_feed(MemoryView(fold(events)), tenant, run_id, project_slug, limit), upto


def fold(events: Sequence[Envelope]) -> dict[str, MemoryDocs]:
    """The feed's source read models folded in memory from ``events``."""
    projectors = source_projectors()
    docs = {p.name: MemoryDocs() for p in projectors}
    for env in events:
        for projector in projectors:
            if projector.wants(env):
                projector.apply(env, docs[projector.name])
    return docs


def workspace_names(mirror_doc: bytes | None) -> list[str]:
    """Workspace names the live mirror document knows for the project."""
    if mirror_doc is None:
        return []
    workspaces = decode(mirror_doc).get("workspaces", {})
    return sorted(workspaces) if isinstance(workspaces, dict) else []


_RFC3339 = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}:[0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")
EARLIEST = "0001-01-01T00:00:00.000000Z"
LATEST = "9999-12-31T23:59:59.999999Z"


def parse_moment(text: str) -> str:
    """An RFC 3339 date-time (the OpenAPI ``date-time`` format) in the stored form (UTC,
    microseconds, ``Z``); ValueError if it is not one.

    Every RFC 3339 instant answers: a leap second is the last instant of its minute, and
    one before year 1 or after 9999 in UTC is clamped to the first or last instant.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError("expected an RFC 3339 date-time with a time zone, such as 2026-01-02T03:04:05Z")
    day, minutes, seconds, fraction, offset = match.groups()
    if day.startswith("0000-"):
        return EARLIEST
    leap = seconds == "60"
    offset = "+00:00" if offset in ("Z", "z") else offset
    moment = datetime.fromisoformat(f"{day}T{minutes}:{'59' if leap else seconds}{(fraction or '')[:7]}{offset}")
    if leap:
        moment = moment.replace(microsecond=999_999)
    try:
        return iso(moment)
    except OverflowError:
        return EARLIEST if moment.year == 1 else LATEST

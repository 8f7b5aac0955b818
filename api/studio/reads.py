"""Queries over the read models (never the event store) for the API's read endpoints."""

from __future__ import annotations

from typing import Any

import msgspec

from api.studio.runs_dto import (
    HandoffEntry,
    HandoffTrail,
    RunRecord,
    SessionStateEntry,
    SessionStateResponse,
    TickReport,
)
from domain.shared.errors import run_not_found
from domain.shared.ids import is_valid_id
from projections.engine.store import DocStore
from projections.projects.projects import project_doc_key
from projections.studio.runs import handoff_partition, report_partition, run_doc_key

_decode = msgspec.json.Decoder(dict).decode
_reports = msgspec.json.Decoder(TickReport)
_handoffs = msgspec.json.Decoder(HandoffEntry)


class StudioReads:
    """Queries over the runs' and the projects' read models (never the event store)."""

    def __init__(self, store: DocStore) -> None:
        self.store = store

    # -- runs -------------------------------------------------------------------------------

    def run_doc(self, tenant: str, run_id: str) -> dict[str, Any]:
        raw = self.store.get("runs", run_doc_key(tenant, run_id)) if is_valid_id(run_id) else None
        if raw is None:
            raise run_not_found(run_id)
        return _decode(raw)

    def run_record(self, tenant: str, run_id: str) -> RunRecord:
        doc = self.run_doc(tenant, run_id)
        doc["sessions"] = [doc["sessions"][a] for a in doc.pop("session_order") if a in doc["sessions"]]
        return msgspec.convert(doc, RunRecord)

    def session_state(self, tenant: str, run_id: str) -> SessionStateResponse:
        doc = self.run_doc(tenant, run_id)
        sessions = [
            msgspec.convert(doc["sessions"][agent_id], SessionStateEntry)
            for agent_id in doc["session_order"]
            if agent_id in doc["sessions"]
        ]
        return SessionStateResponse(run_id=run_id, status=doc["status"], sessions=sessions)

    def reports(self, tenant: str, run_id: str, *, after_tick: int = 0, limit: int = 500) -> list[TickReport]:
        self.run_doc(tenant, run_id)
        rows = self.store.scan(
            "runs", partition=report_partition(tenant, run_id), after=f"{after_tick:09d}", limit=limit
        )
        return [_reports.decode(row.body) for row in rows]

    def handoff_trail(self, tenant: str, run_id: str) -> HandoffTrail:
        doc = self.run_doc(tenant, run_id)
        rows = self.store.scan("runs", partition=handoff_partition(tenant, run_id), limit=100_000)
        return HandoffTrail(
            run_id=run_id,
            handoff_count=doc["handoff_count"],
            handoffs=[_handoffs.decode(row.body) for row in rows],
        )

    # -- projects -------------------------------------------------------------------------

    def project_doc(self, tenant: str, slug: str) -> dict[str, Any] | None:
        raw = self.store.get("projects", project_doc_key(tenant, slug)) if is_valid_id(slug) else None
        return _decode(raw) if raw is not None else None

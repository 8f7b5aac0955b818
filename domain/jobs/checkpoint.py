"""The SyncCheckpoint aggregate: how far one connector's scope has been synced."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.jobs.events import CheckpointAdvanced, CheckpointOpened
from domain.jobs.job_written import JobWritten
from domain.shared.ids import derived_id


def checkpoint_key(tenant: str, connector_id: str, scope: str) -> str:
    return f"chk:{tenant}:{connector_id}:{scope}"


def checkpoint_id(tenant: str, connector_id: str, scope: str) -> str:
    """The checkpoint's opaque id: the same (tenant, connector, scope) always give the same."""
    return derived_id("chk", tenant, connector_id, scope)


class SyncCheckpoint(JobWritten):
    """The cursor of one (connector, scope) of a tenant, and what the last sync said of it."""

    @staticmethod
    def create_id(tenant: str, connector_id: str, scope: str) -> str:
        return checkpoint_key(tenant, connector_id, scope)

    @event(CheckpointOpened)
    def __init__(
        self,
        *,
        tenant: str,
        checkpoint_id: str,
        connector_id: str,
        scope: str,
        cursor_value: str,
        meta: dict[str, Any],
        job_id: str,
        at: str,
    ) -> None:
        self.tenant = tenant
        self.checkpoint_id = checkpoint_id
        self.connector_id = connector_id
        self.scope = scope
        self._take(at, cursor_value=cursor_value, meta=meta)

    def advance(self, *, cursor_value: str, meta: dict[str, Any], job_id: str, at: str) -> bool:
        """Records the new cursor and meta; answers False (records nothing) when unchanged."""
        return self._replace(self._advanced, cursor_value=cursor_value, meta=meta, job_id=job_id, at=at)

    @event(CheckpointAdvanced)
    def _advanced(self, cursor_value: str, meta: dict[str, Any], job_id: str, at: str) -> None:
        self._take(at, cursor_value=cursor_value, meta=meta)

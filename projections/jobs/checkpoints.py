"""Sync checkpoints read model: one document per (tenant, connector, scope).

``chk/<tenant>/<connector_id>/<scope>`` in partition ``checkpoints/<tenant>`` (sorted by
connector, then scope), in the shape ``GET /v1/sync/checkpoints`` answers.
"""

from __future__ import annotations

from typing import Any

from domain.jobs import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope


def checkpoint_doc_key(tenant: str, connector_id: str, scope: str) -> str:
    return f"chk/{tenant}/{connector_id}/{scope}"


def checkpoints_partition(tenant: str) -> str:
    return f"checkpoints/{tenant}"


class CheckpointsProjector(Projector):
    name = "sync_checkpoints"

    @handles(ev.CheckpointOpened)
    def checkpoint_opened(self, e: ev.CheckpointOpened, env: Envelope, docs: Docs) -> None:
        doc = {
            "tenant_id": env.tenant,
            "id": e.checkpoint_id,
            "connector_id": e.connector_id,
            "scope": e.scope,
            "cursor_value": e.cursor_value,
            "meta": e.meta,
            "updated_at": e.at,
        }
        self._store(env, docs, doc)

    @handles(ev.CheckpointAdvanced)
    def checkpoint_advanced(self, e: ev.CheckpointAdvanced, env: Envelope, docs: Docs) -> None:
        doc = docs.get(self._key(env))
        if doc is not None:
            doc.update(cursor_value=e.cursor_value, meta=e.meta, updated_at=max(doc["updated_at"], e.at))
            self._store(env, docs, doc)

    @staticmethod
    def _key(env: Envelope) -> str:
        _, tenant, connector_id, scope = env.originator_id.split(":", 3)
        return checkpoint_doc_key(tenant, connector_id, scope)

    def _store(self, env: Envelope, docs: Docs, doc: dict[str, Any]) -> None:
        _, tenant, connector_id, scope = env.originator_id.split(":", 3)
        docs.put(self._key(env), doc, partition=checkpoints_partition(tenant), sort_key=f"{connector_id}/{scope}")

"""Sync checkpoints read model: one document per (tenant, connector, scope).

``chk/<tenant>/<connector_id>/<scope>`` in partition ``checkpoints/<tenant>`` (sorted by
connector, then scope), in the shape ``GET /v1/sync/checkpoints`` answers.
"""

from __future__ import annotations

from domain.jobs import events as ev
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope


def checkpoint_doc_key(tenant: str, connector_id: str, scope: str) -> str:
    return f"chk/{tenant}/{connector_id}/{scope}"


def checkpoints_partition(tenant: str) -> str:
    return f"checkpoints/{tenant}"


class CheckpointsProjector(Projector):
    name = "sync_checkpoints"
    topics = frozenset(ev.kind_of(e) for e in ev.CHECKPOINT_EVENTS)

    def apply(self, env: Envelope, docs: Docs) -> None:
        event = env.event
        _, tenant, connector_id, scope = env.originator_id.split(":", 3)
        key = checkpoint_doc_key(tenant, connector_id, scope)
        if isinstance(event, ev.CheckpointOpened):
            doc = {
                "tenant_id": tenant,
                "id": event.checkpoint_id,
                "connector_id": event.connector_id,
                "scope": event.scope,
                "cursor_value": event.cursor_value,
                "meta": event.meta,
                "updated_at": event.at,
            }
        else:
            found = docs.get(key)
            if found is None:
                return
            doc = found
            doc.update(cursor_value=event.cursor_value, meta=event.meta, updated_at=max(doc["updated_at"], event.at))
        docs.put(key, doc, partition=checkpoints_partition(tenant), sort_key=f"{connector_id}/{scope}")

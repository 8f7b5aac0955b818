"""Stored events as projectors read them: position, aggregate, kind and raw payload.

Projectors work on the stored JSON directly (decoded once by msgspec) instead of
rebuilding domain event objects: faster, and it keeps read models independent of the
domain classes' import paths.
"""

from __future__ import annotations

from typing import Any

import msgspec

from projections.engine.stored_json import load_json

_decode = msgspec.json.Decoder(dict).decode


class Envelope(msgspec.Struct, frozen=True, gc=False):
    position: int
    originator_id: str
    version: int
    kind: str  # "Run.Launched", "AgentSession.ToolCalled", ...
    at: str  # the event's timestamp, ISO 8601 UTC with microseconds and "Z"
    data: dict[str, Any]

    @property
    def aggregate_type(self) -> str:
        return self.kind.partition(".")[0]

    @property
    def name(self) -> str:
        return self.kind.partition(".")[2]

    @property
    def scope(self) -> tuple[str, ...]:
        """``(prefix, tenant, ...)`` from the aggregate id (see ``domain.shared.ids``)."""
        return tuple(self.originator_id.split(":"))

    @property
    def tenant(self) -> str:
        parts = self.originator_id.split(":")
        return parts[1] if len(parts) > 1 else ""

    @property
    def run_id(self) -> str:
        parts = self.originator_id.split(":")
        return parts[2] if parts[0] in ("run", "ses") and len(parts) > 2 else ""

    @property
    def session_id(self) -> str:
        parts = self.originator_id.split(":")
        return parts[3] if parts[0] == "ses" and len(parts) > 4 else ""

    @property
    def agent_id(self) -> str:
        parts = self.originator_id.split(":")
        return parts[4] if parts[0] == "ses" and len(parts) > 4 else ""

    @property
    def event_id(self) -> str:
        """The event's id on the live channel: its position in the log."""
        return str(self.position)


def event_time(raw: Any) -> str:
    """``2026-01-02T03:04:05.000006Z`` from the transcoder's datetime form."""
    text = raw.get("_data_", "") if isinstance(raw, dict) else str(raw or "")
    if not text:
        return ""
    if text.endswith("+00:00"):
        text = text[:-6]
    elif text.endswith("Z"):
        text = text[:-1]
    if "." not in text:
        text += ".000000"
    return text + "Z"


def kind_of(topic: str) -> str:
    """``domain.studio.session:AgentSession.ToolCalled`` -> ``AgentSession.ToolCalled``."""
    return topic.rpartition(":")[2]


def envelope(notification: Any) -> Envelope:
    data = load_json(notification.state, _decode)
    return Envelope(
        position=notification.id,
        originator_id=notification.originator_id,
        version=notification.originator_version,
        kind=kind_of(notification.topic),
        at=event_time(data.pop("timestamp", "")),
        data=data,
    )

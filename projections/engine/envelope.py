"""Stored events as projectors read them: position, aggregate, kind and the typed event.

Each stored event is read back once, by the event store's own mapper, into the class its
area declares (``projections.engine.contracts``), the class its aggregate applied:
projectors dispatch on that class and read its attributes, never payload keys. A kind no
area declares (or a payload that cannot be read, which is logged) has ``event`` None, and
projectors leave it alone. No reader needs the raw payload, so none is kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
import structlog
from eventsourcing.persistence import MapperDeserialisationError
from eventsourcing.utils import TopicError
from msgspec.structs import force_setattr

from projections.engine.contracts import CONTRACTS
from projections.engine.stored_json import load_json

log = structlog.get_logger("squadops.projections.envelope")



class _Stamped(msgspec.Struct):
    """Only the library's timestamp of an event no contract reads."""

    timestamp: Any = None


_decode_stamp = msgspec.json.Decoder(_Stamped).decode


class Envelope(msgspec.Struct, frozen=True, gc=False):
    position: int
    originator_id: str
    version: int
    kind: str  # "Run.Launched", "AgentSession.ToolCalled", ...
    at: str  # the event's timestamp, ISO 8601 UTC with microseconds and "Z"
    event: Any = None  # the payload as its declared Struct; None when no contract fits
    # Read from ``originator_id`` and ``kind`` when the envelope is made (never passed by
    # hand): every projector asks for them on every event.
    tenant: str = ""
    run_id: str = ""
    session_id: str = ""
    agent_id: str = ""
    aggregate_type: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not self.aggregate_type:  # made by hand (``envelope`` passes them all)
            for field, value in zip(DERIVED, derived(self.originator_id, self.kind), strict=True):
                force_setattr(self, field, value)

    @property
    def scope(self) -> tuple[str, ...]:
        """``(prefix, tenant, ...)`` from the aggregate id (see ``domain.shared.ids``)."""
        return tuple(self.originator_id.split(":"))

    @property
    def event_id(self) -> str:
        """The event's id on the live channel: its position in the log."""
        return str(self.position)


DERIVED = ("tenant", "run_id", "session_id", "agent_id", "aggregate_type", "name")


def _scope_fields(originator_id: str) -> tuple[str, str, str, str]:
    """(tenant, run_id, session_id, agent_id) of an aggregate id (see ``domain.shared.ids``)."""
    parts = originator_id.split(":")
    tenant = parts[1] if len(parts) > 1 else ""
    run_id = parts[2] if parts[0] in ("run", "ses") and len(parts) > 2 else ""
    if parts[0] == "ses" and len(parts) > 4:
        return tenant, run_id, parts[3], parts[4]
    return tenant, run_id, "", ""


# An aggregate's events come in runs of many: its id is split once, then remembered (the
# memory is dropped whole when it fills, so it stays bounded on a long log).
_scopes: dict[str, tuple[str, str, str, str]] = {}
_SCOPES_KEPT = 50_000
_kinds: dict[str, tuple[str, str]] = {}


def derived(originator_id: str, kind: str) -> tuple[str, ...]:
    """The envelope's ``DERIVED`` fields, in that order."""
    scope = _scopes.get(originator_id)
    if scope is None:
        if len(_scopes) >= _SCOPES_KEPT:
            _scopes.clear()
        scope = _scopes[originator_id] = _scope_fields(originator_id)
    names = _kinds.get(kind)
    if names is None:
        aggregate_type, _, name = kind.partition(".")
        names = _kinds[kind] = (aggregate_type, name)
    return scope + names


def event_time(raw: Any) -> str:
    """``2026-01-02T03:04:05.000006Z`` from an event's timestamp (or the stored form of one)."""
    if type(raw) is datetime:
        text = raw.isoformat(timespec="microseconds")
        return (text[:-6] if text.endswith("+00:00") else text) + "Z"
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


def stored_time(text: str) -> str | None:
    """``event_time`` of the datetime read from ``text``, taken from the text itself when it is
    in the form Python writes a UTC time with microseconds (``2026-01-02T03:04:05.000006+00:00``,
    how events are stored); None for any other form."""
    if len(text) == 32 and text[10] == "T" and text[19] == "." and text.endswith("+00:00"):
        return text[:26] + "Z"
    return None


def kind_of(topic: str) -> str:
    """``domain.studio.session:AgentSession.ToolCalled`` -> ``AgentSession.ToolCalled``."""
    return topic.rpartition(":")[2]


def envelope(notification: Any, mapper: Any) -> Envelope:
    """``notification`` with its event read back by ``mapper`` (the event store's own) into
    the class its area declares; an event of a kind no area declares has ``event`` None."""
    kind = kind_of(notification.topic)
    event: Any = None
    at = None
    if kind in CONTRACTS:
        try:
            read = getattr(mapper, "to_domain_event_stamped", None)  # the event store's own mapper has it
            if read is None:
                event = mapper.to_domain_event(notification)
            else:
                event, text = read(notification)
                at = stored_time(text) if type(text) is str else None
        except (TopicError, MapperDeserialisationError) as exc:
            log.warning("event_unreadable", position=notification.id, kind=kind, error=str(exc))
    if at is None:
        stamp = event.timestamp if event is not None else None
        if event is None:
            stamped = load_json(notification.state, _decode_stamp)
            stamp = stamped.get("timestamp", "") if isinstance(stamped, dict) else stamped.timestamp
        at = event_time(stamp)
    return Envelope(
        notification.id,
        notification.originator_id,
        notification.originator_version,
        kind,
        at,
        event,
        *derived(notification.originator_id, kind),
    )

"""Stored events as projectors read them: position, aggregate, kind and the typed event.

Each stored event is decoded once, straight from its JSON into the Struct its area
declares for its kind (``projections.engine.contracts``): projectors dispatch on the
event's type and read typed attributes, never payload keys, so a renamed field fails
loudly in one place instead of projecting blanks. A kind no area declares (or a payload
that does not fit its contract, which is logged) has ``event`` None, and projectors leave
it alone. No reader needs the raw payload, so none is kept.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import structlog
from msgspec.structs import force_setattr

from projections.engine.contracts import DECODERS, STORED, UPCASTERS, upcast
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
    kind = kind_of(notification.topic)
    decoder = DECODERS.get(kind)
    if decoder is not None:
        try:
            event = decoder.decode(notification.state)
        except msgspec.DecodeError:
            event = _tolerant(kind, notification)
        if event is not None and kind in UPCASTERS:
            event = upcast(kind, event)
        if event is not None:
            return Envelope(
                notification.id,
                notification.originator_id,
                notification.originator_version,
                kind,
                event_time(event.timestamp),
                event,
                *derived(notification.originator_id, kind),
            )
    stamped = load_json(notification.state, _decode_stamp)
    stamp = stamped.get("timestamp", "") if isinstance(stamped, dict) else stamped.timestamp
    return Envelope(
        notification.id,
        notification.originator_id,
        notification.originator_version,
        kind,
        event_time(stamp),
        None,
        *derived(notification.originator_id, kind),
    )


def _tolerant(kind: str, notification: Any) -> Any:
    """A payload the fast path refused: JSON with NaN/Infinity (Python's ``json`` wrote
    them), or values of a looser type; None (untyped) if it does not fit its contract."""
    try:
        return msgspec.convert(json.loads(notification.state), STORED[kind], strict=False)
    except (ValueError, msgspec.ValidationError) as exc:
        log.warning("event_contract_mismatch", position=notification.id, kind=kind, error=str(exc))
        return None

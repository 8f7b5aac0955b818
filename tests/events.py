"""Events for tests: the class ``projections.engine.contracts`` declares for a kind, with
the fields given and zero values for the rest."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, datetime
from typing import Any

from projections.engine.contracts import CONTRACTS
from projections.engine.envelope import Envelope

STAMP = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)


def _zero(kind: Any) -> Any:
    origin = typing.get_origin(kind) or kind
    if origin in (str,):
        return ""
    if origin in (int, float):
        return 0
    if origin is bool:
        return False
    if origin in (dict,):
        return {}
    if origin in (list,):
        return []
    return None


def typed(kind: str, originator_id: str = "", **fields: Any) -> Any:
    """The event of ``kind`` (``"AgentSession.ToolCalled"``) with ``fields``."""
    event_type = CONTRACTS[kind]
    hints = typing.get_type_hints(event_type)
    values = {
        f.name: _zero(hints[f.name]) for f in dataclasses.fields(event_type)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    values.update(originator_id=originator_id, originator_version=1, timestamp=STAMP)
    return event_type(**{**values, **fields})


def envelope_of(position: int, originator: str, kind: str, at: str = "", **fields: Any) -> Envelope:
    event = typed(kind, originator, **fields) if kind in CONTRACTS else None
    return Envelope(position, originator, 1, kind, at, event)


def kind_of(event: Any) -> str:
    """The stored kind of an aggregate's event (``"WorkspaceLease.Verified"``)."""
    return str(type(event).TOPIC).rpartition(":")[2]


def named(event: Any) -> str:
    """The stored name of an aggregate's event (``"Verified"``)."""
    return kind_of(event).rpartition(".")[2]

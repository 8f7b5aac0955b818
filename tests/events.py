"""Typed events for tests: a contract of ``projections.engine.contracts`` with the fields
given and zero values for the rest."""

from __future__ import annotations

import typing
from typing import Any

import msgspec

from projections.engine.contracts import CONTRACTS
from projections.engine.envelope import Envelope


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


def typed(kind: str, **fields: Any) -> Any:
    """The event of ``kind`` (``"AgentSession.ToolCalled"``) with ``fields``."""
    contract = CONTRACTS[kind]
    values = {f.name: _zero(f.type) for f in msgspec.structs.fields(contract) if f.required}
    return contract(**{**values, **fields})


def envelope_of(position: int, originator: str, kind: str, at: str = "", **fields: Any) -> Envelope:
    event = typed(kind, **fields) if kind in CONTRACTS else None
    return Envelope(position, originator, 1, kind, at, event)

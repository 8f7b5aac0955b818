"""Stored payloads of the jobs area as their declared event Structs."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.jobs.events import BY_KIND
from projections.engine.envelope import Envelope


def typed(env: Envelope) -> Any:
    """The event's payload as its Struct; a payload that does not fit raises (the runner
    retries the projector and reports it; an event is never skipped)."""
    return msgspec.convert(env.data, BY_KIND[env.kind])

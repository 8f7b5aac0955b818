"""Times an event carries, for read models whose times are maxima of stored timestamps."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from projections.engine.envelope import Envelope

# Contract fields that hold a time the event reports (all in the one stored ISO form).
TIME_FIELDS = ("at", "requested_at", "started_at", "updated_at")


@cache
def time_fields(contract: type) -> tuple[str, ...]:
    """The reported-time fields an event class declares (computed once per event type)."""
    declared = getattr(contract, "__dataclass_fields__", ())
    return tuple(name for name in TIME_FIELDS if name in declared)


# Several projectors ask for the same event's stamp in a row: remember the last one
# (one tuple, swapped atomically, so threads never mix two events' answers).
_last: tuple[Envelope | None, str] = (None, "")


def stamp(env: Envelope) -> str:
    """The latest of the event's own timestamp and the times its payload reports."""
    global _last
    cached = _last
    if cached[0] is env:
        return cached[1]
    latest = env.at
    event = env.event
    for name in time_fields(type(event)):
        value = getattr(event, name)
        if isinstance(value, str) and value > latest:
            latest = value
    _last = (env, latest)
    return latest


def seconds_between(earlier: str, later: str) -> int:
    """Whole seconds from ``earlier`` to ``later`` (0 when not later)."""
    delta = datetime.fromisoformat(later) - datetime.fromisoformat(earlier)
    return max(0, int(delta.total_seconds()))

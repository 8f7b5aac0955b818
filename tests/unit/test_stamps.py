"""An event's stamp is the latest of its stored timestamp and the times its payload reports."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from domain.studio.events import ExecutionRequested
from projections.engine.envelope import Envelope
from projections.engine.stamps import stamp, time_fields


def requested(at: str) -> ExecutionRequested:
    return ExecutionRequested(
        originator_id=uuid4(), originator_version=2, timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        requested_at=at, requested_by="operator@example.com", follow_up=False,
    )


def test_an_event_class_declares_its_reported_times() -> None:
    assert time_fields(ExecutionRequested) == ("requested_at",)


def test_a_reported_time_later_than_the_stored_one_is_the_stamp() -> None:
    env = Envelope(7, "run:default:r1", 2, "Run.ExecutionRequested", "2026-01-01T00:00:00.000000Z",
                   requested("2026-01-01T00:00:05.000000Z"))
    assert stamp(env) == "2026-01-01T00:00:05.000000Z"


def test_an_earlier_reported_time_leaves_the_stored_one() -> None:
    env = Envelope(8, "run:default:r1", 2, "Run.ExecutionRequested", "2026-01-01T00:00:09.000000Z",
                   requested("2026-01-01T00:00:05.000000Z"))
    assert stamp(env) == "2026-01-01T00:00:09.000000Z"

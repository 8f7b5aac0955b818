"""Aggregate base classes with string ids, so ids can carry tenant and run scope."""

from __future__ import annotations

from datetime import datetime

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    MetaDomainEvent,
)


class DomainEvent(metaclass=MetaDomainEvent):
    """A fact in the past tense; its fields are primitives so projectors read it raw."""

    originator_id: str
    originator_version: int
    timestamp: datetime


class Aggregate(BaseAggregate[str]):
    """Base for every squadops aggregate: string id, frozen dataclass events."""

    class Event(DomainEvent, CanMutateAggregate[str]):
        pass

    class Created(Event, CanInitAggregate[str]):
        originator_topic: str

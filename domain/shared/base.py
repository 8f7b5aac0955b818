"""Aggregate base classes with string ids, so ids can carry tenant and run scope."""

from __future__ import annotations

from datetime import datetime

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    MetaDomainEvent,
)
from eventsourcing.utils import register_topic


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


def keep_stored_topics(aggregate: type[Aggregate], module: str) -> None:
    """Writes and reads ``aggregate``'s events under the topics of ``module``.

    Stored events live forever and name their class by topic (``domain.run:Run.Launched``),
    and the aggregate's own topic is stored inside its created event. When a module moves,
    its aggregates keep the topics the log already holds, so an existing database reads the
    same and new events are written byte for byte as before.
    """
    classes = [aggregate] + [
        value for value in vars(aggregate).values() if isinstance(value, type) and issubclass(value, Aggregate.Event)
    ]
    for cls in classes:
        topic = f"{module}:{cls.__qualname__}"
        cls.TOPIC = topic  # type: ignore[attr-defined]
        register_topic(topic, cls)

"""Aggregate and event base classes with string ids, so ids can carry tenant and run scope.

Each area declares its events once, as classes in its ``events.py``, and its aggregates
apply them by class, as in the library's examples::

    class TrickAdded(Aggregate.Event):
        TOPIC = "domain.dog:Dog.TrickAdded"
        trick: str

    class Dog(Aggregate):
        @event(TrickAdded)
        def add_trick(self, trick: str) -> None: ...

An event's ``TOPIC`` is the name it is stored under; stored events live forever, so the
topic is the one the log already holds (events first written by classes that have since
moved keep their old names), and projectors read the same class back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    CommandMethodDecorator,
    MetaDomainEvent,
)
from eventsourcing.utils import register_topic


class DomainEvent(metaclass=MetaDomainEvent):
    """A fact in the past tense; its fields are JSON values so projectors read them raw."""

    originator_id: str
    originator_version: int
    timestamp: datetime


class Aggregate(BaseAggregate[str]):
    """Base for every squadops aggregate: string id, frozen dataclass events."""

    class Event(DomainEvent, CanMutateAggregate[str]):
        pass

    class Created(Event, CanInitAggregate[str]):
        originator_topic: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The library finds the class given to ``@event(...)`` among the aggregate's attributes.
        for value in list(vars(cls).values()):
            if isinstance(value, CommandMethodDecorator) and value.given_event_cls is not None:
                setattr(cls, value.given_event_cls.__name__, value.given_event_cls)
        super().__init_subclass__(**kwargs)
        # The library triggers its own subclass of each given class (it carries the
        # method): the stored topic names that subclass, so a replay meets the method.
        for value in vars(cls).values():
            if isinstance(value, type) and issubclass(value, CanMutateAggregate) and "TOPIC" not in vars(value):
                topic = getattr(value, "TOPIC", None)
                if topic:
                    register_topic(topic, value)


def stored_topic(aggregate: type[Aggregate], topic: str) -> None:
    """Writes and reads ``aggregate`` under ``topic`` (kept in its created event) after its
    module moved, so an existing log reads the same and new events are written as before."""
    aggregate.TOPIC = topic  # type: ignore[attr-defined]
    register_topic(topic, aggregate)

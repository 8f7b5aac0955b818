"""Handlers chosen by an event's class in one dict lookup.

A ``match`` over many class patterns tests them one by one, each an ``isinstance`` through
msgspec's metaclass (a slow path of its own), and a fold over millions of events pays that
on every event, most dearly for the events that match no case. ``ByType`` answers the
handler declared for the event's class, or for its nearest declared base (the engine's
stored form of an event subclasses its contract), remembered per concrete class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

H = TypeVar("H")


class ByType(Generic[H]):
    """``table`` (event class -> handler) looked up by an event's type and its bases."""

    def __init__(self, table: Mapping[type, H]) -> None:
        self.table = dict(table)
        self._resolved: dict[type, H | None] = {}

    def get(self, event: object) -> H | None:
        cls = type(event)
        try:
            return self._resolved[cls]
        except KeyError:
            found = next((self.table[base] for base in cls.__mro__ if base in self.table), None)
            self._resolved[cls] = found  # one assignment: safe to race, every thread finds the same
            return found


"""Tables of what an event changes, chosen by the event's class in one dict lookup.

The studio read models fold several changes per event into one run document (a session's
record, a surface, a log line); each such table answers the entry declared for the event's
class, or for its nearest declared base (the event store reads an event back as its
aggregate's subclass of the declared class), remembered per concrete class.
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


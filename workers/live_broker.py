"""The live channel's in-process broker (the factory choosing it or JetStream is in bootstrap).

A broker holds the published live events of every run in log order (so an event id,
the integer log position, grows along it), de-duplicates re-published ones, tells
followers about new ones and replays what it still retains. Two adapters share this
interface: ``MemoryBroker`` (embedded default, one process) and ``NatsBroker`` (JetStream,
``workers/live_nats.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Sequence

import msgspec

from projections.studio.live_channel import LiveMessage, OnMessages


class MemoryBroker:
    """The in-process broker: a bounded buffer of recent messages, shared by threads.

    The fan-out thread publishes, the API's event loop follows; followers are called on
    their own loop. Re-published messages (id not above the newest) are dropped, as
    JetStream's de-duplication would.
    """

    def __init__(self, buffer_size: int = 10_000) -> None:
        self._buffer: deque[LiveMessage] = deque(maxlen=max(buffer_size, 1))
        self._last_id = 0
        self._seq = 0  # the broker's own sequence, one per message stored (as a stream's)
        self._lock = threading.Lock()
        self._followers: list[tuple[asyncio.AbstractEventLoop, OnMessages]] = []
        self.on_reconnected: Callable[[], None] | None = None  # never disconnects

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def publish_now(self, messages: Sequence[LiveMessage]) -> None:
        with self._lock:
            fresh = []
            for message in messages:
                if message.event_id > self._last_id:
                    self._last_id = message.event_id
                    self._seq += 1
                    fresh.append(msgspec.structs.replace(message, seq=self._seq))
            if not fresh:
                return
            self._buffer.extend(fresh)
            for loop, callback in self._followers:
                try:
                    loop.call_soon_threadsafe(callback, fresh)
                except RuntimeError:  # that loop has closed; its follower is gone
                    continue

    async def publish(self, messages: Sequence[LiveMessage]) -> None:
        self.publish_now(messages)

    async def follow(self, on_messages: OnMessages) -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        with self._lock:
            self._followers.append((loop, on_messages))
            return self._seq, self._last_id

    async def unfollow(self, on_messages: OnMessages) -> None:
        with self._lock:
            self._followers = [(lp, cb) for lp, cb in self._followers if cb != on_messages]

    async def history(self, subject: str, after: int, upto: int) -> tuple[int | None, list[LiveMessage]]:
        with self._lock:
            floor = self._buffer[0].event_id if self._buffer else None
            found = []
            for message in reversed(self._buffer):
                if message.event_id <= after:
                    break
                if message.seq <= upto and message.subject == subject:
                    found.append(message)
        found.reverse()
        return floor, found

"""The live channel's broker port, topic names, and the in-process broker.

A broker holds the published live events of every run in log order (so an event id,
the integer log position, grows along it), de-duplicates re-published ones, tells
followers about new ones and replays what it still retains. Two adapters share this
interface: ``MemoryBroker`` (embedded default, one process) and ``NatsBroker`` (JetStream,
``workers/live_nats.py``).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from projections.envelope import Envelope
from projections.live_events import live_event

TOPIC_ROOT = "portal_live_events"
_TOPIC = re.compile(rf"{TOPIC_ROOT}:tenant:([A-Za-z0-9_-]{{1,128}}):run:([A-Za-z0-9_-]{{1,128}})")
_encode = msgspec.json.Encoder().encode


class LiveMessage(msgspec.Struct, frozen=True, gc=False):
    """One live event as published: its id (log position), subject, JSON body, broker seq."""

    event_id: int
    subject: str
    data: bytes
    seq: int = 0


OnMessages = Callable[[list[LiveMessage]], None]


def topic_for(tenant: str, run_id: str) -> str:
    """C9: the colon form clients subscribe to."""
    return f"{TOPIC_ROOT}:tenant:{tenant}:run:{run_id}"


def parse_topic(topic: str) -> tuple[str, str] | None:
    """``(tenant, run_id)`` of a well-formed topic, else None."""
    match = _TOPIC.fullmatch(topic)
    return (match.group(1), match.group(2)) if match else None


def subject_for(prefix: str, tenant: str, run_id: str) -> str:
    """C9: the NATS subject (the topic with ``.`` for ``:``, under a configurable root)."""
    return f"{prefix}.tenant.{tenant}.run.{run_id}"


def live_message(env: Envelope, prefix: str) -> LiveMessage | None:
    """The published form of ``env``, or None when it is not a live event of a run."""
    item = live_event(env)
    if item is None or not env.run_id:
        return None
    return LiveMessage(env.position, subject_for(prefix, env.tenant, env.run_id), _encode(item), env.position)


class Broker(Protocol):
    """What the fan-out publishes to and the subscriber hub follows."""

    on_reconnected: Callable[[], None] | None  # called after the broker came back

    async def open(self) -> None:
        """Connects and makes sure the stream exists with its configured limits."""

    async def close(self) -> None: ...

    async def publish(self, messages: Sequence[LiveMessage]) -> None:
        """Returns once every message is stored (acknowledged); raises otherwise."""

    async def follow(self, on_messages: OnMessages) -> tuple[int, int]:
        """Delivers every message stored after this call, in order, on the caller's loop.

        Answers ``(cursor, event_id)``: the broker sequence of the last message stored
        before, and its event id (0 when unknown).
        """

    async def unfollow(self, on_messages: OnMessages) -> None: ...

    async def history(self, subject: str, after: int, upto: int) -> tuple[int | None, list[LiveMessage]]:
        """``(floor, messages)``: the oldest event id still retained (None when nothing
        is), and the retained messages of ``subject`` with event id > ``after`` and broker
        sequence <= ``upto``, in order."""


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


def broker_factory(settings: Any) -> Callable[[], Broker]:
    """One broker per caller's event loop: NATS when configured, else the shared in-process one."""
    if settings.nats_url:
        from workers.live_nats import NatsBroker

        return lambda: NatsBroker.from_settings(settings)
    shared = MemoryBroker(settings.live_memory_buffer_events)
    return lambda: shared

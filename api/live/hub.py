"""The per-process live hub: one broker subscription feeding many SSE/WebSocket clients.

The hub follows the whole live stream once and hands each message to the clients of its
subject. A client that resumes (``Last-Event-ID``) is registered first, so live messages
queue up while its backlog is replayed: from the broker up to the hub's cursor, and from
the event store for what the broker no longer holds. Delivery then drops every event id
not above the last one delivered, so the client sees no gap and no duplicate. A client
too slow for its queue is not cut off: it replays from its last delivered event instead.
When the process stops, ``drain`` ends every client's stream (each is told to reconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from functools import lru_cache

import msgspec
import structlog

from domain.shared.retry import backoff
from projections.engine.runner import NotificationSource
from projections.studio.live_channel import Broker, LiveMessage, live_message, subject_for
from projections.studio.log_dock import live_run_id

log = structlog.get_logger("squadops.live.hub")

LogReplay = Callable[[str, str, int, int], list[LiveMessage]]


class _Kind(msgspec.Struct):
    event_kind: str = ""


_kind = msgspec.json.Decoder(_Kind).decode


@lru_cache(maxsize=8192)
def sse_frame(event_id: int, data: bytes) -> bytes:
    """The Server-Sent Events frame of one live event (shared by every client)."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event_id, _kind(data).event_kind.encode(), data)


def log_replay(source: NotificationSource, prefix: str, page: int = 1000) -> LogReplay:
    """Reads one run's live events with ids in (after, bound] from the event store."""

    def replay(tenant: str, run_id: str, after: int, bound: int) -> list[LiveMessage]:
        found: list[LiveMessage] = []
        start = after + 1
        while start <= bound:
            envs = source.read(start, page, stop=bound)
            if not envs:
                break
            for env in envs:
                if env.position <= bound and env.tenant == tenant and live_run_id(env) == run_id:
                    message = live_message(env, prefix)
                    if message is not None:
                        found.append(message)
            start = envs[-1].position + 1
        return found

    return replay


class Subscriber:
    """One client's queue of live messages on one subject."""

    def __init__(self, subject: str, limit: int) -> None:
        self.subject = subject
        self.limit = limit
        self.pending: deque[LiveMessage] = deque()
        self.overflowed = False
        self.closed = False
        self._signal = asyncio.Event()

    def close(self) -> None:
        """Ends the stream after what is queued (the process stops)."""
        self.closed = True
        self._signal.set()

    def replay_instead(self) -> None:
        """Drops what is queued: the client replays from its last delivered event."""
        self.overflowed = True
        self.pending.clear()
        self._signal.set()

    def offer(self, message: LiveMessage) -> None:
        if self.overflowed:
            return
        if len(self.pending) >= self.limit:
            self.replay_instead()
            return
        self.pending.append(message)
        self._signal.set()

    async def take(self, timeout: float) -> list[LiveMessage]:
        if not self.pending and not self.overflowed and not self.closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._signal.wait(), timeout)
        self._signal.clear()
        batch = list(self.pending)
        self.pending.clear()
        return batch


class LiveHub:
    """Dispatches the live stream to subscribers by subject; resumes without gap or duplicate."""

    def __init__(
        self,
        broker: Broker,
        replay_log: LogReplay,
        published_through: Callable[[], int],
        *,
        subject_prefix: str,
        queue_limit: int = 10_000,
    ) -> None:
        self.broker = broker
        self.replay_log = replay_log
        self.published_through = published_through
        self.subject_prefix = subject_prefix
        self.queue_limit = queue_limit
        self.cursor = 0  # broker sequence of the last message dispatched
        self.last_event_id = 0  # its event id
        self.ready = asyncio.Event()
        self.draining = False
        self._subscribers: dict[str, set[Subscriber]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Follows the broker in the background (retrying while it is unavailable)."""
        self.ready = asyncio.Event()
        self._task = asyncio.create_task(self._connect())

    async def _connect(self) -> None:
        failures = 0
        while True:
            try:
                await self.broker.open()
                self.cursor, last_id = await self.broker.follow(self._dispatch)
                # Unknown when the broker's newest message expired: the fan-out's position
                # is then a lower bound that later messages are all above.
                self.last_event_id = last_id or await asyncio.to_thread(self.published_through)
                self.ready.set()
                log.info("live_hub_following", cursor=self.cursor)
                return
            except Exception as exc:
                failures += 1
                log.warning("live_hub_connect_failed", error=repr(exc), failures=failures)
                await asyncio.sleep(backoff(failures))

    def drain(self) -> None:
        """Ends every client's stream, and any new one at once: the process stops, and
        clients reconnect (to another instance) and resume without loss."""
        self.draining = True
        self.ready.set()  # wakes the streams still waiting for the broker
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.close()
        log.info("live_hub_draining", subscribers=self.subscriber_count)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self.broker.unfollow(self._dispatch)
        await self.broker.close()

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    def _dispatch(self, messages: list[LiveMessage]) -> None:
        for message in messages:
            if message.seq <= self.cursor and message.event_id <= self.last_event_id:
                continue  # already dispatched (a follower that restarted)
            if message.seq != self.cursor + 1:
                # Messages went by unseen (dropped by the stream's limits before this hub
                # read them, or the stream was re-created): every client replays instead.
                for subscribers in self._subscribers.values():
                    for subscriber in subscribers:
                        subscriber.replay_instead()
                with contextlib.suppress(Exception):  # a broker callback must never fail
                    log.warning("live_hub_sequence_jump", cursor=self.cursor, seq=message.seq)
            self.cursor = message.seq
            self.last_event_id = max(self.last_event_id, message.event_id)
            for subscriber in self._subscribers.get(message.subject, ()):
                subscriber.offer(message)

    # -- subscribing -----------------------------------------------------------------------

    async def events(
        self, tenant: str, run_id: str, after: int | None, heartbeat: float
    ) -> AsyncIterator[list[LiveMessage] | None]:
        """The run's live events after ``after`` (None: from now on), then live, forever.

        Yields lists of messages in event-id order; the first list comes right after the
        subscription is in place (it holds the replayed backlog, maybe nothing); None
        means ``heartbeat`` seconds passed without an event. Ends only on ``drain``.
        """
        subject = subject_for(self.subject_prefix, tenant, run_id)
        while not self.ready.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), heartbeat)
            if not self.ready.is_set():
                yield None
        last = after
        first = True
        while not self.draining:
            subscriber = Subscriber(subject, self.queue_limit)
            self._subscribers[subject].add(subscriber)
            try:
                if last is None:
                    last = self.last_event_id  # every later message has a higher id
                    backlog: list[LiveMessage] = []
                else:
                    backlog = await self._backlog_retrying(subscriber, tenant, run_id, last, heartbeat)
                if backlog:
                    last = backlog[-1].event_id
                if backlog or first:
                    yield backlog
                first = False
                while not subscriber.overflowed:
                    batch = await subscriber.take(heartbeat)
                    if subscriber.overflowed:
                        break
                    fresh = [m for m in batch if m.event_id > last]
                    if fresh:
                        last = fresh[-1].event_id
                        yield fresh
                    elif not batch and not subscriber.closed:
                        yield None
                    if subscriber.closed:
                        return
            finally:
                self._subscribers[subject].discard(subscriber)
                if not self._subscribers[subject]:
                    self._subscribers.pop(subject, None)
            log.info("live_subscriber_caught_up_by_replay", subject=subject, after=last)

    async def _backlog_retrying(
        self, subscriber: Subscriber, tenant: str, run_id: str, after: int, heartbeat: float
    ) -> list[LiveMessage]:
        failures = 0
        while True:
            try:
                return await self.backlog(subscriber.subject, tenant, run_id, after, self.cursor)
            except Exception as exc:  # broker away: live messages keep queueing meanwhile
                if self.draining:
                    return []
                failures += 1
                log.warning("live_replay_failed", error=repr(exc), failures=failures)
                await asyncio.sleep(min(backoff(failures), heartbeat))

    async def backlog(
        self, subject: str, tenant: str, run_id: str, after: int, upto: int
    ) -> list[LiveMessage]:
        """Events of the run with id > ``after`` published up to broker sequence ``upto``."""
        floor, retained = await self.broker.history(subject, after, upto)
        older: list[LiveMessage] = []
        if floor is None or after < floor - 1:
            # The broker lost some (or holds none): the event store has them all.
            bound = await asyncio.to_thread(self.published_through)
            if floor is not None:
                bound = min(bound, floor - 1)
            if bound > after:
                older = await asyncio.to_thread(self.replay_log, tenant, run_id, after, bound)
        last = older[-1].event_id if older else after
        return older + [m for m in retained if m.event_id > last]

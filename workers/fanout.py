"""The live fan-out: relays every live event of a run from the event log to the broker.

The event log is the outbox (nothing is published from request handlers). The fan-out
keeps its own tracking position (``live_fanout``, independent of every read model, so a
read-model rebuild never re-fires it), follows the log from there with a ``LogFollower``
(contiguous pages, the gap policy, wake-ups on appends and on PostgreSQL ``LISTEN``),
publishes a page with many acknowledgements in flight and moves its position only
after all of them arrived. A crash re-publishes the page, which the broker de-duplicates;
a broker outage is retried with backoff, never skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from domain.shared.retry import backoff
from projections.engine.envelope import Envelope
from projections.engine.follower import FollowsLog, LogFollower, NotificationSource
from projections.engine.store import DocStore
from projections.studio.live_channel import Broker, live_message

log = structlog.get_logger("squadops.live.fanout")

TRACKING_NAME = "live_fanout"


@dataclass
class FanoutStats:
    position: int = 0
    published: int = 0
    batches: int = 0
    failures: int = 0
    gaps_accepted: int = 0
    last_error: str = ""


class LiveFanout(FollowsLog):
    """The fan-out worker: one thread with its own event loop and broker connection."""

    name = TRACKING_NAME

    def __init__(
        self,
        source: NotificationSource,
        store: DocStore,
        broker_factory: Callable[[], Broker],
        *,
        subject_prefix: str,
        page_size: int = 1000,
        poll_seconds: float = 0.5,
        gap_timeout: float = 5.0,
        listen_url: str = "",
        channel: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.follower: LogFollower[Envelope] = LogFollower(
            source, page_size=page_size, gap_timeout=gap_timeout, clock=clock, name="live_fanout"
        )
        self.store = store
        self.broker_factory = broker_factory
        self.subject_prefix = subject_prefix
        self.poll_seconds = poll_seconds
        self.listen_url = listen_url
        self.channel = channel
        self.clock = clock
        self.stats = FanoutStats()
        self._known = False  # whether the follower's position is the one last committed
        self._prefetch: tuple[int, asyncio.Task[list[Envelope]]] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._recovered: asyncio.Event | None = None
        self._stopping = threading.Event()
        store.ensure(self.name)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="live-fanout", daemon=True)
        self._thread.start()
        self.follower.listen(self.listen_url, self.channel)

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self.wake()
        self._recovered_now()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        self.follower.stop_listening()

    def _woken(self) -> None:
        """The follower was woken (an append here, or a NOTIFY): end the poll wait."""
        loop, event = self._loop, self._wake
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(event.set)

    def _recovered_now(self) -> None:
        """Thread-safe: the broker is back; end a failure backoff at once."""
        loop, event = self._loop, self._recovered
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    def position(self) -> int:
        return self.store.position(self.name)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._recovered = asyncio.Event()
        broker = self.broker_factory()
        broker.on_reconnected = self._recovered_now  # retry at once instead of after the backoff
        opened = False
        failures = 0
        unsubscribe = self.follower.subscribe(self._woken)
        try:
            while not self._stopping.is_set():
                try:
                    if not opened:
                        await broker.open()
                        opened = True
                    moved = await self.pass_once(broker)
                    failures = 0
                    if not moved:
                        await self._sleep(self._wake, self.poll_seconds)
                except Exception as exc:  # broker or database away: retry, never skip
                    failures += 1
                    opened = False  # connect and check the stream again before retrying
                    self.stats.failures += 1
                    self.stats.last_error = repr(exc)
                    log.warning("live_fanout_failed", error=repr(exc), failures=failures)
                    # Appends do not shorten this wait; the broker coming back does.
                    await self._sleep(self._recovered, backoff(failures))
        finally:
            unsubscribe()
            await broker.close()
            self._loop = None

    @staticmethod
    async def _sleep(event: asyncio.Event | None, seconds: float) -> None:
        assert event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        event.clear()

    # -- one pass -------------------------------------------------------------------------------

    async def pass_once(self, broker: Broker) -> int:
        """Publishes the next page; answers how many log positions it moved over."""
        try:
            return await self._pass(broker)
        except BaseException:
            self._forget()
            raise

    async def _pass(self, broker: Broker) -> int:
        if not self._known:
            self.follower.seek(await asyncio.to_thread(self.store.position, self.name))
            self._known = True
        position = self.follower.position
        envs = await self._page(position)
        self.stats.gaps_accepted = self.follower.gaps_accepted
        if not envs:
            return 0
        if len(envs) == self.page_size:  # a backlog: read the next page while this one publishes
            self._prefetch = (envs[-1].position, asyncio.create_task(self._read(envs[-1].position)))
        messages = [m for m in (live_message(env, self.subject_prefix) for env in envs) if m]
        if messages:
            await broker.publish(messages)
        last = envs[-1].position
        if not await asyncio.to_thread(self.store.commit, self.name, position, last, [], []):
            self._forget()  # another fan-out moved on; read the position again
            return 1
        self.follower.seek(last)
        self.stats.position = last
        self.stats.published += len(messages)
        self.stats.batches += 1
        return len(envs)

    async def _read(self, position: int) -> list[Envelope]:
        """The contiguous page after ``position``, as the follower's gap policy allows."""
        return await asyncio.to_thread(self.follower.read, position)

    async def _page(self, position: int) -> list[Envelope]:
        prefetched, self._prefetch = self._prefetch, None
        if prefetched is not None and prefetched[0] == position:
            return await prefetched[1]
        if prefetched is not None:
            prefetched[1].cancel()
        return await self._read(position)

    def _forget(self) -> None:
        """Drops what this pass assumed (position, prefetched page): read them again."""
        self._known = False
        if self._prefetch is not None:
            self._prefetch[1].cancel()
            self._prefetch = None

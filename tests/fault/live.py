"""The soak's live subscriber: SSE on a few runs' topics, through every fault.

Each subscription starts from event 0 (the run's whole backlog) and, whenever its
stream ends or fails (an API process killed, PostgreSQL or NATS away), reconnects to
the next API process with ``Last-Event-ID`` = the last id it received: what a browser
does. At the end every topic's received ids are compared with the run's live events in
the log: nothing missing up to the last one received, nothing twice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from tests.conftest import ADMIN
from tests.fault.load import Recorder
from tests.live_helpers import LIVE, SseReader, topic


@dataclass
class Subscription:
    run_id: str
    received: list[int] = field(default_factory=list)
    connects: int = 0
    other_frames: int = 0
    failures: Counter[str] = field(default_factory=Counter)


class LiveSubscriber:
    """SSE subscriptions in a thread of their own (one event loop), stopped by ``finish``."""

    def __init__(
        self,
        api_urls: list[str],
        recorder: Recorder,
        run_ids: list[str],
        *,
        pick: Callable[[], str | None] | None = None,
        add_every: float = 60.0,
        max_subscriptions: int = 10,
        lifetime: float = 3600.0,
    ) -> None:
        """Follows ``run_ids``; every ``add_every`` seconds one more run from ``pick``
        (runs end: a long soak keeps following live ones), up to ``max_subscriptions``."""
        self.api_urls = api_urls
        self.recorder = recorder
        self.subscriptions = [Subscription(r) for r in run_ids]
        self.pick = pick
        self.add_every = add_every
        self.max_subscriptions = max_subscriptions
        self.deadline = time.monotonic() + lifetime  # the subscriptions end by then at the latest
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sse", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self, timeout: float = 20.0) -> bool:
        """Stops the subscriptions; answers whether the thread ended in time."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        timeout = httpx.Timeout(10.0, connect=3.0)  # heartbeats come every second
        async with httpx.AsyncClient(headers=ADMIN, timeout=timeout) as client:
            tasks = [asyncio.create_task(self._follow(client, s, n)) for n, s in enumerate(self.subscriptions)]
            added = time.monotonic()
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                await asyncio.sleep(0.2)  # pacing: subscribers are added a few at a time
                if self.pick is None or len(self.subscriptions) >= self.max_subscriptions:
                    continue
                if time.monotonic() - added < self.add_every:
                    continue
                added = time.monotonic()
                run_id = self.pick()
                if run_id and all(s.run_id != run_id for s in self.subscriptions):
                    sub = Subscription(run_id)
                    self.subscriptions.append(sub)
                    tasks.append(asyncio.create_task(self._follow(client, sub, len(self.subscriptions))))
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, client: httpx.AsyncClient, sub: Subscription, n: int) -> None:
        for attempt in range(100_000):
            if self._stop.is_set() or time.monotonic() > self.deadline:
                return
            url = self.api_urls[(n + attempt) % len(self.api_urls)]
            last = str(sub.received[-1]) if sub.received else "0"
            try:
                await self._stream(client, url, sub, last)
            except asyncio.CancelledError:
                raise
            except httpx.HTTPError as exc:
                sub.failures[type(exc).__name__] += 1
            except Exception as exc:  # a malformed frame: shown in the report
                sub.failures[f"client: {exc!r:.100}"] += 1
            await asyncio.sleep(0.5)  # pacing: a client reconnects after a short pause, as browsers do

    async def _stream(self, client: httpx.AsyncClient, url: str, sub: Subscription, last: str) -> None:
        headers = {"Last-Event-ID": last}
        params = {"topic": topic(sub.run_id)}
        phase = self.recorder.phase
        async with client.stream("GET", f"{url}{LIVE}", params=params, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                self.recorder.answered("GET live (SSE)", phase, response, url, known=True)
                sub.failures[f"status {response.status_code}"] += 1
                return
            self.recorder.answered("GET live (SSE)", phase, response, url, known=True)
            sub.connects += 1
            reader = SseReader()
            async for chunk in response.aiter_raw():
                for event in reader.feed(chunk):
                    if event.id.isdigit():
                        sub.received.append(int(event.id))
                    else:  # not a live event (e.g. a shutdown notice): counted, not compared
                        sub.other_frames += 1
                if self._stop.is_set() or time.monotonic() > self.deadline:
                    return

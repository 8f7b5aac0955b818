"""What benchmarks share: the real servers and scratch databases that clean up after."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats

from tests import infra
from tests.conftest import ADMIN
from workers.live_watch import SseEvent, SseParser


class BenchContext:
    def __enter__(self) -> BenchContext:
        self._stack = contextlib.ExitStack()
        self.pg_admin_url, pg_server = infra.postgres_admin_url()
        if pg_server is not None:
            self._stack.callback(pg_server.cleanup)  # type: ignore[attr-defined]
        self.nats_url, nats_server = infra.nats_url()
        if nats_server is not None:
            self._stack.callback(nats_server.cleanup)
        else:  # the machine's own NATS: the streams the benchmarks made go with them
            before = asyncio.run(_bench_streams(self.nats_url))
            self._stack.callback(lambda: asyncio.run(_bench_streams(self.nats_url, delete_except=before)))
        return self

    @contextlib.contextmanager
    def postgres(self) -> Iterator[str]:
        """A fresh PostgreSQL database for one benchmark."""
        with infra.fresh_database(self.pg_admin_url) as url:
            yield url

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()


async def _bench_streams(url: str, delete_except: set[str] | None = None) -> set[str]:
    """The JetStream streams named ``BENCH_*``; with ``delete_except``, deletes the others
    of them (those made since)."""
    nc = await nats.connect(url, connect_timeout=2)
    try:
        js = nc.jetstream()
        names = {s.config.name for s in await js.streams_info() if (s.config.name or "").startswith("BENCH_")}
        for name in names - (delete_except if delete_except is not None else names):
            await js.delete_stream(name)
        return names
    finally:
        await nc.close()


@contextlib.contextmanager
def scratch_sqlite(name: str) -> Iterator[str]:
    """A SQLite URL under ``var/`` for one benchmark, its files removed afterwards."""
    database = Path("var") / f"{name}-{os.getpid()}.db"
    database.parent.mkdir(exist_ok=True)
    try:
        yield f"sqlite:///{database}"
    finally:
        for path in database.parent.glob(database.name + "*"):
            path.unlink(missing_ok=True)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def sse_arrivals(base: str, topic: str, subscribed: asyncio.Event, arrived: Callable[[SseEvent, float], None]) -> None:
    """Reads ``topic``'s SSE stream at ``base`` as the admin, until cancelled: sets
    ``subscribed`` once the server says so, and tells ``arrived`` each event with the
    moment its chunk came in."""
    parser = SseParser()
    async with httpx.AsyncClient(base_url=base, headers=ADMIN, timeout=60) as http, http.stream(
        "GET", "/control-plane/studio/live", params={"topic": topic}
    ) as response:
        async for chunk in response.aiter_raw():
            now = time.perf_counter()
            for item in parser.feed(chunk):
                if item == "subscribed":
                    subscribed.set()
                elif isinstance(item, SseEvent):
                    arrived(item, now)

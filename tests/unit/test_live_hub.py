"""The hub's resume rule: backlog from the broker, older events from the log, then live;
never a gap, never a duplicate (the in-process broker and a log of our own making)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from api.live.hub import LiveHub
from projections.studio.live_channel import LiveMessage, subject_for
from workers.live_broker import MemoryBroker
from workers.logging import configure_logging
from workers.settings import Settings

PREFIX = "pfx"
RUN_A = subject_for(PREFIX, "t", "a")
RUN_B = subject_for(PREFIX, "t", "b")


class Log:
    """The event store's live events, as the hub's log replay reads them."""

    def __init__(self) -> None:
        self.messages: list[LiveMessage] = []
        self.reads: list[tuple[int, int]] = []

    def append(self, count: int) -> list[LiveMessage]:
        added = []
        for _ in range(count):
            n = len(self.messages) + len(added) + 1
            run = "a" if n % 3 else "b"  # two runs interleaved in one log
            added.append(LiveMessage(n, subject_for(PREFIX, "t", run), b'{"event_kind":"tool"}', n))
        self.messages.extend(added)
        return added

    def replay(self, tenant: str, run_id: str, after: int, bound: int) -> list[LiveMessage]:
        self.reads.append((after, bound))
        subject = subject_for(PREFIX, tenant, run_id)
        return [m for m in self.messages if after < m.event_id <= bound and m.subject == subject]


@pytest.fixture
async def setup() -> AsyncIterator[tuple[LiveHub, MemoryBroker, Log]]:
    configure_logging(Settings(log_level="warning"))  # onto this test's stderr
    broker = MemoryBroker(20)
    log = Log()
    published = {"through": 0}

    async def publish(messages: list[LiveMessage]) -> None:
        await broker.publish(messages)
        published["through"] = messages[-1].event_id
        await asyncio.sleep(0.001)  # the hub is called on the loop's next turn

    hub = LiveHub(broker, log.replay, lambda: published["through"], subject_prefix=PREFIX, queue_limit=50)
    hub.publish = publish  # type: ignore[attr-defined]
    await hub.start()
    await asyncio.wait_for(hub.ready.wait(), 5)
    yield hub, broker, log
    await hub.stop()


async def collect(stream: AsyncIterator[list[LiveMessage] | None], until: int) -> list[int]:
    seen: list[int] = []
    async for batch in stream:
        seen.extend(m.event_id for m in batch or ())
        if seen and seen[-1] >= until:
            return seen
    return seen


def ids(log: Log, subject: str, after: int = 0) -> list[int]:
    return [m.event_id for m in log.messages if m.subject == subject and m.event_id > after]


async def test_resume_within_the_broker_buffer_replays_then_continues_live(setup) -> None:
    hub, broker, log = setup
    await hub.publish(log.append(15))  # type: ignore[attr-defined]
    stream = hub.events("t", "a", 4, heartbeat=1.0)
    first = await anext(stream)
    assert [m.event_id for m in first] == ids(log, RUN_A, 4)
    await hub.publish(log.append(15))  # type: ignore[attr-defined]
    rest = await collect(stream, ids(log, RUN_A)[-1])
    await stream.aclose()
    assert [m.event_id for m in first] + rest == ids(log, RUN_A, 4)
    assert log.reads == []  # the broker held all of it
    assert hub.subscriber_count == 0


async def test_resume_beyond_the_buffer_reads_the_older_part_from_the_log(setup) -> None:
    hub, broker, log = setup
    for _ in range(6):
        await hub.publish(log.append(10))  # type: ignore[attr-defined]
    floor, _ = await broker.history(RUN_A, 0, hub.cursor)
    assert floor == 41  # the buffer keeps the newest twenty
    stream = hub.events("t", "a", 2, heartbeat=1.0)
    first = await anext(stream)
    await stream.aclose()
    assert [m.event_id for m in first] == ids(log, RUN_A, 2)
    assert log.reads == [(2, 40)]


async def test_a_live_only_subscriber_gets_what_comes_after_it_subscribed(setup) -> None:
    hub, broker, log = setup
    await hub.publish(log.append(5))  # type: ignore[attr-defined]
    stream = hub.events("t", "b", None, heartbeat=1.0)
    assert await anext(stream) == []  # subscribed, nothing replayed
    added = log.append(9)
    await hub.publish(added)  # type: ignore[attr-defined]
    expected = [m.event_id for m in added if m.subject == RUN_B]
    assert await collect(stream, expected[-1]) == expected
    await stream.aclose()


async def test_heartbeats_come_while_nothing_happens(setup) -> None:
    hub, _, _ = setup
    stream = hub.events("t", "a", None, heartbeat=0.05)
    assert await anext(stream) == []
    assert await asyncio.wait_for(anext(stream), 2) is None
    await stream.aclose()


async def test_a_subscriber_too_slow_for_its_queue_catches_up_by_replay(setup) -> None:
    hub, broker, log = setup
    stream = hub.events("t", "a", 0, heartbeat=1.0)
    assert await anext(stream) == []
    for _ in range(4):  # 120 events, 80 for run a: more than its queue of 50 holds
        await hub.publish(log.append(30))  # type: ignore[attr-defined]
    # The hub dispatched all 120 before the subscriber reads: its queue overflowed.
    for _ in range(500):
        if hub.cursor >= log.messages[-1].seq:
            break
        await asyncio.sleep(0.01)  # the poll interval (5 s at most): the loop dispatches meanwhile
    assert hub.cursor == log.messages[-1].seq
    assert await collect(stream, ids(log, RUN_A)[-1]) == ids(log, RUN_A)
    await stream.aclose()
    assert log.reads  # the part the buffer no longer held came from the log


async def test_messages_the_hub_never_saw_are_replayed_to_its_subscribers(setup) -> None:
    hub, broker, log = setup
    stream = hub.events("t", "a", 0, heartbeat=1.0)
    assert await anext(stream) == []
    await hub.publish(log.append(3))  # type: ignore[attr-defined]
    # The hub stops hearing the broker while 30 go by (the buffer keeps only 20 of them)...
    await broker.unfollow(hub._dispatch)
    await hub.publish(log.append(30))  # type: ignore[attr-defined]
    await broker.follow(hub._dispatch)
    # ...then hears again: the sequence jumped, so its subscribers replay what they missed.
    await hub.publish(log.append(6))  # type: ignore[attr-defined]
    assert await collect(stream, ids(log, RUN_A)[-1]) == ids(log, RUN_A)
    await stream.aclose()
    assert log.reads  # the part no longer in the broker came from the log

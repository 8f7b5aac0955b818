"""The in-process broker: de-duplication, following across threads, bounded replay."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from projections.studio.live_channel import LiveMessage
from workers.live_broker import MemoryBroker


def msg(event_id: int, subject: str = "s.a") -> LiveMessage:
    return LiveMessage(event_id, subject, b'{"event_kind":"run"}', event_id)


async def test_republished_events_are_dropped_like_jetstream_deduplication() -> None:
    broker = MemoryBroker(100)
    await broker.publish([msg(1), msg(2), msg(3)])
    await broker.publish([msg(2), msg(3), msg(4)])  # a crashed fan-out publishing its page again
    floor, found = await broker.history("s.a", 0, 10)
    assert floor == 1
    assert [m.event_id for m in found] == [1, 2, 3, 4]


async def test_followers_get_each_message_once_in_order_on_their_own_loop() -> None:
    broker = MemoryBroker(100)
    await broker.publish([msg(1)])
    received: list[int] = []
    threads: set[str] = set()

    def on_messages(batch: list[LiveMessage]) -> None:
        threads.add(threading.current_thread().name)
        received.extend(m.event_id for m in batch)

    cursor, last_id = await broker.follow(on_messages)
    assert (cursor, last_id) == (1, 1)

    def fanout_thread() -> None:
        for n in range(2, 52):
            broker.publish_now([msg(n), msg(n)])

    worker = threading.Thread(target=fanout_thread, name="fanout")
    worker.start()
    worker.join()
    # A later message arrives: every duplicate of those before it would have arrived first.
    broker.publish_now([msg(52)])
    await until(lambda: 52 in received)
    assert received == list(range(2, 53))
    assert threads == {threading.current_thread().name}

    # Unfollowed: a follower still following gets the next message; the unfollowed one not.
    others: list[int] = []
    await broker.follow(lambda batch: others.extend(m.event_id for m in batch))
    await broker.unfollow(on_messages)
    broker.publish_now([msg(60)])
    await until(lambda: others == [60])
    assert received[-1] == 52


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Until ``condition`` holds, turning the loop (where followers are called)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)  # the poll interval: the loop runs the followers meanwhile


async def test_history_answers_the_subject_after_an_id_up_to_a_cursor_and_the_floor() -> None:
    broker = MemoryBroker(5)
    await broker.publish([msg(1, "s.a"), msg(2, "s.b"), msg(3, "s.a"), msg(4, "s.a"), msg(5, "s.b")])
    floor, found = await broker.history("s.a", 1, 4)
    assert floor == 1 and [m.event_id for m in found] == [3, 4]
    await broker.publish([msg(6, "s.a"), msg(7, "s.a")])  # the buffer keeps the newest five
    floor, found = await broker.history("s.a", 0, 100)
    assert floor == 3 and [m.event_id for m in found] == [3, 4, 6, 7]
    assert await MemoryBroker(5).history("s.a", 0, 100) == (None, [])

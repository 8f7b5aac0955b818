"""The live fan-out against real NATS JetStream: every live event once, in log order,
through a NATS outage, a killed fan-out and a read-model rebuild."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from api.live.hub import LiveHub, log_replay
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.studio.live_channel import LiveMessage
from tests import infra
from tests.helpers import eventually
from tests.live_helpers import (
    all_expected,
    append_marker,
    bulk_previews,
    delete_stream,
    live_settings,
    simulate,
    stream_contents,
    until_marker,
    wait_published,
)
from workers.bootstrap import Container, build
from workers.settings import Settings

pytestmark = pytest.mark.nats


@pytest.fixture
def live(database_url: str, nats_url: str) -> Iterator[Container]:
    """A container on the machine's NATS, fan-out running, a stream of its own."""
    settings = live_settings(database_url, nats_url)
    container = build(settings)
    container.start(("fanout",))
    yield container
    container.close()
    delete_stream(nats_url, settings.live_stream_name)


async def test_every_live_event_reaches_nats_once_in_log_order(live: Container) -> None:
    settings = live.settings
    nc = await nats.connect(settings.nats_url)
    received: list[tuple[int, str]] = []

    async def on_message(msg: nats.aio.msg.Msg) -> None:
        received.append((int(msg.headers["Nats-Msg-Id"]), msg.subject))

    await nc.subscribe(f"{settings.live_subject_prefix}.>", cb=on_message)
    await nc.flush()
    try:
        run_ids = await asyncio.to_thread(simulate, live, 2, 12)
        await asyncio.to_thread(live.studio.runs.share_preview, tenant="default", run_id=run_ids[0], fields={"url": "https://p"})
        await asyncio.to_thread(live.studio.runs.cleanup_run, tenant="default", run_id=run_ids[1], actor="op")
        await asyncio.to_thread(wait_published, live)
        expected = [(eid, f"{settings.live_subject_prefix}.{suffix}") for eid, suffix in all_expected(live)]
        assert len(expected) > 30
        # A later event reaches the subscriber: a duplicate of any before it would have shown.
        marker = await asyncio.to_thread(append_marker, live, run_ids[0])
        await until_marker(marker, received)
        assert received == expected
        stored = await stream_contents(settings.nats_url, settings.live_stream_name)
        assert [(eid, subject) for eid, subject, _ in stored if str(eid) != marker] == expected
        assert {subject for _, subject in expected} == {
            f"{settings.live_subject_prefix}.tenant.default.run.{r}" for r in run_ids
        }
    finally:
        await nc.close()


async def test_the_stream_and_its_limits_come_from_settings(sqlite_url: str, nats_url: str) -> None:
    settings = live_settings(sqlite_url, nats_url, live_stream_max_age_seconds=3600.0, live_stream_max_bytes=1 << 20)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    try:
        # An existing stream with other limits is brought to the configured ones at start.
        await js.add_stream(name=settings.live_stream_name, subjects=[f"{settings.live_subject_prefix}.>"], max_bytes=1000)
        container = build(settings)
        container.start(("fanout",))
        try:
            def updated() -> bool:
                return asyncio.run(_stream_config(nats_url, settings.live_stream_name)).max_bytes == 1 << 20

            await asyncio.to_thread(eventually, updated, 10.0)
            config = (await js.stream_info(settings.live_stream_name)).config
            assert config.subjects == [f"{settings.live_subject_prefix}.>"]
            assert config.max_age == pytest.approx(3600.0)
            assert config.duplicate_window == pytest.approx(settings.live_stream_duplicate_window_seconds)
        finally:
            container.close()
    finally:
        await js.delete_stream(settings.live_stream_name)
        await nc.close()


async def _stream_config(url: str, stream: str) -> nats.js.api.StreamConfig:
    nc = await nats.connect(url)
    try:
        return (await nc.jetstream().stream_info(stream)).config
    finally:
        await nc.close()


async def test_a_nats_outage_loses_nothing_and_delivers_nothing_twice(sqlite_url: str) -> None:
    server = infra.NatsServer().start()
    settings = live_settings(sqlite_url, server.url)
    container = build(settings)
    container.start(("fanout",))
    hub = LiveHub(
        container.live_broker(),
        log_replay(NotificationSource(container.event_store), settings.live_subject_prefix),
        container.fanout.position,
        subject_prefix=settings.live_subject_prefix,
    )
    delivered: list[int] = []  # what the hub's follower (through the outage) dispatches
    original = hub._dispatch

    def recording(messages: list[LiveMessage]) -> None:
        before = hub.cursor
        original(messages)
        delivered.extend(m.event_id for m in messages if m.seq > before)

    hub._dispatch = recording  # type: ignore[method-assign]
    try:
        await hub.start()
        await asyncio.wait_for(hub.ready.wait(), 10)
        run_ids = await asyncio.to_thread(simulate, container, 1, 10)
        await asyncio.to_thread(wait_published, container)

        server.stop()
        await asyncio.to_thread(bulk_previews, container, run_ids[0], 300)
        await asyncio.to_thread(simulate, container, 1, 10)
        await asyncio.to_thread(eventually, lambda: container.fanout.stats.failures >= 2, 20.0)
        assert container.fanout.position() < container.event_store.max_position()  # held back, not skipped

        server.start()  # same port, same storage
        await asyncio.to_thread(wait_published, container, 60.0)
        expected = [eid for eid, _ in all_expected(container)]
        stored = await stream_contents(server.url, settings.live_stream_name)
        assert [eid for eid, _, _ in stored] == expected
        # A later event reaches the hub: a duplicate of any before it would have shown.
        await until_marker(await asyncio.to_thread(append_marker, container, run_ids[0]), delivered, timeout=60)
        assert delivered == expected
    finally:
        await hub.stop()
        container.close()
        server.cleanup()


def _worker(settings: Settings, name: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SQUADOPS_DATABASE_URL": settings.database_url,
        "SQUADOPS_NATS_URL": settings.nats_url,
        "SQUADOPS_LIVE_STREAM_NAME": settings.live_stream_name,
        "SQUADOPS_LIVE_SUBJECT_PREFIX": settings.live_subject_prefix,
        "SQUADOPS_LIVE_FANOUT_PAGE_SIZE": "50000",
        "SQUADOPS_LIVE_MAX_ACKS_IN_FLIGHT": "8",
        "SQUADOPS_LOG_LEVEL": "warning",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "workers.cli", "worker", name],
        env=env,
        cwd=str(Path(__file__).resolve().parents[2]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_a_fanout_killed_mid_batch_republishes_without_duplicates(pg_url: str, nats_url: str) -> None:
    settings = live_settings(pg_url, nats_url)
    container = build(settings)
    try:
        run_ids = await asyncio.to_thread(simulate, container, 1, 5)
        await asyncio.to_thread(bulk_previews, container, run_ids[0], 6000)
        total = len(all_expected(container))
        worker = _worker(settings, "fanout")
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        try:
            held = 0
            deadline = time.monotonic() + 30
            while held < 300 and time.monotonic() < deadline:
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    held = (await js.stream_info(settings.live_stream_name)).state.messages
                await asyncio.sleep(0.002)  # a tight poll: the kill must land mid-publication
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            held = (await js.stream_info(settings.live_stream_name)).state.messages
        finally:
            await nc.close()
        # Killed with part of its page published and its position not moved.
        assert 0 < held < total
        assert container.fanout.position() == 0

        container.start(("fanout",))
        await asyncio.to_thread(wait_published, container, 60.0)
        stored = await stream_contents(nats_url, settings.live_stream_name)
        assert [eid for eid, _, _ in stored] == [eid for eid, _ in all_expected(container)]
    finally:
        container.close()
        delete_stream(nats_url, settings.live_stream_name)


async def test_a_read_model_rebuild_never_refires_the_fanout(live: Container) -> None:
    run_ids = await asyncio.to_thread(simulate, live, 1, 20)
    await asyncio.to_thread(wait_published, live)
    before = await stream_contents(live.settings.nats_url, live.settings.live_stream_name)
    fanout_position = live.fanout.position()

    # The rebuild tool: every read model folded from position 0 and swapped in.
    report = await asyncio.to_thread(
        rebuild, live.store, NotificationSource(live.event_store), live.runner.projectors
    )
    assert report.position == live.event_store.max_position()
    assert all(live.store.position(p.name) == report.position for p in live.runner.projectors)
    live.fanout.wake()
    assert live.fanout.position() == fanout_position
    # The fan-out goes on past the rebuild: it publishes one later event, and nothing else.
    marker = await asyncio.to_thread(append_marker, live, run_ids[0])
    await asyncio.to_thread(wait_published, live)
    after = await stream_contents(live.settings.nats_url, live.settings.live_stream_name)
    assert after[:-1] == before and [str(after[-1][0])] == [marker]

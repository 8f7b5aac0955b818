"""The live channel's NATS JetStream adapter (stream ``PORTAL_LIVE_EVENTS``, C9).

Publishing keeps the stream in log order with no holes: each message carries its event id
as ``Nats-Msg-Id`` (server de-duplication) and the stream sequence it expects to follow
(``Nats-Expected-Last-Sequence``), so when one publish of a pipelined batch is lost the
ones behind it are refused instead of overtaking it. After any failure the publisher
re-reads the stream's last message and resumes after it. Because the stream is in log
order, "every event up to the last one stored" is exactly what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import nats
import structlog
from nats.js import api
from nats.js.errors import NotFoundError

from projections.studio.live_channel import LiveMessage, OnMessages

log = structlog.get_logger("squadops.live.nats")

MSG_ID = api.Header.MSG_ID.value
EXPECTED_LAST_SEQ = api.Header.EXPECTED_LAST_SEQUENCE.value


class NatsBroker:
    """One NATS connection (bound to the event loop that opens it) and the live stream."""

    def __init__(
        self,
        url: str,
        *,
        stream: str,
        prefix: str,
        max_age: float,
        max_bytes: int,
        duplicate_window: float,
        max_acks_in_flight: int = 256,
        timeout: float = 5.0,
    ) -> None:
        self.url = url
        self.stream = stream
        self.prefix = prefix
        self.max_age = max_age
        self.max_bytes = max_bytes
        self.duplicate_window = min(duplicate_window, max_age) if max_age else duplicate_window
        self.max_acks_in_flight = max(1, max_acks_in_flight)
        self.timeout = timeout
        self.nc: Any = None
        self.js: Any = None
        self._tail: tuple[int, int | None] | None = None  # (last stream seq, its event id)
        self._follows: dict[OnMessages, Any] = {}
        self._closing = False
        self.on_reconnected: Callable[[], None] | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> NatsBroker:
        return cls(
            settings.nats_url,
            stream=settings.live_stream_name,
            prefix=settings.live_subject_prefix,
            max_age=settings.live_stream_max_age_seconds,
            max_bytes=settings.live_stream_max_bytes,
            duplicate_window=settings.live_stream_duplicate_window_seconds,
            max_acks_in_flight=settings.live_max_acks_in_flight,
        )

    # -- connection and stream ----------------------------------------------------------------

    async def open(self) -> None:
        if self.nc is None or self.nc.is_closed:
            self._closing = False
            self.nc = await nats.connect(
                self.url,
                name="squadops-live",
                connect_timeout=2,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.25,
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
            )
            self.js = self.nc.jetstream(
                timeout=self.timeout, publish_async_max_pending=self.max_acks_in_flight
            )
        if not self.nc.is_connected:  # reconnecting: fail fast, the caller retries
            raise ConnectionError(f"not connected to NATS at {self.url}")
        await self.ensure_stream()
        self._tail = None

    def stream_config(self) -> api.StreamConfig:
        return api.StreamConfig(
            name=self.stream,
            subjects=[f"{self.prefix}.>"],
            retention=api.RetentionPolicy.LIMITS,
            storage=api.StorageType.FILE,
            discard=api.DiscardPolicy.OLD,
            max_age=self.max_age,
            max_bytes=self.max_bytes,
            duplicate_window=self.duplicate_window,
            num_replicas=1,
        )

    async def ensure_stream(self) -> None:
        """Creates the stream, or updates its subjects and limits to the settings."""
        wanted = self.stream_config()
        try:
            info = await self.js.stream_info(self.stream)
        except NotFoundError:
            await self.js.add_stream(wanted)
            log.info("live_stream_created", stream=self.stream, subjects=wanted.subjects)
            return
        have = info.config
        if (
            list(have.subjects or []) != wanted.subjects
            or int(have.max_bytes or -1) != wanted.max_bytes
            or abs(float(have.max_age or 0) - float(wanted.max_age or 0)) > 1e-3
            or abs(float(have.duplicate_window or 0) - float(wanted.duplicate_window)) > 1e-3
        ):
            await self.js.update_stream(wanted)
            log.info("live_stream_updated", stream=self.stream)

    async def close(self) -> None:
        nc, self.nc = self.nc, None
        if nc is None or nc.is_closed:
            return
        self._closing = True
        try:
            await asyncio.wait_for(nc.drain(), 2.0)
        except Exception:
            with contextlib.suppress(Exception):
                await nc.close()

    async def _on_error(self, exc: Exception) -> None:
        log.debug("live_nats_error", error=repr(exc))

    async def _on_disconnected(self) -> None:
        if not self._closing:
            log.warning("live_nats_disconnected", url=self.url)

    async def _on_reconnected(self) -> None:
        log.info("live_nats_reconnected", url=self.url)
        if self.on_reconnected is not None:
            self.on_reconnected()

    # -- publishing -----------------------------------------------------------------------------

    async def _event_id_at(self, seq: int) -> int | None:
        """The event id of the first message at or after ``seq`` (None when there is none)."""
        try:
            raw = await self.js.get_msg(self.stream, seq=seq, subject=">", next=True)
        except NotFoundError:
            return None
        return int((raw.headers or {}).get(MSG_ID, 0)) or None

    async def _read_tail(self) -> tuple[int, int | None]:
        state = (await self.js.stream_info(self.stream)).state
        last_id = await self._event_id_at(state.last_seq) if state.messages else None
        return state.last_seq, last_id

    async def publish(self, messages: Sequence[LiveMessage]) -> None:
        if not self.nc.is_connected:  # fail fast instead of buffering into a reconnect
            raise ConnectionError(f"not connected to NATS at {self.url}")
        if self._tail is None:
            self._tail = await self._read_tail()
        last_seq, last_id = self._tail
        # The stream is in log order: what is not above its newest id is already in it.
        pending = [m for m in messages if last_id is None or m.event_id > last_id]
        if not pending:
            return
        futures: list[asyncio.Future[Any]] = []
        try:
            # One deadline for the page (no per-message timer: those cost more than the publish).
            async with asyncio.timeout(self.timeout + len(pending) / 1000):
                expected = last_seq
                for message in pending:
                    headers = {MSG_ID: str(message.event_id), EXPECTED_LAST_SEQ: str(expected)}
                    futures.append(await self.js.publish_async(message.subject, message.data, headers=headers))
                    expected += 1
                acks = await asyncio.gather(*futures)
        except BaseException:
            for future in futures:
                future.cancel()
            self._tail = None  # re-read the stream's tail before trying again
            raise
        self._tail = (acks[-1].seq, pending[-1].event_id)

    # -- following and replay ---------------------------------------------------------------------

    async def follow(self, on_messages: OnMessages) -> tuple[int, int]:
        """An ordered consumer over the whole stream (it re-creates itself after outages)."""
        cursor, last_id = await self._read_tail()

        async def deliver(msg: Any) -> None:
            seq = msg.metadata.sequence.stream
            event_id = int((msg.headers or {}).get(MSG_ID, 0))
            on_messages([LiveMessage(event_id, msg.subject, msg.data, seq)])

        sub = await self.js.subscribe(
            f"{self.prefix}.>",
            stream=self.stream,
            cb=deliver,
            ordered_consumer=True,
            idle_heartbeat=1.0,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            config=api.ConsumerConfig(opt_start_seq=cursor + 1),
        )
        self._follows[on_messages] = sub
        return cursor, last_id or 0

    async def unfollow(self, on_messages: OnMessages) -> None:
        sub = self._follows.pop(on_messages, None)
        if sub is not None and self.nc is not None and not self.nc.is_closed:
            await sub.unsubscribe()

    async def history(self, subject: str, after: int, upto: int) -> tuple[int | None, list[LiveMessage]]:
        state = (await self.js.stream_info(self.stream)).state
        if not state.messages:
            return None, []
        floor = await self._event_id_at(state.first_seq)
        if floor is None:
            return None, []
        if state.first_seq > upto:
            return floor, []
        start = state.first_seq if after < floor else await self._seek(after, state.first_seq, upto)
        if start is None:
            return floor, []
        return floor, await self._read(subject, start, upto, after)

    async def _seek(self, after: int, low: int, high: int) -> int | None:
        """The first stream sequence in [low, high] whose event id is above ``after``."""
        top = await self._event_id_at(high)
        if top is None or top <= after:
            return None
        while low < high:
            middle = (low + high) // 2
            found = await self._event_id_at(middle)
            if found is not None and found > after:
                high = middle
            else:
                low = middle + 1
        return low

    async def _read(self, subject: str, start: int, upto: int, after: int) -> list[LiveMessage]:
        """The subject's messages from ``start`` to ``upto`` through an ephemeral consumer."""
        sub = await self.js.pull_subscribe(
            subject,
            stream=self.stream,
            config=api.ConsumerConfig(
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=start,
                ack_policy=api.AckPolicy.NONE,
                mem_storage=True,
                num_replicas=1,
                inactive_threshold=30.0,
            ),
        )
        found: list[LiveMessage] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return found
            while True:
                for msg in await sub.fetch(batch=500, timeout=self.timeout):
                    seq = msg.metadata.sequence.stream
                    if seq > upto:
                        return found
                    event_id = int((msg.headers or {}).get(MSG_ID, 0))
                    if event_id > after:
                        found.append(LiveMessage(event_id, msg.subject, msg.data, seq))
                    if seq == upto or msg.metadata.num_pending == 0:
                        return found
        finally:
            await sub.unsubscribe()
            with contextlib.suppress(Exception):  # else it expires on its own (inactive_threshold)
                await self.js.delete_consumer(self.stream, sub._consumer)

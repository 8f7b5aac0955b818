"""The live channel's port: topic names, the published message, and the broker protocol.

A broker holds the published live events of every run in log order (so an event id,
the integer log position, grows along it), de-duplicates re-published ones, tells
followers about new ones and replays what it still retains. The fan-out publishes to it
and the API's hub follows it; the adapters (in-process, JetStream) live in ``workers/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec

from projections.engine.envelope import Envelope
from projections.studio.log_dock import live_event

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
    if item is None:
        return None
    return LiveMessage(env.position, subject_for(prefix, env.tenant, item["run_id"]), _encode(item), env.position)


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

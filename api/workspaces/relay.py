"""Relaying one model request: the alias mapped, the upstream's answer streamed back byte for
byte as it arrives, and the request metered once its stream has ended.

Nothing is buffered on the way back: each chunk the upstream sends is passed on as it is.
The usage is read from the complete lines at a stream's start and end (SSE ``data:`` lines
that can carry usage; see ``HEAD_BYTES``) or, for a whole JSON answer, from the body once it
is complete. The meter records the request when the
stream ends: whole, cut by the upstream (the delivered part, ``partial``), or abandoned by
the caller (likewise). An upstream that cannot be reached is a 503 before anything is
relayed, and nothing is recorded for it.
"""

from __future__ import annotations

import collections
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec
import structlog
from litestar.response import Stream

from api.errors import ApiError
from domain.shared.errors import Unavailable
from domain.workspaces.metering import Meter, Metered
from domain.workspaces.model_routes import ModelRoutes
from domain.workspaces.ports import ModelUpstream, UpstreamAnswer
from domain.workspaces.usage import MESSAGES, RESPONSES, Tally

log = structlog.get_logger("squadops.model_proxy")

# Request headers that describe the call itself and go upstream as sent (never the caller's
# credentials: the upstream gets the service's own key).
FORWARDED = frozenset({"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent"})
MARKERS = (b"usage", b"message_stop", b"finish_reason")
MAX_JSON_BYTES = 16 << 20  # a whole (non-streamed) answer read for its usage


# What a stream's complete lines must hold for its tally to read one of them: the type of
# an Anthropic event it reads (``"message_start"``, ``"message_delta"``, ``"message_stop"``),
# the response object of an OpenAI Responses event; chat completions: the markers.
GATES = {MESSAGES: (b'"message_',), RESPONSES: (b'"response"',)}

# Where a stream's usage stands: each of the three APIs reports it at the start of its stream
# (Anthropic's ``message_start``, the Responses ``response.created``) and at its end (the
# cumulative ``message_delta`` and ``message_stop``, ``response.completed``, the last chat
# chunk); between them is text. So the scan reads the first ``HEAD_BYTES`` of a stream as
# they pass, keeps (by reference, no copy) the chunks of at least its last ``TAIL_BYTES``
# and reads their complete lines once the stream has ended or been cut: a long answer is
# relayed without a search through every byte of its text.
HEAD_BYTES = 64 << 10
TAIL_BYTES = 64 << 10


class Observer:
    """Feeds a ``Tally`` from the relayed bytes without holding them back."""

    def __init__(self, tally: Tally, content_type: str) -> None:
        self.tally = tally
        self.sse = content_type.startswith("text/event-stream")
        self._gates = GATES.get(tally.api, MARKERS)
        self._rest = b""
        self._body: list[bytes] = []
        self._size = 0
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self._tail_cut = False  # chunks before the tail were let go: it starts inside a line

    def feed(self, chunk: bytes) -> None:
        if not self.sse:
            self._size += len(chunk)
            if self._size <= MAX_JSON_BYTES:
                self._body.append(chunk)
            return
        if self._size < HEAD_BYTES:
            self._size += len(chunk)
            self._scan(chunk)
            return
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail_size - len(self._tail[0]) >= TAIL_BYTES:
            self._tail_size -= len(self._tail.popleft())
            self._tail_cut = True

    def end(self, whole: bool = True) -> None:
        """The stream has ended (``whole``) or was cut: the tail's complete lines are read, and
        the last line too when the stream is whole."""
        if self.sse:
            if self._tail:
                tail = b"".join(self._tail)
                if self._tail_cut:  # the line the tail begins inside is text, not usage
                    self._rest = b""
                    tail = tail[tail.find(b"\n") + 1:] if b"\n" in tail else b""
                self._tail.clear()
                self._scan(tail)
            if whole:
                self._line(self._rest)
        elif whole and self._size <= MAX_JSON_BYTES and self._body:
            try:
                payload = msgspec.json.decode(b"".join(self._body))
            except msgspec.DecodeError:
                return
            self.tally.observe(payload)

    def _scan(self, chunk: bytes) -> None:
        """Reads the lines ``chunk`` completes; keeps the unfinished last one."""
        end = chunk.rfind(b"\n")
        if end < 0:  # no whole line yet
            data = self._rest + chunk
            self._rest = data if len(data) <= MAX_JSON_BYTES else b""
            return
        start = 0
        if self._rest:  # the line begun in an earlier chunk
            start = chunk.find(b"\n") + 1
            self._line(self._rest + chunk[:start - 1])
        if len(self._gates) == 1:  # only the lines holding the gate are looked at
            gate = self._gates[0]
            at = chunk.find(gate, start, end)
            while at >= 0:
                stop = chunk.find(b"\n", at, end + 1)
                self._line(chunk[max(start, chunk.rfind(b"\n", start, at) + 1):stop])
                at = chunk.find(gate, stop + 1, end)
        elif start < end and any(chunk.find(gate, start, end) >= 0 for gate in self._gates):
            for line in chunk[start:end].split(b"\n"):
                self._line(line)
        self._rest = chunk[end + 1:]

    def _line(self, line: bytes) -> None:
        if line.startswith(b"data:") and any(m in line for m in MARKERS):
            with contextlib.suppress(msgspec.DecodeError):
                self.tally.observe(msgspec.json.decode(line[5:].strip()))


def upstream_headers(headers: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() in FORWARDED] + [("accept-encoding", "identity")]


def mapped_body(body: bytes, routes: ModelRoutes) -> tuple[bytes, str, str]:
    """(body to send, alias asked for, upstream model); a body that is no JSON object is 400."""
    try:
        payload = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise ApiError(400, "A model request is a JSON object.", "model_request_invalid") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "A model request is a JSON object.", "model_request_invalid")
    alias = payload.get("model") if isinstance(payload.get("model"), str) else ""
    upstream_model = routes.upstream_model(alias) if alias else ""
    if upstream_model != alias:
        payload["model"] = upstream_model
        body = msgspec.json.encode(payload)
    return body, alias, upstream_model


async def open_upstream(upstream: ModelUpstream, path: str, query: str, headers: Any, body: bytes) -> UpstreamAnswer:
    try:
        return await upstream.open(path, query, upstream_headers(headers), body)
    except Unavailable as exc:
        raise ApiError(503, exc.message, "model_proxy_unavailable") from None


async def relay(
    *, meter: Meter, who: Metered, api: str, upstream: ModelUpstream, path: str, query: str, headers: Any,
    body: bytes, clock: Callable[[], str], after: Callable[[], None] = lambda: None,
) -> Stream:
    """The streamed answer of ``upstream`` to this request, metered to ``who`` when it ends."""
    started = time.perf_counter()
    sent, alias, upstream_model = mapped_body(body, meter.routes)
    answer = await open_upstream(upstream, path, query, headers, sent)
    content_type = next((v for k, v in answer.headers if k.lower() == "content-type"), "application/octet-stream")
    tally = Tally(api)
    observer = Observer(tally, content_type)

    def record(partial: bool) -> None:
        try:
            meter.record(
                who, tally, request_id=uuid.uuid4().hex, at=clock(), alias=alias, upstream=upstream.name,
                upstream_model=upstream_model, status=answer.status,
                duration_ms=int((time.perf_counter() - started) * 1000), partial=partial,
            )
        except Exception as exc:  # the caller has its answer; the record is what is lost (logged)
            log.error("model_usage_not_recorded", tenant=who.tenant, run_id=who.run_id, agent_id=who.agent_id,
                      error=repr(exc))
            return
        try:
            after()
        except Exception as exc:
            log.warning("model_use_not_marked", tenant=who.tenant, error=repr(exc))

    async def chunks() -> AsyncIterator[bytes]:
        whole = False
        try:
            async for chunk in answer.chunks():
                observer.feed(chunk)
                yield chunk
            whole = True
        finally:
            observer.end(whole)
            with anyio.CancelScope(shield=True):
                await answer.close()
                partial = not whole or (answer.status == 200 and not tally.completed)
                if not whole:
                    log.warning("model_stream_cut", tenant=who.tenant, run_id=who.run_id, agent_id=who.agent_id,
                                api=api)
                await anyio.to_thread.run_sync(record, partial)

    relayed = {k: v for k, v in answer.headers if k.lower() != "content-type"}
    return Stream(chunks(), status_code=answer.status, media_type=content_type, headers=relayed)

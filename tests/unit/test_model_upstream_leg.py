"""The model proxy's upstream leg (``workers.adapters.model_upstream``) against a scripted
HTTP/1.1 server on loopback, and the relay's usage scan (``api.workspaces.relay.Observer``)
fed the same stream cut at every size."""

from __future__ import annotations

import asyncio
import json

import pytest

from api.workspaces.relay import Observer
from domain.shared.errors import Unavailable
from domain.workspaces.usage import CHAT, MESSAGES, RESPONSES, Tally
from workers.adapters.model_upstream import HttpUpstream


def frame(name: str, payload: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


MESSAGES_STREAM = (
    frame("message_start", {"type": "message_start", "message": {"model": "up-1", "usage": {
        "input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 1}}})
    + b"".join(frame("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
        "type": "text_delta", "text": f'usage "message_stop" finish_reason {i}'}}) for i in range(40))
    + frame("message_delta", {"type": "message_delta", "usage": {"output_tokens": 41}})
    + frame("message_stop", {"type": "message_stop"})
)


def observed(stream: bytes, size: int, *, whole: bool = True) -> Tally:
    """The tally of an Anthropic Messages ``stream`` fed to the scan in chunks of ``size``."""
    tally = Tally(MESSAGES)
    observer = Observer(tally, "text/event-stream")
    for at in range(0, len(stream), size):
        observer.feed(stream[at:at + size])
    observer.end(whole)
    return tally


@pytest.mark.parametrize("size", [1, 2, 7, 64, 333, len(MESSAGES_STREAM)])
def test_the_usage_scan_reads_the_same_tally_however_the_stream_is_cut(size: int) -> None:
    tally = observed(MESSAGES_STREAM, size)
    assert (tally.tokens_in, tally.cached_tokens, tally.tokens_out, tally.model, tally.completed) == (10, 3, 41, "up-1", True)


LONG_TEXT = b"".join(frame("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
    "type": "text_delta", "text": f'{i} "message_delta" usage ' + "x" * 900}}) for i in range(400))  # ~370 KiB
LONG_STREAM = MESSAGES_STREAM.replace(frame("message_delta", {"type": "message_delta", "usage": {"output_tokens": 41}}),
                                      LONG_TEXT + frame("message_delta", {"type": "message_delta",
                                                                          "usage": {"output_tokens": 441}}))


@pytest.mark.parametrize("size", [1000, 4096, 65536, 100_003, len(LONG_STREAM)])
def test_a_long_stream_is_read_at_its_start_and_its_end_the_same_however_it_is_cut(size: int) -> None:
    """The text between the start and the last ``TAIL_BYTES`` is passed by; the usage at
    both ends is read, whatever the chunks' sizes (lines crossing the head's and the tail's edges)."""
    assert len(LONG_STREAM) > 4 * (64 << 10)
    tally = observed(LONG_STREAM, size)
    assert (tally.tokens_in, tally.cached_tokens, tally.tokens_out, tally.model, tally.completed) == (10, 3, 441, "up-1", True)


def test_a_long_stream_cut_keeps_what_its_start_and_its_last_whole_lines_reported() -> None:
    """Cut after its cumulative ``message_delta`` but before ``message_stop``: the delta counts,
    the answer is not whole, and the unfinished last line is not read."""
    tally = observed(LONG_STREAM[:LONG_STREAM.index(b"event: message_stop") + 30], 8192, whole=False)
    assert (tally.tokens_in, tally.tokens_out, tally.completed) == (10, 441, False)


def test_the_usage_scan_of_a_cut_responses_stream_keeps_what_was_reported() -> None:
    stream = (frame("response.created", {"type": "response.created", "response": {"model": "up-2", "usage": None}})
              + frame("response.output_text.delta", {"type": "response.output_text.delta", "delta": '"usage"'}))
    tally = Tally(RESPONSES)
    observer = Observer(tally, "text/event-stream; charset=utf-8")
    observer.feed(stream[:-5])
    assert (tally.model, tally.tokens_out, tally.completed) == ("up-2", 0, False)


class Scripted:
    """An HTTP/1.1 server on loopback: answers each request with the next scripted answer."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers, self.connections, self.requests = answers, 0, []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


async def body_of(upstream: HttpUpstream) -> tuple[int, list[tuple[str, str]], bytes]:
    answer = await upstream.open("/v1/messages", "beta=true", [("content-type", "application/json")], b'{"a":1}')
    try:
        return answer.status, answer.headers, b"".join([chunk async for chunk in answer.chunks()])
    finally:
        await answer.close()


async def test_answers_arrive_decoded_and_a_kept_alive_connection_is_reused() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nrequest-id: r-1\r\nset-cookie: no\r\n"
               b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n")
    sized = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    until_close = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"whole\":true}"
    script = Scripted([chunked, sized, until_close])
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream = HttpUpstream("anthropic", f"http://127.0.0.1:{port}/root/", "service-key")
    try:
        assert await body_of(upstream) == (200, [("content-type", "text/event-stream"), ("request-id", "r-1")],
                                           b"hello, world")
        assert await body_of(upstream) == (429, [("content-type", "application/json")], b"{}")
        assert await body_of(upstream) == (200, [("content-type", "application/json")], b'{"whole":true}')
    finally:
        await upstream.aclose()
        server.close()
    assert script.connections == 1  # one connection served all three
    first = script.requests[0].decode()
    assert first.startswith("POST /root/v1/messages?beta=true HTTP/1.1\r\n")
    assert f"host: 127.0.0.1:{port}\r\n" in first and "x-api-key: service-key\r\n" in first
    assert first.endswith('\r\n\r\n{"a":1}')


async def test_an_upstream_that_cannot_be_reached_is_unavailable() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(Unavailable) as refused:
        await HttpUpstream("openai", f"http://127.0.0.1:{port}", "k").open("/v1/responses", "", [], b"{}")
    assert refused.value.code == "model_proxy_unavailable"


async def test_a_cut_answer_raises_once_the_delivered_part_is_read() -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100\r\n\r\npart"
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(cut)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    answer = await HttpUpstream("anthropic", f"http://127.0.0.1:{port}", "").open("/v1/messages", "", [], b"{}")
    received = []
    with pytest.raises(ConnectionError):
        async for chunk in answer.chunks():
            received.append(chunk)
    await answer.close()
    server.close()
    assert b"".join(received) == b"part"


def test_the_usage_scan_of_chat_completions_reads_the_last_chunk() -> None:
    chunk = {"model": "up-3", "choices": [{"index": 0, "delta": {"content": "usage"}, "finish_reason": None}]}
    stream = (b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for _ in range(5))
              + b'data: {"model":"up-3","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
              b'"usage":{"prompt_tokens":9,"completion_tokens":4}}\n\ndata: [DONE]\n\n')
    tally = Tally(CHAT)
    observer = Observer(tally, "text/event-stream")
    for at in range(0, len(stream), 50):
        observer.feed(stream[at:at + 50])
    observer.end()
    assert (tally.tokens_in, tally.tokens_out, tally.model, tally.completed) == (9, 4, "up-3", True)

"""A model relay with no framework, for ``bench_proxy`` to measure beside the proxy in the same run.

What any HTTP/1.1 relay of a streamed answer must do, and nothing else: uvloop, the
caller's request parsed by httptools and sent on to the upstream over a kept-alive
connection, the upstream's answer parsed by httptools and each body part written back
re-chunked as it arrives (``writelines``: no copy), the upstream paused while the caller's
socket is full. No token, no alias, no meter, no ASGI: the ceiling of a Python relay on
this machine. ``python -m bench.bare_relay <port> <upstream port>``.
"""

from __future__ import annotations

import asyncio
import sys

import httptools
import uvloop

PASSED = (b"content-type",)  # the request headers passed on (besides the length)


class Upstream(asyncio.Protocol):
    """The kept-alive connection to the upstream of one caller's connection."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes) -> None:
        self.parser = httptools.HttpResponseParser(self)
        assert self.transport is not None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_headers_complete(self) -> None:
        self.caller.write(b"HTTP/1.1 %d OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                          % self.parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        self.caller.writelines([b"%x\r\n" % len(body), body, b"\r\n"])

    def on_message_complete(self) -> None:
        self.caller.write(b"0\r\n\r\n")


class Caller(asyncio.Protocol):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream: Upstream | None = None
        self.parser = httptools.HttpRequestParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.write, self.writelines = self.transport.write, self.transport.writelines

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in PASSED:
            self.headers.append(name + b": " + value + b"\r\n")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.body)
        request = (b"POST %s HTTP/1.1\r\nhost: upstream\r\ncontent-length: %d\r\n" % (self.url, len(body))
                   + b"".join(self.headers) + b"\r\n" + body)
        asyncio.get_running_loop().create_task(self._send(request))

    async def _send(self, request: bytes) -> None:
        if self.upstream is None:
            _, self.upstream = await asyncio.get_running_loop().create_connection(
                lambda: Upstream(self), "127.0.0.1", self.upstream_port)
        self.upstream.send(request)

    def pause_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()


async def main(port: int, upstream_port: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Caller(upstream_port), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))

"""A model API upstream over HTTP/1.1: Anthropic's or OpenAI's root, under the service's key.

The request goes to ``<root><path>`` with the caller's query string; the caller's own
credentials never go upstream (the relay forwards only the headers that describe the
call), the service's key is added here: ``x-api-key`` for Anthropic, a bearer token for
OpenAI. The answer is streamed back as it arrives: the body bytes each socket read brings
(transfer encoding removed, ``identity`` content encoding asked for, so the bytes relayed
are the bytes sent), read from an asyncio protocol and parsed by httptools (the C parser
uvicorn uses). Connections are kept alive and reused, one pool per event loop; a caller
that reads slower than the upstream writes pauses the socket (``pause_reading``), so an
answer is never held whole in memory.

An egress proxy is honoured as the environment names it: ``HTTPS_PROXY`` for an https
upstream (a ``CONNECT`` tunnel, TLS to the upstream inside it), ``HTTP_PROXY`` for an http
one (the request in absolute form), neither when ``NO_PROXY`` names the upstream's host
(lower-case names first, as curl reads them; credentials in the proxy's URL are sent as
``Proxy-Authorization: Basic``).

A kept-alive connection the upstream closed as it was reused (the close and the request
crossed) is retried once on a fresh connection, when not one byte of an answer arrived on
it: the upstream cannot have answered the request. A fresh connection, or one that brought
any byte of an answer, is never retried.

A general HTTP client (httpx) spent most of the relay's time here: an async read of at most
64 KiB under a cancel scope each, then a pure-Python parse of the chunks.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import unquote, urlsplit
from urllib.request import proxy_bypass_environment

import certifi
import httptools

from domain.shared.errors import Unavailable

ANTHROPIC, OPENAI = "anthropic", "openai"
RELAYED = frozenset({"content-type", "request-id", "x-request-id", "retry-after"})
HIGH_WATER = 1 << 20  # body bytes read ahead of the caller before the socket is paused
IDLE_KEPT = 50  # idle keep-alive connections kept per event loop


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.received = 0  # bytes of an answer to the current request
        self._parser: httptools.HttpResponseParser | None = None
        self._tunnel: asyncio.Future[bytes] | None = None
        self._tunnel_head = b""

    async def tunnel(self, target: str, authorization: str) -> None:
        """``CONNECT target`` through the proxy this connection reaches; returns once it is open."""
        self._tunnel = asyncio.get_running_loop().create_future()
        lines = [f"CONNECT {target} HTTP/1.1", f"host: {target}"]
        if authorization:
            lines.append(f"proxy-authorization: {authorization}")
        assert self.transport is not None
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = await self._tunnel
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        if status.split(" ")[1:2] != ["200"]:
            raise ConnectionError(f"the egress proxy refused the tunnel: {status}")

    # -- a request and its answer ---------------------------------------------------------------

    def start(self, request: bytes) -> None:
        loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self.head: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self._parts: list[bytes] = []
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None
        self._paused = False
        self.complete = False
        self._until_close = True  # no length and no chunks: the body ends with the connection
        self.keep_alive = False
        self.received = 0
        assert self.transport is not None
        self.transport.write(request)

    async def chunk(self, timeout: float) -> bytes | None:
        """The body bytes received since the last call (waiting for some), or None at the end."""
        while not self._parts:
            if self._error is not None:
                raise self._error
            if self.complete:
                return None
            if self._paused and self.transport is not None:
                self._paused = False
                self.transport.resume_reading()
            self._waiter = asyncio.get_running_loop().create_future()
            late = asyncio.get_running_loop().call_later(timeout, self._late, self._waiter)
            try:
                await self._waiter
            finally:
                late.cancel()
                self._waiter = None
        parts, self._parts, self._buffered = self._parts, [], 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _late(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(ConnectionError("the upstream sent nothing for too long"))
        self.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        if self._tunnel is not None:  # the proxy's answer to CONNECT (nothing follows it unasked)
            self._tunnel_head += data
            if b"\r\n\r\n" in self._tunnel_head or len(self._tunnel_head) > 16 << 10:
                self._tunnel.set_result(self._tunnel_head)
                self._tunnel = None
            return
        self.received += len(data)
        if self._parser is None or self.complete:  # bytes on an idle connection: not reused
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"the upstream's answer is not HTTP/1.1: {exc}"))
            self.close()
            return
        if self._parts or self.complete:
            self._wake()
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._tunnel is not None:
            self._tunnel.set_exception(ConnectionError(f"the egress proxy closed the connection: {exc!r}"))
            self._tunnel = None
        if self._parser is None or self.complete:
            return
        if self.head.done() and self._until_close and exc is None:
            self.complete = True  # the body that ends with the connection has ended
            self._wake()
            return
        self._fail(ConnectionError(f"the upstream closed the connection: {exc!r}"))

    def _fail(self, error: Exception) -> None:
        self._error = error
        if not self.head.done():
            self.head.set_exception(error)
        self._wake()

    # -- httptools' callbacks -------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        if key in ("content-length", "transfer-encoding"):
            self._until_close = False
        self.headers.append((key, text))

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self.status = self._parser.get_status_code()
        if self.status in (204, 304) or 100 <= self.status < 200:
            self._until_close = False
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._parts.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        assert self._parser is not None
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()


class _Answer:
    def __init__(self, connection: _Connection, pool: list[_Connection], read_seconds: float) -> None:
        self._connection, self._pool, self._read = connection, pool, read_seconds
        self.status = connection.status
        self.headers = [(k, v) for k, v in connection.headers if k in RELAYED]

    async def chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._connection.chunk(self._read)) is not None:
            if chunk:
                yield chunk

    async def close(self) -> None:
        connection = self._connection
        if connection.complete and connection.keep_alive and not connection.closed and len(self._pool) < IDLE_KEPT:
            connection._parser = None  # idle until its next request
            self._pool.append(connection)
        else:
            connection.close()


@dataclass(frozen=True)
class EgressProxy:
    host: str
    port: int
    authorization: str  # the Proxy-Authorization value, or ""


def egress_proxy(tls: bool, host: str, port: int, environ: Mapping[str, str]) -> EgressProxy | None:
    """The proxy ``environ`` names for an upstream at ``host:port`` (see the module)."""
    name = "https_proxy" if tls else "http_proxy"
    url = environ.get(name) or environ.get(name.upper()) or ""
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    if not url.strip() or (no_proxy and proxy_bypass_environment(f"{host}:{port}", {"no": no_proxy})):
        return None
    parts = urlsplit(url.strip() if "://" in url else f"http://{url.strip()}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{name.upper()} is not an http:// proxy URL: {parts.scheme}://{parts.hostname or ''}")
    authorization = ""
    if parts.username is not None:
        secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + base64.b64encode(secret).decode()
    return EgressProxy(parts.hostname, parts.port or 80, authorization)


class HttpUpstream:
    """``ModelUpstream`` over HTTP/1.1; one pool of keep-alive connections per event loop."""

    def __init__(self, name: str, root: str, key: str, *, connect_seconds: float = 10.0,
                 read_seconds: float = 600.0, environ: Mapping[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.name, self.root, self.key = name, root.rstrip("/"), key
        self._connect, self._read = connect_seconds, read_seconds
        parts = urlsplit(self.root)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"The {name} upstream's URL is not an http(s) URL: {root!r}.")
        self._host = parts.hostname
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        default = 443 if self._tls else 80
        self._authority = parts.netloc.rpartition("@")[2] if self._port != default else self._host
        self._base = parts.path
        self._ssl = (ssl_context or ssl.create_default_context(cafile=certifi.where())) if self._tls else None
        self._proxy = egress_proxy(self._tls, self._host, self._port, os.environ if environ is None else environ)
        self._pools: dict[int, list[_Connection]] = {}

    def _auth(self) -> list[tuple[str, str]]:
        if not self.key:
            return []
        return [("x-api-key", self.key)] if self.name == ANTHROPIC else [("authorization", f"Bearer {self.key}")]

    def _request(self, path: str, query: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
        target = self._base + path + (f"?{query}" if query else "")
        lines = [f"POST {target} HTTP/1.1", f"host: {self._authority}", f"content-length: {len(body)}"]
        if self._proxy is not None and not self._tls:  # to the proxy, in absolute form
            lines[0] = f"POST http://{self._authority}{target} HTTP/1.1"
            if self._proxy.authorization:
                lines.append(f"proxy-authorization: {self._proxy.authorization}")
        for key, value in headers + self._auth():
            if any(c in key or c in value for c in "\r\n") or key.lower() in ("host", "content-length"):
                continue  # a header cannot add a line of its own (the relay forwards only known names)
            lines.append(f"{key}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _connection(self, pool: list[_Connection]) -> tuple[_Connection, bool]:
        """A kept-alive connection (True) or a new one (False)."""
        while pool:
            connection = pool.pop()
            if not connection.closed and connection.transport is not None and not connection.transport.is_closing():
                return connection, True
        loop = asyncio.get_running_loop()
        proxy = self._proxy
        async with asyncio.timeout(self._connect):
            if proxy is None:
                _, connection = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=self._ssl,
                    server_hostname=self._host if self._tls else None)
                return connection, False
            transport, connection = await loop.create_connection(_Connection, proxy.host, proxy.port)
            if self._tls:  # a tunnel to the upstream, TLS with the upstream inside it
                try:
                    await connection.tunnel(f"{self._authority_port()}", proxy.authorization)
                    tls = await loop.start_tls(transport, connection, cast(ssl.SSLContext, self._ssl),
                                               server_hostname=self._host)
                except BaseException:
                    transport.close()
                    raise
                if tls is None:
                    raise ConnectionError("the tunnel closed before TLS")
                connection.transport = cast(asyncio.Transport, tls)
        return connection, False

    def _authority_port(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self._port}"

    async def open(self, path: str, query: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        pool = self._pools.setdefault(id(asyncio.get_running_loop()), [])
        try:
            request = self._request(path, query, headers, body)
        except UnicodeEncodeError:
            raise Unavailable(f"The {self.name} model upstream cannot be sent these headers.",
                              code="model_proxy_unavailable") from None
        retried = False
        while True:
            connection: _Connection | None = None
            reused = False
            try:
                connection, reused = await self._connection(pool)
                connection.start(request)
                async with asyncio.timeout(self._read):
                    await connection.head
                return _Answer(connection, pool, self._read)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                if connection is not None:
                    connection.close()
                if reused and not retried and connection is not None and connection.received == 0 \
                        and not isinstance(exc, TimeoutError):
                    retried = True  # closed by the upstream as it was reused: nothing was answered
                    continue
                raise Unavailable(f"The {self.name} model upstream did not answer: {type(exc).__name__}.",
                                  code="model_proxy_unavailable") from None

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            for connection in pool:
                connection.close()

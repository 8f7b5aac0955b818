"""The model proxy's upstream leg (issue 26): through a company's egress proxy as the
environment names it (``HTTPS_PROXY``: a CONNECT tunnel with TLS to the upstream inside it;
``HTTP_PROXY``: the request in absolute form; ``NO_PROXY``), and a kept-alive connection the
upstream closed as it was reused retried once, never once an answer's byte arrived."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from domain.shared.errors import Unavailable
from workers.adapters.model_upstream import HttpUpstream

ANSWER = b'{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}'
Handler = Callable[[int, int, asyncio.StreamWriter], Awaitable[bool]]  # (connection, request, writer) -> answered


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + await reader.readexactly(length)


def ok(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(ANSWER) + ANSWER)


class Upstream:
    """A scripted upstream: ``handler(connection, request, writer)`` answers (or not) each request."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler
        self.requests: list[bytes] = []
        self.connections = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection, count = self.connections, 0
        while (request := await read_request(reader)) is not None:
            count += 1
            self.requests.append(request)
            if self.handler is None:
                ok(writer)
            elif not await self.handler(connection, count, writer):
                break
            await writer.drain()
        writer.close()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: list[bytes]) -> None:
    try:
        while data := await reader.read(65536):
            seen.append(data)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


class EgressProxy:
    """A small forward proxy: CONNECT tunnels, and plain requests in absolute form."""

    def __init__(self, refuse: bytes = b"") -> None:
        self.heads: list[bytes] = []
        self.through: list[bytes] = []  # every byte it carried from the client
        self.refuse = refuse

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        method, target, _ = head.split(b"\r\n", 1)[0].split(b" ")
        if self.refuse:
            writer.write(self.refuse)
            writer.close()
            return
        if method == b"CONNECT":
            host, _, port = target.decode().rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            rest = b""
        else:  # http://host:port/path: to the host, the path in origin form
            authority, _, path = target.decode().removeprefix("http://").partition("/")
            host, _, port = authority.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            rest = head.replace(target, b"/" + path.encode(), 1)
            up_writer.write(rest)
        self.through.append(rest)
        await asyncio.gather(pipe(reader, up_writer, self.through), pipe(up_reader, writer, []))


@asynccontextmanager
async def listening(serve: Callable[..., Awaitable[None]], tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def certificates(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(the upstream's context for ``localhost``, a client's that trusts it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    return server, ssl.create_default_context(cafile=str(tmp / "cert.pem"))


async def call(upstream: HttpUpstream) -> bytes:
    answer = await upstream.open("/v1/messages", "beta=true", [("content-type", "application/json")], b'{"model":"m"}')
    try:
        return b"".join([chunk async for chunk in answer.chunks()])
    finally:
        await answer.close()


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])  # the service runs uvloop
def test_an_https_upstream_is_reached_through_the_egress_proxys_connect_tunnel(
    tmp_path: Path, run: Callable[[Any], list[bytes]],
) -> None:
    server_tls, client_tls = certificates(tmp_path)
    upstream, proxy = Upstream(), EgressProxy()

    async def scenario() -> list[bytes]:
        async with listening(upstream.serve, server_tls) as port, listening(proxy.serve) as proxy_port:
            environ = {"HTTPS_PROXY": f"http://squad%40ops:p%3Ass@127.0.0.1:{proxy_port}", "NO_PROXY": "example.com"}
            models = HttpUpstream("anthropic", f"https://localhost:{port}", "sk-service", environ=environ,
                                  ssl_context=client_tls)
            try:
                return [await call(models), await call(models)]
            finally:
                await models.aclose()

    answers = run(scenario())
    assert answers == [ANSWER, ANSWER]
    [head] = proxy.heads  # one tunnel, kept alive for both requests
    assert head.startswith(b"CONNECT localhost:")
    assert f"proxy-authorization: Basic {base64.b64encode(b'squad@ops:p:ss').decode()}".encode() in head
    assert [r.split(b"\r\n", 1)[0] for r in upstream.requests] == [b"POST /v1/messages?beta=true HTTP/1.1"] * 2
    assert all(b"x-api-key: sk-service" in r for r in upstream.requests)
    assert b"sk-service" not in b"".join(proxy.through)  # TLS inside the tunnel: the proxy sees no key


def test_an_http_upstream_goes_through_http_proxy_unless_no_proxy_names_it() -> None:
    upstream, proxy = Upstream(), EgressProxy()

    async def scenario() -> None:
        async with listening(upstream.serve) as port, listening(proxy.serve) as proxy_port:
            for environ in ({"http_proxy": f"127.0.0.1:{proxy_port}", "HTTP_PROXY": "http://127.0.0.1:9"},
                            {"HTTP_PROXY": f"http://127.0.0.1:{proxy_port}", "no_proxy": "localhost, 127.0.0.1"}):
                models = HttpUpstream("openai", f"http://127.0.0.1:{port}", "sk-openai", environ=environ)
                try:
                    assert await call(models) == ANSWER
                finally:
                    await models.aclose()

    asyncio.run(scenario())
    [head] = proxy.heads  # the second upstream's host is in NO_PROXY: straight to it
    assert head.startswith(b"POST http://127.0.0.1:") and b"/v1/messages?beta=true HTTP/1.1\r\n" in head
    assert len(upstream.requests) == 2 and all(b"authorization: Bearer sk-openai" in r for r in upstream.requests)


def test_an_egress_proxy_refusing_the_tunnel_is_unavailable(tmp_path: Path) -> None:
    proxy = EgressProxy(refuse=b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")

    async def scenario() -> None:
        async with listening(proxy.serve) as proxy_port:
            models = HttpUpstream("anthropic", "https://localhost:1", "k", environ={"HTTPS_PROXY": f"127.0.0.1:{proxy_port}"})
            with pytest.raises(Unavailable) as refused:
                await call(models)
            assert refused.value.code == "model_proxy_unavailable"

    asyncio.run(scenario())
    assert len(proxy.heads) == 1


def test_a_proxy_url_that_is_not_http_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="HTTPS_PROXY"):
        HttpUpstream("anthropic", "https://api.anthropic.com", "k", environ={"HTTPS_PROXY": "socks5://10.0.0.1:1080"})


def closing_on(connection: int, request: int, sent: bytes = b"") -> Handler:
    """Answers every request but ``request`` on ``connection``: that one is closed after ``sent``."""

    async def handler(at_connection: int, at_request: int, writer: asyncio.StreamWriter) -> bool:
        if (at_connection, at_request) == (connection, request):
            writer.write(sent)
            await writer.drain()
            return False
        ok(writer)
        return True

    return handler


@pytest.mark.parametrize(("handler", "answered", "connections"), [
    # closed as it was reused, nothing answered: once more on a fresh connection
    (closing_on(1, 2), [ANSWER, ANSWER], 2),
    # a byte of an answer arrived on it: never retried
    (closing_on(1, 2, b"HTTP/1.1 200 OK\r\n"), [ANSWER, None], 1),
    # a fresh connection closed unanswered: not retried either
    (closing_on(1, 1), [None], 1),
])
def test_a_kept_alive_connection_closed_on_reuse_is_retried_once(
    handler: Handler, answered: list[bytes | None], connections: int,
) -> None:
    upstream = Upstream(handler)

    async def scenario() -> list[bytes | None]:
        async with listening(upstream.serve) as port:
            models = HttpUpstream("anthropic", f"http://127.0.0.1:{port}", "k", environ={})
            results: list[bytes | None] = []
            try:
                for _ in answered:
                    try:
                        results.append(await call(models))
                    except Unavailable:
                        results.append(None)
            finally:
                await models.aclose()
            return results

    assert asyncio.run(scenario()) == answered
    assert upstream.connections == connections

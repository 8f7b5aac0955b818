"""``squadops open``: a local proxy on 127.0.0.1 that adds dev edge claims.

In production the edge proxy authenticates people and sets the claim headers on every
request; the pages and the API read them alike (C2). In development nothing sets them, so
this proxy does: it drops any edge header the browser sent, adds the dev claims (and a
signed assertion when ``SQUADOPS_EDGE_JWT_KEY`` is set), and forwards to the service,
streaming the answer back as it comes (the live channel is a stream that never ends).
It listens on the loopback interface only: the claims it adds are nobody's to share.

Nor are they any other page's to use: a browser would send a page on another origin's
requests here just as well. So it forwards only same-origin requests (``own_request``):
the Host a loopback name with the proxy's port (a DNS-rebound name is refused), any
``Origin`` that same origin, and ``Sec-Fetch-Site`` (when sent) ``same-origin`` or
``none``; anything else is a 403 ``origin_not_allowed``. What it forwards carries no
``Origin``: the proxy checked it, and its own origin is not the service's (``api.browser``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from api.auth import ASSERTION_HEADER, EMAIL_HEADER, GROUPS_HEADER, sign_assertion, split_groups
from api.browser import LOOPBACK_NAMES, origin_of

# Hop-by-hop headers (RFC 9110 §7.6.1) and what httpx sets itself.
_REQUEST_DROP = {
    b"host", b"connection", b"keep-alive", b"proxy-authorization", b"proxy-connection",
    b"te", b"trailer", b"transfer-encoding", b"upgrade", b"content-length",
}
_RESPONSE_DROP = {b"connection", b"keep-alive", b"transfer-encoding", b"trailer", b"upgrade", b"proxy-authenticate"}
_EDGE_PREFIX = b"x-edge-"
_SAME_SITE = ("same-origin", "none")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listening address) is the loopback interface."""
    return host in ("127.0.0.1", "localhost", "::1", "[::1]") or host.startswith("127.")


def own_request(scope: dict[str, Any]) -> bool:
    """Whether a request came from a page of the proxy's own origin (see the module)."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    port = (scope.get("server") or ("", 0))[1]
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES} | (set(LOOPBACK_NAMES) if port == 80 else set())
    host = headers.get("host", "").lower()
    if host not in hosts:
        return False
    origin = headers.get("origin")
    if origin is not None and origin_of(origin) != origin_of(f"http://{host}"):
        return False
    return headers.get("sec-fetch-site", "none") in _SAME_SITE


def dev_claims(email: str, groups: str, jwt_key: str = "") -> Callable[[], list[tuple[bytes, bytes]]]:
    """The claim headers to add, fresh per request (an assertion expires)."""

    def headers() -> list[tuple[bytes, bytes]]:
        found = [(EMAIL_HEADER.encode(), email.encode()), (GROUPS_HEADER.encode(), groups.encode())]
        if jwt_key:
            claims = {"email": email, "groups": list(split_groups(groups)), "exp": int(time.time()) + 3600}
            found.append((ASSERTION_HEADER.encode(), sign_assertion(claims, jwt_key).encode()))
        return found

    return headers


class EdgeProxy:
    """An ASGI app forwarding every HTTP request to ``upstream`` with the dev claims."""

    def __init__(self, upstream: str, claims: Callable[[], list[tuple[bytes, bytes]]]) -> None:
        self.upstream = upstream.rstrip("/")
        self.claims = claims
        self.client: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            # No read timeout: a live stream is silent between heartbeats by design.
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None), follow_redirects=False)
        return self.client

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            if own_request(scope):
                await self._forward(scope, receive, send)
            else:
                await self._refuse(send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1003})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.client is not None:
                    await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @staticmethod
    async def _refuse(send: Any) -> None:
        body = msgspec.json.encode(
            {"detail": "squadops open forwards only requests from its own pages.", "code": "origin_not_allowed"}
        )
        await send({"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    async def _forward(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (name, value)
            for name, value in scope["headers"]
            if name.lower() not in _REQUEST_DROP and name.lower() != b"origin" and not name.lower().startswith(_EDGE_PREFIX)
        ] + self.claims()
        target = self.upstream + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        client = self._client()
        try:
            response = await client.send(
                client.build_request(scope["method"], target, headers=headers, content=body), stream=True
            )
        except httpx.TransportError as exc:
            text = f"squadops open: the service at {self.upstream} did not answer ({exc!r}).\n".encode()
            await send({"type": "http.response.start", "status": 502, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": text})
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in _RESPONSE_DROP],
                }
            )
            relay = asyncio.create_task(self._relay(response, send))
            gone = asyncio.create_task(self._disconnected(receive))
            done, pending = await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for task in done:
                with contextlib.suppress(httpx.HTTPError, OSError):
                    task.result()
        finally:
            await response.aclose()

    @staticmethod
    async def _relay(response: httpx.Response, send: Any) -> None:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _disconnected(receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

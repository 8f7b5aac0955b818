"""A model API upstream over HTTP (httpx): Anthropic's or OpenAI's root, under the service's key.

The request goes to ``<root><path>`` with the caller's query string; the caller's own
credentials never go upstream (the relay forwards only the headers that describe the
call), the service's key is added here: ``x-api-key`` for Anthropic, a bearer token for
OpenAI. The answer is streamed back as it arrives (``aiter_raw``, with ``identity``
encoding asked for, so the bytes relayed are the bytes sent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from domain.shared.errors import Unavailable

ANTHROPIC, OPENAI = "anthropic", "openai"
RELAYED = frozenset({"content-type", "request-id", "x-request-id", "retry-after"})


class _Answer:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = [(k, v) for k, v in response.headers.items() if k.lower() in RELAYED]

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise ConnectionError(f"the upstream cut its answer: {exc!r}") from None

    async def close(self) -> None:
        await self._response.aclose()


class HttpUpstream:
    """``ModelUpstream`` over HTTP; one connection pool per event loop."""

    def __init__(self, name: str, root: str, key: str, *, connect_seconds: float = 10.0,
                 read_seconds: float = 600.0) -> None:
        self.name, self.root, self.key = name, root.rstrip("/"), key
        self._timeout = httpx.Timeout(connect=connect_seconds, read=read_seconds, write=60.0, pool=connect_seconds)
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _client(self) -> httpx.AsyncClient:
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
            client = self._clients[loop] = httpx.AsyncClient(timeout=self._timeout, limits=limits)
        return client

    def _auth(self) -> list[tuple[str, str]]:
        if not self.key:
            return []
        return [("x-api-key", self.key)] if self.name == ANTHROPIC else [("authorization", f"Bearer {self.key}")]

    async def open(self, path: str, query: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        url = self.root + path + (f"?{query}" if query else "")
        client = self._client()
        request = client.build_request("POST", url, headers=headers + self._auth(), content=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise Unavailable(f"The {self.name} model upstream did not answer: {type(exc).__name__}.",
                              code="model_proxy_unavailable") from None
        return _Answer(response)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

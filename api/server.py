"""The HTTP server: uvicorn, stopped gracefully by SIGTERM (or SIGINT).

Stopping, in order: no new connections; every live stream gets a final event telling its
client to reconnect (SSE ``event: reconnect`` with a ``retry:`` hint, WebSocket close
1012), so it does not hang on until the graceful timeout; requests in flight finish; the
app's shutdown stops the workers, which commit their positions. Then the process exits 0:
uvicorn would raise the signal again once stopped, killing the process before the
service's parts are closed.

A connection must send a whole request head within ``header_read_timeout`` seconds of
opening (or of its next request starting), in at most ``MAX_HEAD_BYTES``; otherwise it is
closed: thousands of connections trickling unfinished headers are not held forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Generator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD_BYTES = 16 << 10  # a request line and headers (an edge assertion is a few KB)


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete
    within ``head_timeout`` seconds."""

    head_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # bytes of a head: it has that long to end
            self._arm_head_timer()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def head_timeout_protocol(seconds: float) -> type[HeadTimeoutProtocol]:
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), {"head_timeout": seconds})


def server_config(app: Any, *, host: str, port: int, header_read_timeout: float = 10.0, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the service: h11 with the head's timeout and size bound."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=head_timeout_protocol(header_read_timeout),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        **{"log_level": "warning", "access_log": False, **options},
    )


class GracefulServer(uvicorn.Server):
    """uvicorn's server, with ``drain`` called as the shutdown begins."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], None]) -> None:
        super().__init__(config)
        self.drain = drain

    async def shutdown(self, sockets: Any = None) -> None:
        for server in self.servers:  # first stop accepting: a reconnect goes elsewhere
            server.close()
        self.drain()
        await super().shutdown(sockets=sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def serve(
    app: Any, *, host: str, port: int, drain: Callable[[], None], graceful_seconds: float = 5.0,
    header_read_timeout: float = 10.0,
) -> None:
    """Serves ``app`` until SIGTERM/SIGINT, then stops gracefully (see the module)."""
    config = server_config(
        app, host=host, port=port, header_read_timeout=header_read_timeout, timeout_graceful_shutdown=graceful_seconds
    )
    GracefulServer(config, drain).run()

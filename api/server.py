"""The HTTP server: uvicorn, stopped gracefully by SIGTERM (or SIGINT).

Stopping, in order: no new connections; every live stream gets a final event telling its
client to reconnect (SSE ``event: reconnect`` with a ``retry:`` hint, WebSocket close
1012), so it does not hang on until the graceful timeout; requests in flight finish; the
app's shutdown stops the workers, which commit their positions. Then the process exits 0:
uvicorn would raise the signal again once stopped, killing the process before the
service's parts are closed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Generator
from typing import Any

import uvicorn


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


def serve(app: Any, *, host: str, port: int, drain: Callable[[], None], graceful_seconds: float = 5.0) -> None:
    """Serves ``app`` until SIGTERM/SIGINT, then stops gracefully (see the module)."""
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False,
        timeout_graceful_shutdown=graceful_seconds,
    )
    GracefulServer(config, drain).run()

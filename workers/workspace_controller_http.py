"""The workspace controller's own HTTP server: ``GET /healthz`` (C16: 127.0.0.1:8001)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

import msgspec
import structlog

from workers.json_http import JsonHandler

log = structlog.get_logger("squadops.workspace_controller")
_encode = msgspec.json.Encoder().encode


class HealthServer:
    """Serves the controller's health on its own port, in a thread of its own."""

    def __init__(self, health: Callable[[], dict[str, Any]], host: str, port: int) -> None:
        self.health, self.host, self.port = health, host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        health = self.health

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                if self.path.split("?", 1)[0] == "/healthz":
                    try:
                        status, body = 200, health()
                    except Exception as exc:  # the read model is away: say so, in the C3 shape
                        status, body = 503, {"detail": f"controller health unavailable: {exc!r}", "code": "unavailable"}
                else:
                    status, body = 404, {"detail": "No such path.", "code": "not_found"}
                self.send_json(status, _encode(body))

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="controller-http", daemon=True)
        self._thread.start()
        log.info("workspace_controller_listening", url=f"http://{self.host}:{self.port}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

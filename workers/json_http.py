"""A handler for the small ``http.server`` servers that answer JSON (the workspace
controller's health; the tests' stand-ins for the services this one calls)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """Reads and answers JSON, and logs nothing (http.server would write every request to
    stderr; the service logs through structlog)."""

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["content-length"])))

    def send_json(self, status: int, body: object) -> None:
        """Answers ``body`` (bytes as they are, anything else encoded as JSON) with its length."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        return

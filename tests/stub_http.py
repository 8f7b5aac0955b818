"""Stand-ins for the HTTP services the service calls (a JWKS endpoint, Sentry, Novu, a model
API), each a real HTTP server on a free loopback port (its handler a ``workers.json_http.JsonHandler``)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubServer:
    """Serves ``handler`` on a free loopback port in a thread until closed (or the block ends)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stops answering (a second close does nothing more)."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StubServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

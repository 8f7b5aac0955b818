"""A scripted Anthropic Messages upstream for ``bench_proxy``, in its own process.

``POST /v1/messages`` streams ``max_tokens`` text deltas of ``DELTA_BYTES`` each as SSE,
written as they are made (a short answer for first-byte latency, a long one for
throughput), between ``message_start`` and ``message_stop`` with its usage.
"""

from __future__ import annotations

import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DELTA_BYTES = 1024
BATCH = 32  # deltas per write


def frame(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Each chunk leaves when written, as a model API's stream does (no Nagle wait on the ACK).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        deltas = int(body.get("max_tokens") or 1)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        start = frame("message_start", {"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": body.get("model", ""), "content": [],
            "usage": {"input_tokens": 100, "output_tokens": 1}}})
        self._chunk(start + frame("content_block_start", {"type": "content_block_start", "index": 0,
                                                          "content_block": {"type": "text", "text": ""}}))
        delta = frame("content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "text_delta", "text": "x" * DELTA_BYTES}})
        for sent in range(0, deltas, BATCH):
            self._chunk(delta * min(BATCH, deltas - sent))
        self._chunk(frame("content_block_stop", {"type": "content_block_stop", "index": 0})
                    + frame("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                              "usage": {"output_tokens": deltas}})
                    + frame("message_stop", {"type": "message_stop"}))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()

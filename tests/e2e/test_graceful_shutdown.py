"""SIGTERM stops a process gracefully: a request in flight is answered, live clients are told
to reconnect, the workers commit their positions (having caught up), and the exit code is 0.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from projections.studio.runs import run_doc_key
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE, drive_runs, eventually
from tests.infra import reachable
from tests.live_helpers import (
    LIVE,
    STUDIO,
    SseEvent,
    SseReader,
    service_env,
    service_process,
    squadops_process,
    topic,
)
from workers.bootstrap import build, read_projectors
from workers.fanout import TRACKING_NAME

pytestmark = pytest.mark.pg


class SseClient(threading.Thread):
    """Follows one run's live channel until the server ends the stream."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.url, self.run_id = url, run_id
        self.subscribed = threading.Event()
        self.events: list[SseEvent] = []
        self.raw = b""
        self.ended = threading.Event()

    def run(self) -> None:
        reader = SseReader()
        try:
            with httpx.stream(
                "GET", f"{self.url}{LIVE}", params={"topic": topic(self.run_id)},
                headers={**ADMIN, "Last-Event-ID": "0"}, timeout=30,  # the run's events so far, then live
            ) as response:
                for chunk in response.iter_raw():
                    self.raw += chunk
                    self.events += reader.feed(chunk)
                    if "subscribed" in reader.comments:
                        self.subscribed.set()
        finally:
            self.ended.set()


class WsClient(threading.Thread):
    """Follows one run's live channel over the WebSocket until the server closes it."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.url = url.replace("http://", "ws://") + f"{LIVE}/ws?" + urlencode({"topic": topic(run_id)})
        self.messages = 0
        self.first = threading.Event()
        self.close_code: int | None = None

    def run(self) -> None:
        with ws_connect(self.url, additional_headers=ADMIN, open_timeout=15) as ws:
            with contextlib.suppress(ConnectionClosed):
                for _ in ws:
                    self.messages += 1
                    self.first.set()
            self.close_code = ws.close_code


def start_slow_launch(port: int) -> tuple[socket.socket, bytes]:
    """A launch whose body the client holds back: in flight until the body is sent.

    ``Expect: 100-continue`` makes the server say when the handler reads the body, so the
    request is surely in flight (not merely queued) when the signal comes.
    """
    body = msgspec.json.encode({"template_id": "delivery-core", "project_slug": "acme"})
    head = (
        f"POST {STUDIO}/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in ADMIN.items())
        + "\r\n"
    )
    conn = socket.create_connection(("127.0.0.1", port), timeout=15)
    conn.sendall(head.encode())
    interim = b""
    while b"\r\n\r\n" not in interim:
        interim += conn.recv(1024)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    return conn, body


def read_response(conn: socket.socket) -> tuple[int, dict[str, Any]]:
    raw = b""
    while chunk := conn.recv(65536):
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), msgspec.json.decode(body)


def test_sigterm_to_serve_finishes_requests_tells_live_clients_to_reconnect_and_commits(pg_url: str) -> None:
    settings = settings_for(pg_url)
    # The drain is bounded (3 s by default); a loaded test machine gets more time.
    drain = {"SQUADOPS_SHUTDOWN_DRAIN_SECONDS": "30"}
    with service_process(settings, tick_seconds=0.05, **drain) as service, httpx.Client(
        base_url=service.url, headers=ADMIN, timeout=15
    ) as http:
        assert http.post("/v1/project-factory/projects", json=DEMO_LIKE).status_code == 201
        run_id = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"}).json()["run_id"]
        assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202  # ticking: events flow
        live, socket_client = SseClient(service.url, run_id), WsClient(service.url, run_id)
        live.start()
        socket_client.start()
        assert live.subscribed.wait(15), "the SSE client was not subscribed"
        assert socket_client.first.wait(15), "the WebSocket client got no event"
        port = int(service.url.rsplit(":", 1)[1])
        conn, body = start_slow_launch(port)

        service.process.send_signal(signal.SIGTERM)
        eventually(lambda: not reachable("127.0.0.1", port, 0.2), timeout=10)  # stopped accepting
        conn.sendall(body)  # ... while the request in flight goes on
        status, answer = read_response(conn)
        conn.close()

        assert status == 201, answer
        assert live.ended.wait(10), "the live stream was not ended"
        assert live.events and live.events[-1].event == "reconnect", live.raw[-300:]
        assert b"retry: " in live.raw.rsplit(b"event: reconnect", 1)[0].rsplit(b"\n\n", 1)[-1]
        assert live.events[-1].json()["reason"] == "server_stopping"
        assert any(e.event != "reconnect" for e in live.events)  # it did follow the run
        socket_client.join(10)
        assert socket_client.close_code == 1012  # "service restart": come back
        assert service.process.wait(60) == 0

    reader = build(settings)
    try:
        head = reader.event_store.max_position()
        positions = reader.store.positions()
        assert {p.name: positions[p.name] for p in read_projectors()} == {p.name: head for p in read_projectors()}
        assert positions[TRACKING_NAME] == head  # every live event was published
        assert reader.store.get("runs", run_doc_key("default", answer["run_id"])) is not None  # projected
    finally:
        reader.close()


def test_sigterm_to_a_projector_worker_commits_its_caught_up_position_and_exits_0(pg_url: str) -> None:
    settings = settings_for(pg_url)
    container = build(settings)
    try:
        drive_runs(container, runs=3, ticks=40)  # a backlog for the worker
        head = container.event_store.max_position()
        env = service_env(settings, SQUADOPS_PROJECTION_PAGE_SIZE="5", SQUADOPS_SHUTDOWN_DRAIN_SECONDS="60")
        with squadops_process(["worker", "projector"], env) as worker:
            eventually(lambda: min(container.runner.positions().values()) > 0, timeout=30)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        assert container.runner.positions() == {p.name: head for p in read_projectors()}
    finally:
        container.close()

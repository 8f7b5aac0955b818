"""Issue 22, findings 7 and 10 on a real server: open live streams are re-authorised, a
WebSocket from another origin is refused, and unfinished request heads are not held."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec
import pytest
import uvicorn
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from api.app import create_app
from api.auth import sign_assertion
from api.server import server_config
from tests import infra
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from tests.live_helpers import LIVE, STUDIO, SseReader, live_settings, served, topic
from workers.bootstrap import build

KEY = "edge-test-key-0123456789abcdef-0123456789"
VIEWER = "viewer@example.com"
SUPER = "/org/platform/roles/super_admin"
WITHIN = 5.0  # the bound, from losing access to the stream's end


def project_with_viewer(http: httpx.Client) -> str:
    body = {**DEMO_LIKE, "participants": [{"subject_key": VIEWER, "project_role": "viewer"}]}
    http.post("/v1/project-factory/projects", json=body).raise_for_status()
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    answer.raise_for_status()
    return str(answer.json()["run_id"])


def remove_viewer(url: str) -> float:
    answer = httpx.delete(f"{url}/v1/project-factory/projects/acme/participants/{VIEWER}", headers=ADMIN, timeout=30)
    assert answer.status_code == 200, answer.text
    return time.monotonic()


async def sse_until_reconnect(url: str, run_id: str, headers: dict[str, str], subscribed: asyncio.Event) -> tuple[float, dict[str, Any]]:
    reader = SseReader()
    async with (
        httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30, read=30)) as client,
        client.stream("GET", LIVE, params={"topic": topic(run_id)}, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_raw():
            for event in reader.feed(chunk):
                if event.event == "reconnect":
                    return time.monotonic(), msgspec.json.decode(event.data)
            if "subscribed" in reader.comments:
                subscribed.set()
    raise AssertionError("the stream ended without a reconnect frame")


def test_a_removed_participant_stops_receiving_over_sse_and_websocket(sqlite_url: str) -> None:
    with served(live_settings(sqlite_url)) as server, httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as http:
        run_id = project_with_viewer(http)
        viewer = {"x-edge-claim-email": VIEWER}
        ws_url = f"ws://127.0.0.1:{server.port}{LIVE}/ws?" + urlencode({"topic": topic(run_id)})

        async def watch() -> tuple[float, dict[str, Any], float, int, dict[str, Any]]:
            subscribed = asyncio.Event()
            sse = asyncio.create_task(sse_until_reconnect(server.url, run_id, viewer, subscribed))
            async with ws_connect(ws_url, additional_headers=viewer) as socket_:
                await asyncio.wait_for(subscribed.wait(), 20)
                removed = await asyncio.to_thread(remove_viewer, server.url)
                ended_sse, frame = await asyncio.wait_for(sse, 20)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        last = await asyncio.wait_for(socket_.recv(), 20)
                ws_ended = time.monotonic()
            assert closed.value.rcvd is not None
            return ended_sse - removed, frame, ws_ended - removed, closed.value.rcvd.code, msgspec.json.decode(last)

        sse_after, frame, ws_after, code, body = asyncio.run(watch())
        assert frame["reason"] == "not_a_participant" and frame["status"] == 403
        assert sse_after < WITHIN and ws_after < WITHIN, (sse_after, ws_after)
        assert code == 4403 and body["code"] == "not_a_participant"
        # Reconnecting is refused: access is gone.
        again = httpx.get(f"{server.url}{LIVE}", params={"topic": topic(run_id)}, headers=viewer, timeout=30)
        assert again.status_code == 403 and again.json()["code"] == "not_a_participant"


def test_a_stream_ends_when_its_assertion_expires(tmp_path: Path) -> None:
    settings = live_settings(f"sqlite:///{tmp_path / 'squadops.db'}", edge_jwt_key=KEY)

    def who(lifetime: float) -> dict[str, str]:
        claims = {"email": "kate@corp.com", "groups": [SUPER], "exp": int(time.time() + lifetime)}
        return {"x-edge-claim-email": "kate@corp.com", "x-edge-claim-groups": SUPER,
                "x-edge-jwt-assertion": sign_assertion(claims, KEY)}

    with served(settings) as server, httpx.Client(base_url=server.url, headers=who(600), timeout=30) as http:
        run_id = project_with_viewer(http)
        ws_url = f"ws://127.0.0.1:{server.port}{LIVE}/ws?" + urlencode({"topic": topic(run_id)})

        async def watch() -> tuple[float, float, int, dict[str, Any], float, dict[str, Any]]:
            headers = who(3)
            expires = float(msgspec.json.decode(__import__("base64").urlsafe_b64decode(
                headers["x-edge-jwt-assertion"].split(".")[1] + "==="))["exp"])
            subscribed = asyncio.Event()
            sse = asyncio.create_task(sse_until_reconnect(server.url, run_id, headers, subscribed))
            async with ws_connect(ws_url, additional_headers=headers) as socket_:
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        last = await asyncio.wait_for(socket_.recv(), 20)
                ws_ended = time.time()
            _, frame = await asyncio.wait_for(sse, 20)
            sse_ended = time.time()
            assert closed.value.rcvd is not None
            return expires, ws_ended, closed.value.rcvd.code, msgspec.json.decode(last), sse_ended, frame

        expires, ws_ended, code, body, sse_ended, frame = asyncio.run(watch())
        assert code == 4401 and body["code"] == "edge_assertion_expired"
        assert frame["reason"] == "edge_assertion_expired" and frame["status"] == 401
        assert expires - 1 <= ws_ended < expires + WITHIN and sse_ended < expires + WITHIN, (expires, ws_ended, sse_ended)


def test_a_websocket_from_another_origin_is_refused(sqlite_url: str) -> None:
    with served(live_settings(sqlite_url)) as server, httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as http:
        run_id = project_with_viewer(http)
        url = f"ws://127.0.0.1:{server.port}{LIVE}/ws?" + urlencode({"topic": topic(run_id)})

        async def attempt(origin: str) -> tuple[int | None, Any]:
            async with ws_connect(url, additional_headers=ADMIN, origin=origin) as socket_:  # type: ignore[arg-type]
                if origin != "http://evil.example":  # events come once the run executes
                    await socket_.ping()
                    (await asyncio.to_thread(http.post, f"{STUDIO}/runs/{run_id}/execute")).raise_for_status()
                first = await asyncio.wait_for(socket_.recv(), 20)
                if origin == "http://evil.example":
                    with pytest.raises(ConnectionClosed) as closed:
                        await asyncio.wait_for(socket_.recv(), 10)
                    assert closed.value.rcvd is not None
                    return closed.value.rcvd.code, msgspec.json.decode(first)
                return None, msgspec.json.decode(first)

        code, body = asyncio.run(attempt("http://evil.example"))
        assert code == 4403 and body["code"] == "origin_not_allowed"
        code, first = asyncio.run(attempt("http://127.0.0.1:8000"))  # the service's own (SQUADOPS_BASE_URL)
        assert code is None and first["run_id"] == run_id


@pytest.fixture
def head_timeout_server(tmp_path: Path) -> Iterator[int]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'squadops.db'}"))
    port = infra.free_port()
    config = server_config(create_app(container, workers=()), host="127.0.0.1", port=port, header_read_timeout=1.0)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(15)
    container.close()


def test_unfinished_request_heads_are_not_held(head_timeout_server: int) -> None:
    port = head_timeout_server
    opened = time.monotonic()
    trickles = []
    for i in range(300):  # a bounded stand-in for the 3,000 of the finding
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if i % 3:  # some send part of a head, some nothing at all
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        trickles.append(s)
    # A whole head arriving meanwhile is answered.
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    for s in trickles:
        assert s.recv(1024) == b""  # closed by the server, not answered
        s.close()
    assert time.monotonic() - opened < 8.0
    # A head larger than the service takes is refused, not buffered.
    big = socket.create_connection(("127.0.0.1", port), timeout=10)
    big.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10))
    answer = big.recv(1024)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 4"), answer[:100]
    big.close()

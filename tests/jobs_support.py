"""Helpers for the jobs and gate tests: a power device on a loopback UDP socket, a local
connector source, and a service built on one database with its data in a temporary folder."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import settings_for
from workers.bootstrap import Container, build

# An identity provider's connector (its facts), two staff records in it, and a machine's MAC.
IDP = {"provider": "vcs", "provider_kind": "idp", "schema": "2"}
ANN = {"subject_key": "Ann@Example.com", "provider_user_id": "101", "provider_username": "ann-gh", "username": "ann"}
BOB = {"email": "bob@example.com", "provider_user_id": "102"}
MAC = "52:54:00:12:34:56"


class LoopbackPowerDevice:
    """A power device listening on 127.0.0.1: keeps every datagram it receives, and answers
    state queries from what it was told (a sleep command: asleep; a magic packet: awake)."""

    def __init__(self, *, answers: bool = True) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.answers = answers
        self.received: list[bytes] = []
        self.states: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def addr(self) -> str:
        host, port = self.sock.getsockname()
        return f"{host}:{port}"

    def commands(self, verb: str) -> list[str]:
        prefix = f"squadops-power/1 {verb} "
        return [d.decode() for d in self.received if d.startswith(prefix.encode())]

    def magic_packets(self) -> list[bytes]:
        return [d for d in self.received if d.startswith(b"\xff" * 6)]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received.append(data)
            if data.startswith(b"\xff" * 6):
                mac = data[6:12].hex(":")
                self.states[mac] = "awake"
                continue
            words = data.decode(errors="replace").split()
            fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            if words[1:2] == ["sleep"]:
                self.states[fields.get("mac", "").lower()] = "asleep"
            elif words[1:2] == ["state"] and self.answers:
                state = self.states.get(fields.get("mac", "").lower(), "awake")
                reply = f"squadops-power/1 state node={fields.get('node')} state={state} nonce={fields.get('nonce')}"
                self.sock.sendto(reply.encode(), peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def write_connector(root: Path, connector_id: str, facts: dict[str, Any], records: list[dict[str, Any]], scope: str = "default") -> Path:
    """A connector in the local directory source, its records appended to ``<scope>.jsonl``."""
    folder = root / connector_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "connector.json").write_text(json.dumps(facts))
    path = folder / f"{scope}.jsonl"
    with path.open("a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return path


@contextmanager
def service(database_url: str, data_dir: Path, **changes: Any) -> Iterator[Container]:
    """A built service whose files live in ``data_dir`` (workers not started)."""
    container = build(settings_for(database_url, **{"data_dir": str(data_dir), "job_poll_seconds": 0.02, **changes}))
    try:
        yield container
    finally:
        container.close()


@contextmanager
def http(container: Container, headers: dict[str, str] | None = None, workers: tuple[str, ...] = ()) -> Iterator[TestClient]:
    with TestClient(create_app(container, workers=workers)) as client:
        if headers:
            client.headers.update(headers)
        yield client

"""The second notification workflow: Novu's HTTP trigger API, used when configured.

A local HTTP server stands where Novu would; it records what the service sends. The
trigger carries the workflow id, the subscriber, the payload and the notification id as
transaction id, under ``Authorization: ApiKey``; a delivered notification is also recorded
in the inbox (``via: novu``), and a Novu that fails records nothing (502, C3 body)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import settings_for
from tests.stub_http import StubServer
from workers.bootstrap import build
from workers.json_http import JsonHandler

DEV = {"x-edge-claim-email": "Dev@Example.com"}


class _Novu(JsonHandler):
    seen: list[tuple[str, dict[str, str], dict]] = []
    status = 201

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.read_json()
        type(self).seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_json(type(self).status, {"data": {"acknowledged": True, "status": "processed"}})


@pytest.fixture
def novu() -> Iterator[type[_Novu]]:
    handler = type("Novu", (_Novu,), {"seen": [], "status": 201})
    with StubServer(handler) as stub:
        handler.url = stub.url  # type: ignore[attr-defined]
        yield handler


def test_novu_receives_the_trigger_and_the_inbox_records_it(tmp_path: Path, novu: type[_Novu]) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path),
                            novu_api_url=novu.url, novu_api_key="novu-api-key",  # type: ignore[attr-defined]
                            novu_workflow_id="squadops-alerts")
    container = build(settings)
    with TestClient(create_app(container, workers=("projector",))) as http:
        sent = http.post("/v1/portal/notifications/test", headers=DEV)
        assert sent.status_code == 202, sent.text
        assert sent.json()["delivered_via"] == "novu"
        [(path, headers, body)] = novu.seen
        assert path == "/v1/events/trigger" and headers["authorization"] == "ApiKey novu-api-key"
        assert body["name"] == "squadops-alerts" and body["to"] == {"subscriberId": "dev@example.com"}
        assert body["transactionId"] == sent.json()["notification_id"] == body["payload"]["notification_id"]
        assert body["payload"]["kind"] == "test" and body["payload"]["tenant_id"] == "default"
        seen = {**DEV, "x-squadops-min-position": sent.headers["x-squadops-position"]}
        [note] = http.get("/v1/portal/notifications", headers=seen).json()["notifications"]
        assert note["notification_id"] == body["transactionId"] and note["via"] == "novu"
        assert http.get("/v1/portal/notifications/novu-config", headers=DEV).json()["provider"] == "novu"

        novu.status = 500  # Novu fails: the caller is told, nothing is recorded
        failed = http.post("/v1/portal/notifications/test", headers=DEV)
        assert failed.status_code == 502 and failed.json()["code"] == "notification_failed"
        assert set(failed.json()) == {"detail", "code"}
        assert http.get("/v1/portal/notifications", headers=seen).json()["count"] == 1
    container.close()

"""Notifications: Novu's subscriber HMAC (test vectors; the secret resolved per request),
the test notification into the inbox, list and mark-read, run events raising notifications
through the outbox relay, and ``projections rebuild`` re-firing none of them."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from domain.portal.events import Notification
from domain.portal.notifications import subscriber_hash
from tests.conftest import ADMIN, settings_for
from tests.feed_scenarios import Scenario, apply_all
from tests.integration.test_control_plane_http import PROJECT, STEPS
from workers.bootstrap import Container, build
from workers.notify_relay import NotificationRelay
from workers.rebuild import rebuild_group

CONFIG = "/v1/portal/notifications/novu-config"
INBOX = "/v1/portal/notifications"
DEV = {"x-edge-claim-email": "Dev@Example.com"}


@pytest.mark.parametrize(("key", "secret", "expected"), [
    # hex HMAC-SHA256(key=secret, msg=subject_key), as Novu computes the subscriber hash
    ("", "", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"),
    ("The quick brown fox jumps over the lazy dog", "key",
     "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"),
    # computed independently: printf dev@example.com | openssl dgst -sha256 -hmac novu-secret
    ("dev@example.com", "novu-secret", "1f8d96f2b0ed5479b14d6820bc04ec337b3ca244dc6be21c7360175d433732d1"),
])
def test_subscriber_hash_vectors(key: str, secret: str, expected: str) -> None:
    assert subscriber_hash(key, secret) == expected


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestClient, Container]]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path)))
    with TestClient(create_app(container, workers=("projector",))) as client:
        yield client, container
    container.close()


def test_novu_config_resolves_the_secret_per_request(world, monkeypatch: pytest.MonkeyPatch) -> None:
    http, _ = world
    monkeypatch.delenv("SQUADOPS_NOVU_SECRET_KEY", raising=False)
    missing = http.get(CONFIG, headers=DEV)
    assert missing.status_code == 200 and (missing.json()["enabled"], missing.json()["subscriber_hash"]) == (False, "")
    monkeypatch.setenv("SQUADOPS_NOVU_SECRET_KEY", "first")
    one = http.get(CONFIG, headers=DEV).json()
    monkeypatch.setenv("SQUADOPS_NOVU_SECRET_KEY", "second")
    two = http.get(CONFIG, headers=DEV).json()
    assert one["subscriber_id"] == two["subscriber_id"] == "dev@example.com"
    assert one["subscriber_hash"] == hmac.new(b"first", b"dev@example.com", hashlib.sha256).hexdigest()
    assert two["subscriber_hash"] == hmac.new(b"second", b"dev@example.com", hashlib.sha256).hexdigest()
    assert one["provider"] == "inbox" and one["enabled"]


def test_test_notification_lands_in_the_inbox_and_is_marked_read(world) -> None:
    http, _ = world
    sent = http.post("/v1/portal/notifications/test", headers=DEV)
    assert sent.status_code == 202, sent.text
    body = sent.json()
    assert body["delivered_via"] == "inbox"
    seen = {**DEV, "x-squadops-min-position": sent.headers["x-squadops-position"]}
    listed = http.get(INBOX, headers=seen).json()
    assert listed["unread_count"] == 1 and listed["notifications"][0]["notification_id"] == body["notification_id"]
    assert listed["notifications"][0]["kind"] == "test"
    assert http.get(INBOX, headers={**ADMIN, "x-squadops-min-position": seen["x-squadops-min-position"]}).json()["count"] == 0
    read = http.post(f"{INBOX}/{body['notification_id']}/read", headers=DEV)
    assert read.status_code == 200, read.text
    after = {**DEV, "x-squadops-min-position": read.headers["x-squadops-position"]}
    assert http.get(INBOX, headers=after).json()["unread_count"] == 0
    assert http.get(INBOX, params={"unread_only": "true"}, headers=after).json()["notifications"] == []
    missing = http.post(f"{INBOX}/ntf-0000000000000000/read", headers=DEV)
    assert missing.status_code == 404 and missing.json()["code"] == "notification_not_found"


def test_run_events_notify_once_and_a_rebuild_fires_nothing(world) -> None:
    http, container = world
    owner = {"x-edge-claim-email": "lead@example.com"}
    project = {**PROJECT, "participants": [*PROJECT["participants"],
                                           {"subject_key": "lead@example.com", "project_role": "maintainer"}]}
    assert http.post("/v1/project-factory/projects", json=project, headers=ADMIN).status_code == 201
    launched = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"},
                         headers=ADMIN)
    run_id = launched.json()["run_id"]
    scenario = Scenario(app=container, run_id=run_id, request=project)
    apply_all(scenario, STEPS)
    assert container.runner.wait_for(container.event_store.max_position(), timeout=20)
    relay = container.notify_relay
    assert relay is not None and relay.relay_once() > 0
    assert container.runner.wait_for(container.event_store.max_position(), timeout=20)
    notes = http.get(INBOX, headers=owner).json()["notifications"]
    kinds = sorted(n["kind"] for n in notes)
    assert "blocker" in kinds and "delivery" in kinds
    # Each links a page a person opens: the run's office, a pull request's review page.
    assert {n["url"] for n in notes if n["kind"] == "blocker"} == {f"/runs/{run_id}"}
    assert all(n["url"].startswith("/projects/acme/pulls/") for n in notes if n["kind"] == "delivery")
    assert http.get(INBOX, headers=DEV).json()["count"] == 0  # a contributor is not notified
    before = container.event_store.max_position()
    assert container.runner.wait_for(before, timeout=20)
    portal_models = ["notify_outbox", "inbox", "relations", "impact", "projects"]
    live = {name: container.store.dump(name) for name in portal_models}
    # `projections rebuild`: the outbox is rewritten; a fresh relay (cursor lost) fires nothing.
    rebuild_group(container.settings, portal_models, 0)
    assert {name: container.store.dump(name) for name in portal_models} == live  # byte for byte
    fresh = NotificationRelay(container.store, relay.inboxes, relay.workflow)
    assert fresh.relay_once() == 0 and relay.relay_once() == 0
    assert container.event_store.max_position() == before
    assert sorted(n["kind"] for n in http.get(INBOX, headers=owner).json()["notifications"]) == kinds

    # Notifications stored before linked the run's feed (JSON) and had the pull request's VCS
    # address for a body: the inbox shows them with the office's link and without it.
    for nid, kind, url, body in (
        ("ntf-0000000000000001", "blocker", f"/control-plane/studio/observability-feed?project_slug=acme&run_id={run_id}", "x: y"),
        ("ntf-0000000000000002", "delivery", "/projects/acme/pulls/7", "https://vcs.squadops.local/acme/api/pull/7"),
    ):
        note = Notification(notification_id=nid, kind=kind, title="Older", body=body, url=url, source_ref="event:1",
                            project_slug="acme")
        relay.workflow.trigger(tenant="default", subscriber="lead@example.com", note=note)
    seen = {**owner, "x-squadops-min-position": str(container.event_store.max_position())}
    older = {n["notification_id"]: n for n in http.get(INBOX, headers=seen).json()["notifications"]}
    assert (older["ntf-0000000000000001"]["url"], older["ntf-0000000000000001"]["body"]) == (f"/runs/{run_id}", "x: y")
    assert (older["ntf-0000000000000002"]["url"], older["ntf-0000000000000002"]["body"]) == ("/projects/acme/pulls/7", "")

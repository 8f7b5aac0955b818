"""Novu's HTTP trigger API as the notification workflow (used when configured).

``POST {url}/v1/events/trigger`` with ``Authorization: ApiKey <key>`` and
``{name, to: {subscriberId}, payload, transactionId}``; the notification id is the
transaction id, so Novu dedupes a retried trigger too. A delivered notification is also
recorded in the subscriber's inbox (``via: novu``), which is what the relay checks."""

from __future__ import annotations

import json
import urllib.request

import msgspec

from domain.portal.events import Notification
from domain.portal.notifications import Inboxes


class NovuWorkflow:
    name = "novu"

    def __init__(self, url: str, api_key: str, workflow_id: str, inboxes: Inboxes, timeout: float = 5.0) -> None:
        self.url, self.api_key, self.workflow_id = url.rstrip("/"), api_key, workflow_id
        self.inboxes, self.timeout = inboxes, timeout

    def trigger(self, *, tenant: str, subscriber: str, note: Notification) -> None:
        body = {
            "name": self.workflow_id,
            "to": {"subscriberId": subscriber},
            "payload": {**msgspec.to_builtins(note), "tenant_id": tenant},
            "transactionId": note.notification_id,
        }
        request = urllib.request.Request(
            f"{self.url}/v1/events/trigger",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"ApiKey {self.api_key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 (configured URL)
            if answer.status >= 300:
                raise RuntimeError(f"Novu answered {answer.status}")
        self.inboxes.record(tenant, subscriber, note, self.name)

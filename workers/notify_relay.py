"""The notification relay: delivers the outbox's notifications through the workflow port.

It walks ``notify_outbox`` by position and, for each project owner and maintainer (from
the relationship read model), triggers the workflow unless that subscriber's inbox already
holds the notification id. Ids derive from the raising event's position, so after a
rebuild (documents rewritten) or a restart (cursor lost) nothing fires twice.
"""

from __future__ import annotations

import threading

import msgspec
import structlog

from domain.portal.events import Notification
from domain.portal.graph import RANK
from domain.portal.notifications import Inboxes, NotificationWorkflow, notification_id
from projections.engine.store import DocStore
from projections.portal.notifications import OUTBOX
from projections.portal.relations import NAME as RELATIONS
from projections.portal.relations import relations_key

log = structlog.get_logger("squadops.notify")
_doc = msgspec.json.Decoder(dict).decode


class NotificationRelay:
    def __init__(
        self, store: DocStore, inboxes: Inboxes, workflow: NotificationWorkflow, *, poll_seconds: float = 1.0
    ) -> None:
        self.store, self.inboxes, self.workflow, self.poll_seconds = store, inboxes, workflow, poll_seconds
        self.after = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def recipients(self, tenant: str, project_slug: str) -> list[str]:
        raw = self.store.get(RELATIONS, relations_key(tenant, project_slug))
        if raw is None:
            return []
        tuples = _doc(raw).get("tuples", [])
        return sorted({s.removeprefix("user:") for _, rel, s in tuples
                       if s.startswith("user:") and RANK.get(rel, -1) >= RANK["maintainer"]})

    def relay_once(self) -> int:
        """Delivers what the outbox holds past the cursor; answers how many were triggered."""
        fired = 0
        try:
            page = self.store.scan(OUTBOX, partition="outbox", after=self.after, limit=500)
        except Exception as exc:  # the read model is not there yet
            log.warning("outbox_unreadable", error=repr(exc))
            return 0
        for row in page:
            item = _doc(row.body)
            for subscriber in self.recipients(item["tenant"], item["project_slug"]):
                nid = notification_id(item["source_ref"], subscriber)
                if self.inboxes.delivered(item["tenant"], subscriber, nid):
                    continue
                note = Notification(notification_id=nid, kind=item["kind"], title=item["title"], body=item["body"],
                                    url=item["url"], source_ref=item["source_ref"], project_slug=item["project_slug"])
                self.workflow.trigger(tenant=item["tenant"], subscriber=subscriber, note=note)
                fired += 1
            self.after = row.sort_key
        return fired

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.poll_seconds):
                try:
                    while self.relay_once():
                        pass
                except Exception as exc:  # a failing workflow is retried on the next poll
                    log.warning("relay_failed", error=repr(exc))

        self._thread = threading.Thread(target=loop, name="notify-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

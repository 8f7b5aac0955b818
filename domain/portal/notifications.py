"""Notifications: the inbox aggregate (a subscriber's notifications as events), the
workflow port, and the built-in workflow that delivers into the inbox.

A notification id is derived from what raised it, and the inbox records an id once: a
relay that runs again over the same outbox (after a rebuild or a replay) re-fires nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from eventsourcing.domain import event

from domain.portal.events import InboxOpened, Notification, NotificationRaised, NotificationRead
from domain.shared.base import Aggregate
from domain.shared.event_store import EventStore
from domain.shared.ids import derived_id


def inbox_key(tenant: str, subject_key: str) -> str:
    return f"inb:{tenant}:{subject_key.lower()}"


def subscriber_hash(subject_key: str, secret: str) -> str:
    """Novu's subscriber hash: hex HMAC-SHA256 of the subscriber id under the secret."""
    return hmac.new(secret.encode(), subject_key.encode(), hashlib.sha256).hexdigest()


def notification_id(source_ref: str, subject_key: str) -> str:
    return derived_id("ntf", source_ref, subject_key.lower())


class Inbox(Aggregate):
    @staticmethod
    def create_id(tenant: str, subject_key: str) -> str:
        return inbox_key(tenant, subject_key)

    @event(InboxOpened)
    def __init__(self, *, tenant: str, subject_key: str) -> None:
        self.tenant, self.subject_key = tenant, subject_key.lower()
        self.seen: set[str] = set()
        self.unread: set[str] = set()

    def has(self, nid: str) -> bool:
        return nid in self.seen

    def raise_(self, note: Notification, at: str, via: str) -> None:
        if note.notification_id not in self.seen:
            self._raised(notification=msgspec.to_builtins(note), at=at, via=via)

    @event(NotificationRaised)
    def _raised(self, notification: dict[str, Any], at: str, via: str) -> None:
        self.seen.add(notification["notification_id"])
        self.unread.add(notification["notification_id"])

    def mark_read(self, nid: str, at: str) -> bool:
        if nid not in self.seen:
            return False
        if nid in self.unread:
            self._read(notification_id=nid, at=at)
        return True

    @event(NotificationRead)
    def _read(self, notification_id: str, at: str) -> None:
        self.unread.discard(notification_id)


class NotificationWorkflow(Protocol):
    """Delivers a notification to a subscriber (Novu's trigger shape: workflow, to, payload)."""

    name: str

    def trigger(self, *, tenant: str, subscriber: str, note: Notification) -> None: ...


class Inboxes:
    """The inbox commands: record (once), mark read."""

    def __init__(self, store: EventStore, clock: Callable[[], str]) -> None:
        self.store, self.clock = store, clock

    def _inbox(self, tenant: str, subject_key: str) -> Inbox:
        return self.store.get_or_none(inbox_key(tenant, subject_key)) or Inbox(tenant=tenant, subject_key=subject_key)

    def record(self, tenant: str, subscriber: str, note: Notification, via: str) -> bool:
        inbox = self._inbox(tenant, subscriber)
        if inbox.has(note.notification_id):
            return False
        inbox.raise_(note, self.clock(), via)
        self.store.save(inbox)
        return True

    def delivered(self, tenant: str, subscriber: str, nid: str) -> bool:
        inbox = self.store.get_or_none(inbox_key(tenant, subscriber))
        return inbox is not None and inbox.has(nid)

    def mark_read(self, tenant: str, subscriber: str, nid: str) -> bool:
        inbox = self.store.get_or_none(inbox_key(tenant, subscriber))
        if inbox is None or not inbox.mark_read(nid, self.clock()):
            return False
        self.store.save(inbox)
        return True


class InboxWorkflow:
    """The built-in workflow: the in-portal inbox, stored as events."""

    name = "inbox"

    def __init__(self, inboxes: Inboxes) -> None:
        self.inboxes = inboxes

    def trigger(self, *, tenant: str, subscriber: str, note: Notification) -> None:
        self.inboxes.record(tenant, subscriber, note, self.name)

"""Portal facts as typed values: a notification as raised, delivered and read, and the
portal's stored events (Inbox, CopilotThread), one Struct per kind tagged by it."""

from __future__ import annotations

from typing import Any

import msgspec


class Notification(msgspec.Struct, frozen=True, kw_only=True):
    """One notification for one subscriber (``subject_key``)."""

    notification_id: str
    kind: str  # blocker | delivery | review | test
    title: str
    body: str = ""
    url: str = ""
    source_ref: str = ""  # what raised it: "event:<position>" or "test:<request>"
    project_slug: str = ""


# -- stored events of the portal area (one Struct per kind, tagged by it) ---------------------


class PortalEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="event"):
    """A fact of the portal area, as stored (the store keeps id, version and time apart)."""


class InboxOpened(PortalEvent, tag="Inbox.Opened"):
    tenant: str
    subject_key: str


class NotificationRaised(PortalEvent, tag="Inbox.NotificationRaised"):
    notification: dict[str, Any]
    at: str
    via: str


class NotificationRead(PortalEvent, tag="Inbox.NotificationRead"):
    notification_id: str
    at: str


class CopilotStarted(PortalEvent, tag="CopilotThread.Started"):
    tenant: str
    thread_id: str
    subject_key: str
    at: str


class CopilotTurn(PortalEvent, tag="CopilotThread.Turn"):
    action_id: str
    question: dict[str, Any]
    message: str
    tool_calls: list[dict[str, Any]]
    ui_artifacts: list[dict[str, Any]]
    answered_by: str
    at: str


EVENTS: tuple[type[PortalEvent], ...] = (InboxOpened, NotificationRaised, NotificationRead, CopilotStarted, CopilotTurn)
BY_KIND: dict[str, type[PortalEvent]] = {str(e.__struct_config__.tag): e for e in EVENTS}

"""Portal facts as typed values: a notification as raised, delivered and read, and the
portal's stored events (Inbox, CopilotThread), one Struct per kind tagged by it."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.shared.base import Aggregate


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


class InboxOpened(Aggregate.Created):
    TOPIC = "domain.portal.notifications:Inbox.Opened"
    tenant: str
    subject_key: str


class NotificationRaised(Aggregate.Event):
    TOPIC = "domain.portal.notifications:Inbox.NotificationRaised"
    notification: dict[str, Any]
    at: str
    via: str


class NotificationRead(Aggregate.Event):
    TOPIC = "domain.portal.notifications:Inbox.NotificationRead"
    notification_id: str
    at: str


class CopilotStarted(Aggregate.Created):
    TOPIC = "domain.portal.copilot:CopilotThread.Started"
    tenant: str
    thread_id: str
    subject_key: str
    at: str


class CopilotTurn(Aggregate.Event):
    TOPIC = "domain.portal.copilot:CopilotThread.Turn"
    action_id: str
    question: dict[str, Any]
    message: str
    tool_calls: list[dict[str, Any]]
    ui_artifacts: list[dict[str, Any]]
    answered_by: str
    at: str


EVENTS: tuple[type[Aggregate.Event], ...] = (InboxOpened, NotificationRaised, NotificationRead, CopilotStarted, CopilotTurn)
BY_KIND: dict[str, type[Aggregate.Event]] = {str(e.TOPIC).rpartition(":")[2]: e for e in EVENTS}  # type: ignore[attr-defined]

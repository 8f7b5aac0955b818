"""Portal notifications under ``/v1/portal/notifications``.

- ``GET /novu-config``: the notification-plane client config; ``subscriber_hash`` is Novu's
  HMAC (hex HMAC-SHA256 of the subject key under the secret), the secret resolved on every
  request (``notification_secret`` in state is a resolver, never a cached value); without
  a secret, ``enabled`` is false and the hash empty.
- ``POST /test``: sends the caller a test notification through the workflow port.
- ``GET /`` lists the caller's inbox (newest first, ``unread_only``); ``POST /{id}/read``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import get
from litestar.datastructures import State
from litestar.params import PathParameter, QueryParameter

from api.context import CallerDep, part
from api.errors import ApiError
from api.read_your_writes import command
from domain.portal.events import Notification
from domain.portal.notifications import notification_id as derive_notification_id
from domain.portal.notifications import subscriber_hash
from domain.shared.ids import ID_PATTERN, new_id
from projections.portal.notifications import INBOX, inbox_partition

NotificationId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="notification id")]
UnreadOnly = Annotated[bool, QueryParameter(required=False)]
Limit = Annotated[int, QueryParameter(ge=1, le=200, required=False)]


class NovuConfigOut(msgspec.Struct, kw_only=True):
    enabled: bool
    provider: str
    subscriber_id: str
    subscriber_hash: str
    application_identifier: str = ""
    backend_url: str = ""
    socket_url: str = ""


class NotificationOut(msgspec.Struct, kw_only=True):
    notification_id: str
    kind: str
    title: str
    body: str = ""
    url: str = ""
    source_ref: str = ""
    project_slug: str = ""
    via: str = ""
    created_at: str = ""
    read_at: str = ""


class NotificationList(msgspec.Struct, kw_only=True):
    notifications: list[NotificationOut]
    count: int
    unread_count: int


class TestSent(msgspec.Struct, kw_only=True):
    notification_id: str
    delivered_via: str


_note = msgspec.json.Decoder(NotificationOut)


@get("/notifications/novu-config", sync_to_thread=True, summary="Notification client config with the subscriber hash")
def novu_config(state: State, caller: CallerDep) -> NovuConfigOut:
    config = part(state, "notification_config")
    secret = part(state, "notification_secret")()  # resolved now, every time
    subscriber = caller.subject_key
    if not secret:  # no secret configured: the client stays off (no hash without one)
        return NovuConfigOut(enabled=False, provider=config["provider"], subscriber_id=subscriber, subscriber_hash="")
    return NovuConfigOut(
        enabled=True, provider=config["provider"], subscriber_id=subscriber,
        subscriber_hash=subscriber_hash(subscriber, secret),
        application_identifier=config["application_identifier"], backend_url=config["backend_url"],
        socket_url=config["socket_url"],
    )


@command("/notifications/test", status_code=202, summary="Send the caller a test notification")
def send_test(state: State, caller: CallerDep) -> TestSent:
    workflow = part(state, "notification_workflow")
    source = f"test:{new_id('req')}"
    note = Notification(notification_id=derive_notification_id(source, caller.subject_key), kind="test",
                        title="Test notification", body=f"Sent to {caller.subject_key}.", source_ref=source)
    try:
        workflow.trigger(tenant=caller.tenant, subscriber=caller.subject_key, note=note)
    except OSError as exc:
        raise ApiError(502, f"The notification workflow failed: {exc}", "notification_failed") from None
    return TestSent(notification_id=note.notification_id, delivered_via=workflow.name)


@get("/notifications", sync_to_thread=True, summary="The caller's inbox")
def inbox(state: State, caller: CallerDep, unread_only: UnreadOnly = False, limit: Limit = 50) -> NotificationList:
    store = part(state, "store")
    rows = store.scan(INBOX, partition=inbox_partition(caller.tenant, caller.subject_key), limit=1000, descending=True)
    notes = [_note.decode(r.body) for r in rows]
    unread = [n for n in notes if not n.read_at]
    shown = (unread if unread_only else notes)[:limit]
    return NotificationList(notifications=shown, count=len(shown), unread_count=len(unread))


@command("/notifications/{notification_id:str}/read", status_code=200, summary="Mark read")
def mark_read(notification_id: NotificationId, state: State, caller: CallerDep) -> dict:
    if not part(state, "inboxes").mark_read(caller.tenant, caller.subject_key, notification_id):
        raise ApiError(404, f"No notification {notification_id!r} in your inbox.", "notification_not_found")
    return {"notification_id": notification_id, "read": True}

"""Portal facts as typed values: a notification as raised, delivered and read."""

from __future__ import annotations

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

"""A record a job keeps current: created with its values, then replaced by a later job only
where the values differ (a repeat records nothing).

``ProviderBinding`` (the settings a wizard try applied) and ``SyncCheckpoint`` (how far an
access sync read) are such records: the same lifecycle, each with its own events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.shared.base import Aggregate


class JobWritten(Aggregate):
    """The lifecycle both records share; ``updated_at`` is when a job last wrote one."""

    def differs(self, **values: Any) -> bool:
        """Whether any of ``values`` differs from what the record holds."""
        return any(getattr(self, name) != value for name, value in values.items())

    def _replace(self, record: Callable[..., None], *, job_id: str, at: str, **values: Any) -> bool:
        """Records ``values`` through the event method ``record`` when they differ; answers
        whether it recorded (False, nothing recorded, when unchanged)."""
        if not self.differs(**values):
            return False
        record(job_id=job_id, at=at, **values)
        return True

    def _take(self, at: str, **values: Any) -> None:
        """What the recording methods assign: the values, and when they were written."""
        for name, value in values.items():
            setattr(self, name, value)
        self.updated_at = at

"""What a job's step answers, and what a step may use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.jobs.ports import Connectors, PowerDevice


@dataclass
class Done:
    """The job succeeded with ``result``; ``changed`` aggregates are saved with its end."""

    result: dict[str, Any]
    changed: list[Any] = field(default_factory=list)


@dataclass
class Wait:
    """A step took an effect outside the service; the next step (``phase``) is due at ``due_at``."""

    phase: str
    detail: dict[str, Any]
    due_at: str


class JobFailure(Exception):
    """The attempt failed; a ``retryable`` failure is tried again while attempts are left."""

    def __init__(self, message: str, *, retryable: bool, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.result = result


@dataclass(frozen=True)
class JobContext:
    """What a step may use: aggregates by id (None when absent), the time, the ports."""

    load: Callable[[str], Any]
    now: str
    connectors: Connectors
    power: PowerDevice


Step = Callable[[Any, JobContext], "Done | Wait"]

"""The PullNumbers aggregate: a project's pull request numbers, 1, 2, 3… in the order its
agents open them, as a forge numbers a repository's pull requests.

The plane's own number (``PullRequestOpened.pr_number``) is the host's reference and may
repeat across runs; this one is the project's, and every page, endpoint and notification
names a pull request by it. A number is allocated in the same save as the session's
``PullRequestOpened`` that carries it (``project_number``): two runs opening pull requests
at once both load the same version, one save wins, the other conflicts, loads the winner's
number and takes the next (optimistic concurrency; no number is ever given twice).

Pull requests opened before numbering existed carry no project number; the pulls read model
numbers them on replay (``projections.projects.pulls``), and a project's numbering starts
after the highest number its pages already hold (``after``, from ``NumbersTaken``), so the
two never meet.
"""

from __future__ import annotations

from typing import Protocol

from eventsourcing.domain import event

from domain.projects.events import PullNumberAllocated, PullNumbersStarted
from domain.shared.base import Aggregate


def pull_numbers_key(tenant: str, project_slug: str) -> str:
    return f"pulls:{tenant}:{project_slug}"


class NumbersTaken(Protocol):
    """The highest pull request number a project's pages hold already (0: none)."""

    def highest(self, tenant: str, project_slug: str) -> int: ...


class PullNumbers(Aggregate):
    """One project's pull request numbering (one small aggregate per project, so numbering
    contends with nothing else the project records)."""

    @staticmethod
    def create_id(tenant: str, project_slug: str) -> str:
        return pull_numbers_key(tenant, project_slug)

    @event(PullNumbersStarted)
    def __init__(self, *, tenant: str, project_slug: str, after: int) -> None:
        self.tenant = tenant
        self.project_slug = project_slug
        self.last = max(0, after)

    def allocate(self, *, run_id: str, agent_id: str, session_id: str, at: str) -> int:
        """The next number, recorded for the pull request ``agent_id`` of ``run_id`` opens."""
        self._allocated(number=self.last + 1, run_id=run_id, agent_id=agent_id, session_id=session_id, at=at)
        return self.last

    @event(PullNumberAllocated)
    def _allocated(self, number: int, run_id: str, agent_id: str, session_id: str, at: str) -> None:
        self.last = number

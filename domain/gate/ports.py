"""Ports of the gate: the vcs that receives the publication, and where proposals' runs are found.

The built-in vcs adapter (``workers/adapters/local_git.py``) works on local bare git
repositories with the ``git`` command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from domain.projects.sources import Pushed
from domain.shared.ports import BranchChanges


class Commit(msgspec.Struct, kw_only=True, frozen=True):
    branch_name: str
    base_sha: str
    head_sha: str


class PullRequest(msgspec.Struct, kw_only=True, frozen=True):
    number: int
    url: str
    owner: str
    name: str
    head_sha: str
    merge_sha: str  # the test merge of head into base ("" when they do not merge)
    ref: str  # the ref holding the test merge


class Comment(msgspec.Struct, kw_only=True, frozen=True):
    id: int
    url: str


class VcsError(Exception):
    """The vcs refused or failed a step."""


class Vcs(Protocol):
    """Source hosting as the gate uses it; every write is authored by ``author``."""

    kind: str

    def for_tenant(self, tenant: str) -> Vcs:
        """The tenant's own repositories: ``repo`` names a repository of that tenant only."""
        ...

    def repo_url(self, repo: str) -> str: ...

    def commit_branch(
        self, repo: str, *, base_branch: str, branch_name: str, files: Mapping[str, bytes],
        message: str, author: str, source: BranchChanges | None = None,
    ) -> Commit:
        """Creates ``branch_name`` from ``base_branch`` with one commit writing ``files`` and,
        given a ``source`` (an agent's branch), the changes that branch made to its base."""
        ...

    def read_file(self, repo: str, sha: str, path: str) -> bytes | None:
        """The file at ``path`` in commit ``sha`` (None when absent)."""
        ...

    def open_pull_request(
        self, repo: str, *, branch_name: str, base_branch: str, title: str, body: str,
        labels: list[str], author: str,
    ) -> PullRequest: ...

    def comment(self, repo: str, number: int, *, body: str, author: str) -> Comment: ...

    def push_upstream(self, repo: str, branch: str) -> Pushed | None:
        """Sends ``branch`` back to the origin ``repo`` mirrors (None: it mirrors none)."""
        ...

    def check_run(
        self, repo: str, number: int, *, head_sha: str, name: str, conclusion: str, summary: str, author: str
    ) -> int:
        """Records a completed check run on the pull request's head; answers its id."""
        ...


class ProposalRuns(Protocol):
    """Which studio run holds a proposal (the latest launched)."""

    def latest_run(self, tenant: str, proposal_id: str) -> str | None: ...

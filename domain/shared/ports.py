"""Ports to external systems and the step vocabulary of the execution plane.

An execution plane looks at a run and its sessions at a tick and answers the steps its
agents took; the application turns each step into events through the aggregates' guards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import msgspec


class Step(msgspec.Struct, tag_field="step", kw_only=True, frozen=True):
    agent_id: str = ""


class StartProcess(Step, tag="start_process"):
    llm_session_id: str
    workspace_name: str
    model_ran: str = ""
    # How the plane confines the process (kind, writable_paths, reachable_addresses); empty: not said.
    confinement: dict[str, Any] | None = None


class RestartProcess(Step, tag="restart_process"):
    """Restart only this agent's process, in its assigned workspace (or a fresh one).

    ``probe_workspace`` asks for a live probe of the assigned workspace first, so the
    restarted process is probed where it runs before any fresh workspace is considered.
    """

    reason: str
    fresh_workspace: bool = False
    probe_workspace: bool = False


class StartFailed(Step, tag="start_failed"):
    """The plane's start call for the agent's process failed in ``workspace_name``."""

    workspace_name: str
    error: str
    message: str = ""


class RecreateWorkspace(Step, tag="recreate_workspace"):
    """Recreate the agent's workspace once through the shared registry; restart there."""

    reason: str


class SelfHeal(Step, tag="self_heal"):
    """Clear the agent's stale workspace identity and requeue a fresh launch."""

    signal: str


class ControllerAction(Step, tag="controller_action"):
    action: str
    summary: str = ""


class CallTool(Step, tag="call_tool"):
    tool_name: str
    route: str = ""
    summary: str = ""
    result: str = ""  # what the call answered, whole (the session keeps its first bytes)


class FailToolCall(Step, tag="fail_tool_call"):
    """A tool call that was denied or failed: counted apart, never the first tool."""

    tool_name: str
    reason: str
    route: str = ""
    summary: str = ""
    result: str = ""


class ReportModel(Step, tag="report_model"):
    """The agent CLI named the model that ran (it may differ from the assigned alias)."""

    model: str


class SwitchProvider(Step, tag="switch_provider"):
    """The session's provider has no CLI here: switch it to ``provider`` (a visible assignment)."""

    provider: str
    reason: str


class Say(Step, tag="say"):
    text: str


class Block(Step, tag="block"):
    code: str
    message: str
    evidence: dict[str, Any] = {}


class Handoff(Step, tag="handoff"):
    target_agent_id: str
    spec_agent_id: str
    kind: str
    reason: str
    suit: dict[str, str] = {}


class OpenPullRequest(Step, tag="open_pull_request"):
    repository_key: str
    pr_owner: str
    pr_repo: str
    pr_number: int
    head_sha: str = ""  # the commit the pull request proposes (none: no pull request)
    changed_paths: tuple[str, ...] = ()
    title: str = ""


class Comment(Step, tag="comment"):
    """The agent leaves a message in another agent's mailbox."""

    target_agent_id: str
    message: str


class RunnerOutput(Step, tag="runner_output"):
    """An excerpt of what the agent's process wrote (``stdout``/``stderr``) or how it ended."""

    stream: str
    level: str
    text: str


class Finish(Step, tag="finish"):
    result: dict[str, Any]


class CompleteRun(Step, tag="complete_run"):
    summary: dict[str, Any] = {}


AnyStep = (
    StartProcess | RestartProcess | ControllerAction | CallTool | Say | Block | Handoff | OpenPullRequest
    | Finish | CompleteRun | StartFailed | RecreateWorkspace | SelfHeal | Comment | RunnerOutput
    | FailToolCall | ReportModel | SwitchProvider
)


class BranchChanges(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent's branch holds against its lane's default branch, and where it lives."""

    branch: str
    base_sha: str
    head_sha: str
    paths: tuple[str, ...] = ()
    uncommitted: tuple[str, ...] = ()
    repository: str = ""  # a path or URL git can fetch the branch from


class WorkBranches(Protocol):
    """The agents' branches of a plane (its worktrees' repositories)."""

    def changes(self, run: Any, agent_id: str) -> BranchChanges | None:
        """The agent's branch against its base (None: the agent has no branch here)."""
        ...


class ExecutionPlane(Protocol):
    """Drives agent sessions; the built-in one is a deterministic simulator."""

    name: str

    def plan_tick(self, run: Any, sessions: Sequence[Any], tick: int) -> list[Step]:
        """The steps the run's agents take at ``tick`` (run and sessions are read only)."""
        ...


class CredentialProbe(Protocol):
    """Resolves the studio credential profile and asks the sandbox key status endpoint."""

    def check_credentials(self, run: Any, session: Any) -> Any:
        """A ``domain.studio.policies.credentials.CredentialCheck`` for the session's launch."""
        ...


class ProjectAssets(Protocol):
    """The project-assets lookup of the operator projection (one bounded controller call)."""

    def fetch(self, tenant: str, project_slug: str) -> dict[str, Any]:
        """The project's assets JSON; raises ``ProjectAssetsError`` when it cannot answer."""
        ...


class ProjectAssetsError(Exception):
    """A failed project-assets lookup; ``kind`` is transport, credential, proxy, not_found or error."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class LogEntry(Protocol):
    """One entry of the event log as a log follower reads it: where, whose, which version."""

    @property
    def position(self) -> int: ...

    @property
    def originator_id(self) -> str: ...

    @property
    def version(self) -> int: ...


class LogFollower(Protocol):
    """Follows the event log from its own position (``projections.engine.follower``).

    Pages are contiguous: a position not visible yet is waited for under the follower's
    gap policy (an empty page meanwhile), never skipped while an append may still fill it.
    """

    position: int

    def seek(self, position: int) -> None:
        """Follows on from ``position``."""
        ...

    def head(self) -> int:
        """The highest position in the log now."""
        ...

    def next_page(self, *, stop: int | None = None) -> Sequence[LogEntry]:
        """The next contiguous page (up to ``stop``), moving the position past it."""
        ...

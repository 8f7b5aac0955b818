"""The studio area's events: what Run, AgentSession and WorkspaceLease store.

Each event is declared once, here: its aggregate applies it by class (``@event(RunLaunched)``)
and the read models read the same class back. ``TOPIC`` is the name the log stores it under;
stored events live forever, so a field is only ever added with a default (what a replay of
an older event sees).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.shared.base import Aggregate

# -- Run (``run:<tenant>:<run_id>``) -----------------------------------------------------------


class RunLaunched(Aggregate.Created):
    TOPIC = "domain.run:Run.Launched"
    tenant: str
    run_id: str
    project_slug: str
    template_id: str
    agent_process_kind: str
    work_scope: str
    next_goal: str
    roster: list[dict[str, Any]]
    source_ref: dict[str, Any]
    proposal: dict[str, Any]
    seed: int
    launched_by: str
    source_run_id: str = ""
    project_facts: dict[str, Any] | None = None


class RunSessionOpened(Aggregate.Event):
    TOPIC = "domain.run:Run.SessionOpened"
    agent_id: str
    session_id: str
    role_key: str
    via: str


class ExecutionRequested(Aggregate.Event):
    TOPIC = "domain.run:Run.ExecutionRequested"
    requested_at: str
    requested_by: str
    follow_up: bool


class ExecutionStarted(Aggregate.Event):
    TOPIC = "domain.run:Run.ExecutionStarted"
    started_at: str


class TickRecorded(Aggregate.Event):
    TOPIC = "domain.run:Run.TickRecorded"
    tick: int
    at: str
    report: dict[str, Any]


class HandoffRecorded(Aggregate.Event):
    TOPIC = "domain.run:Run.HandoffRecorded"
    handoff_id: str
    from_agent_id: str
    to_agent_id: str
    to_session_id: str
    kind: str
    reason: str
    thread_id: str = ""
    actor: str = ""


class PreviewShared(Aggregate.Event):
    TOPIC = "domain.run:Run.PreviewShared"
    preview: dict[str, Any]
    updated_at: str


class ControlRecorded(Aggregate.Event):
    TOPIC = "domain.run:Run.ControlRecorded"
    control_id: str
    verb: str
    actor: str
    reason: str
    causation_id: str
    params: dict[str, Any]


class ProcessAssigned(Aggregate.Event):
    """A run-level process assignment: sessions opened later for its target take it."""

    TOPIC = "domain.run:Run.ProcessAssigned"
    target: str
    provider: str
    model: str
    effort: str
    speed: str
    actor: str
    control_id: str
    source: str
    at: str


class RunCompleted(Aggregate.Event):
    TOPIC = "domain.run:Run.Completed"
    at: str
    summary: dict[str, Any]


class RunCleanedUp(Aggregate.Event):
    TOPIC = "domain.run:Run.CleanedUp"
    at: str
    actor: str
    reason: str
    control_id: str = ""



# -- AgentSession (``ses:<tenant>:<run_id>:<session_id>:<agent_id>``) ---------------------------

# A session's statuses (``live_status``; its state machine: ``domain.studio.session``).
READY = "ready"
WAITING_FIRST_TOOL = "waiting_first_tool"
WORKING = "working"
BLOCKED = "blocked"
PAUSED = "paused"
COMPLETED = "session_completed"
STOPPED = "stopped"
TERMINAL = frozenset({COMPLETED, STOPPED})
LIVE_STATUSES = (READY, WAITING_FIRST_TOOL, WORKING, BLOCKED, PAUSED, COMPLETED, STOPPED)


class SessionOpened(Aggregate.Created):
    TOPIC = "domain.session:AgentSession.Opened"
    tenant: str
    run_id: str
    session_id: str
    agent_id: str
    role_key: str
    alias: str
    title: str
    agent_nickname: str
    template_id: str
    agent_process_kind: str
    agent_tier: str
    agent_pack: str
    execution_profile: str
    workload_groups: list[str]
    subject_key: str
    user_principal_name: str
    process: dict[str, str]
    mission_brief: str
    next_goal: str
    scenario_phase: str
    handoff_target: str
    joined_via: dict[str, str]
    suit: dict[str, Any]
    spec_skill_ids: list[str]
    spec_mcp_server_ids: list[str]
    pr_required: bool


class ProcessStarted(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ProcessStarted"
    llm_session_id: str
    skill_ids: list[str]
    mcp_server_ids: list[str]
    workspace_name: str
    attempt: int
    at: str
    tick: int = 0
    model_ran: str = ""
    # How the process is confined (kind, writable_paths, reachable_addresses); None before issue 25.
    confinement: dict[str, Any] | None = None


class ControllerActionObserved(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ControllerActionObserved"
    action: str
    summary: str
    evidence_label: str
    at: str


class ToolCalled(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ToolCalled"
    tool_name: str
    route: str
    summary: str
    first: bool
    at: str
    tick: int = 0
    # what the call answered, bounded (domain.studio.tool_results); empty in logs written before
    result: str = ""
    result_size: int = 0
    result_truncated: bool = False


class ToolCallFailed(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ToolCallFailed"
    tool_name: str
    route: str
    summary: str
    reason: str
    at: str
    tick: int = 0
    result: str = ""
    result_size: int = 0
    result_truncated: bool = False


class ModelReported(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ModelReported"
    model: str
    at: str


class AssistantMessage(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.AssistantMessage"
    text: str
    at: str


class RunnerOutput(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.RunnerOutput"
    stream: str
    level: str
    text: str
    at: str


class Blocked(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Blocked"
    code: str
    message: str
    evidence: dict[str, Any]
    at: str
    tick: int = 0


class Unblocked(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Unblocked"
    code: str
    resolution: str
    actor: str
    resume_status: str
    at: str
    tick: int = 0


class HandedOff(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.HandedOff"
    target_agent_id: str
    target_session_id: str
    reason: str
    thread_id: str
    at: str


class PullRequestOpened(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.PullRequestOpened"
    pr_url: str
    pr_owner: str
    pr_repo: str
    pr_number: int
    repository_key: str
    at: str
    head_sha: str = ""  # events stored before pull requests named their head commit have none
    changed_paths: Sequence[str] = ()
    # The project's number for it (``domain.projects.pull_numbers``); 0 on events stored
    # before projects numbered their pull requests (the pulls read model numbers those).
    project_number: int = 0
    title: str = ""

    @property
    def page_number(self) -> int:
        """The number its page goes by: the project's, else (older events) the plane's."""
        return self.project_number or self.pr_number

    @property
    def reference(self) -> str:
        """How a line names it: its project number (older events: the plane's URL)."""
        return f"#{self.project_number} ({self.repository_key})" if self.project_number else self.pr_url


class ControlApplied(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ControlApplied"
    control_id: str
    verb: str
    actor: str
    reason: str
    causation_id: str
    params: dict[str, Any]
    at: str


class Paused(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Paused"
    actor: str
    control_id: str
    previous_status: str
    at: str
    live_status: str = PAUSED
    current_step: str = "paused"


class RequestQueued(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.RequestQueued"
    message: str
    wake_target: str
    actor: str
    control_id: str
    at: str


class Resumed(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Resumed"
    actor: str
    control_id: str
    wake_target: str
    live_status: str
    current_step: str
    at: str


class MessageDelivered(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.MessageDelivered"
    channel: str
    message: str
    thread_id: str
    actor: str
    control_id: str
    at: str


class ProcessRestarted(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ProcessRestarted"
    reason: str
    actor: str
    control_id: str
    workspace_name: str
    fresh_workspace: bool
    previous_llm_session_id: str
    cleared_blocker: str
    at: str
    tick: int
    live_status: str = READY
    current_step: str = "process_restarting"
    llm_session_id: str = ""


class StartFailed(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.StartFailed"
    workspace_name: str
    provider_workspace_id: str
    error: str
    at: str


class SelfHealed(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.SelfHealed"
    signal: str
    self_heal_status: str
    cleared: dict[str, str]
    at: str


class WorkspaceRestarted(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.WorkspaceRestarted"
    reason: str
    actor: str
    control_id: str
    workspace_name: str
    recreated: bool
    cleared_blocker: str
    at: str


class ProcessSwitched(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.ProcessSwitched"
    previous: dict[str, str]
    process: dict[str, str]
    takeover_handoff_id: str
    worktree: str
    actor: str
    control_id: str
    reason: str
    at: str
    agent_process_assignment: dict[str, str] | None = None
    agent_process_switch_status: str = ""
    agent_process_switch_source: str = ""
    agent_process_switch_target: str = ""


class TaskCardChanged(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.TaskCardChanged"
    action: str
    task_card_id: str
    title: str
    parent_task_card_id: str
    actor: str
    control_id: str
    at: str


class SessionCompleted(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Completed"
    result: dict[str, Any]
    at: str


class Stopped(Aggregate.Event):
    TOPIC = "domain.session:AgentSession.Stopped"
    actor: str
    reason: str
    control_id: str
    at: str



# -- WorkspaceLease (``lease:<tenant>:<project_slug>:<workspace_name>``) ------------------------


class LeaseProvisioned(Aggregate.Created):
    TOPIC = "domain.lease:WorkspaceLease.Provisioned"
    tenant: str
    project_slug: str
    workspace_name: str
    provider: str
    namespace: str
    target_branch: str
    workspace_scope: str
    max_active_slots: int
    resume_estimate_seconds: int
    provider_workspace_id: str
    at: str


class SlotAcquired(Aggregate.Event):
    TOPIC = "domain.lease:WorkspaceLease.SlotAcquired"
    run_id: str
    session_id: str
    agent_id: str
    handoff_target: str
    recovery_reason: str
    reused: bool
    at: str
    warm_until_at: str


class SlotReleased(Aggregate.Event):
    TOPIC = "domain.lease:WorkspaceLease.SlotReleased"
    session_id: str
    reason: str
    at: str
    suspend_after_at: str


class LeaseStatusChanged(Aggregate.Event):
    TOPIC = "domain.lease:WorkspaceLease.StatusChanged"
    status: str
    reason: str
    at: str


class LeaseRecreated(Aggregate.Event):
    TOPIC = "domain.lease:WorkspaceLease.Recreated"
    reason: str
    previous_provider_workspace_id: str
    provider_workspace_id: str
    stale_sessions: list[str]
    at: str


class LeaseVerified(Aggregate.Event):
    TOPIC = "domain.lease:WorkspaceLease.Verified"
    live_status: str
    at: str



# Every event this module declares.
EVENTS: tuple[type[Aggregate.Event], ...] = tuple(
    e for e in list(globals().values())
    if isinstance(e, type) and issubclass(e, Aggregate.Event) and e.__module__ == __name__
)


def kind_of(event_type: type[Aggregate.Event]) -> str:
    """``Blocked`` -> ``"AgentSession.Blocked"`` (its tag: aggregate and event name)."""
    return str(event_type.TOPIC).rpartition(":")[2]  # type: ignore[attr-defined]


BY_KIND: dict[str, type[Aggregate.Event]] = {kind_of(e): e for e in EVENTS}

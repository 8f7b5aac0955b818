"""The studio area's event contracts: what Run, AgentSession and WorkspaceLease store.

One Struct per stored kind, tagged by that kind, with exactly the fields its aggregate's
``@event`` method records (``tests/unit/test_studio_event_contracts.py`` holds the two
together). The projection engine decodes a stored event once into its Struct; read
models dispatch on the type. Stored events live forever: a field is only ever added with
a default, and that default is the one the aggregate's method declares (what a replay of
an older event sees).
"""

from __future__ import annotations

from typing import Any

import msgspec


class StudioEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="event"):
    """A fact of the studio area, as stored (the store keeps id, version and time apart)."""


# -- Run (``run:<tenant>:<run_id>``) -----------------------------------------------------------


class RunLaunched(StudioEvent, tag="Run.Launched"):
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


class RunSessionOpened(StudioEvent, tag="Run.SessionOpened"):
    agent_id: str
    session_id: str
    role_key: str
    via: str


class ExecutionRequested(StudioEvent, tag="Run.ExecutionRequested"):
    requested_at: str
    requested_by: str
    follow_up: bool


class ExecutionStarted(StudioEvent, tag="Run.ExecutionStarted"):
    started_at: str


class TickRecorded(StudioEvent, tag="Run.TickRecorded"):
    tick: int
    at: str
    report: dict[str, Any]


class HandoffRecorded(StudioEvent, tag="Run.HandoffRecorded"):
    handoff_id: str
    from_agent_id: str
    to_agent_id: str
    to_session_id: str
    kind: str
    reason: str
    thread_id: str = ""
    actor: str = ""


class PreviewShared(StudioEvent, tag="Run.PreviewShared"):
    preview: dict[str, Any]
    updated_at: str


class ControlRecorded(StudioEvent, tag="Run.ControlRecorded"):
    control_id: str
    verb: str
    actor: str
    reason: str
    causation_id: str
    params: dict[str, Any]


class ProcessAssigned(StudioEvent, tag="Run.ProcessAssigned"):
    """A run-level process assignment: sessions opened later for its target take it."""

    target: str
    provider: str
    model: str
    effort: str
    speed: str
    actor: str
    control_id: str
    source: str
    at: str


class RunCompleted(StudioEvent, tag="Run.Completed"):
    at: str
    summary: dict[str, Any]


class RunCleanedUp(StudioEvent, tag="Run.CleanedUp"):
    at: str
    actor: str
    reason: str
    control_id: str = ""


RUN_EVENTS: tuple[type[StudioEvent], ...] = (
    RunLaunched, RunSessionOpened, ExecutionRequested, ExecutionStarted, TickRecorded, HandoffRecorded,
    PreviewShared, ControlRecorded, RunCompleted, RunCleanedUp, ProcessAssigned,
)

# -- AgentSession (``ses:<tenant>:<run_id>:<session_id>:<agent_id>``) ---------------------------


class SessionOpened(StudioEvent, tag="AgentSession.Opened"):
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


class ProcessStarted(StudioEvent, tag="AgentSession.ProcessStarted"):
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


class ControllerActionObserved(StudioEvent, tag="AgentSession.ControllerActionObserved"):
    action: str
    summary: str
    evidence_label: str
    at: str


class ToolCalled(StudioEvent, tag="AgentSession.ToolCalled"):
    tool_name: str
    route: str
    summary: str
    first: bool
    at: str
    tick: int = 0


class ToolCallFailed(StudioEvent, tag="AgentSession.ToolCallFailed"):
    tool_name: str
    route: str
    summary: str
    reason: str
    at: str
    tick: int = 0


class ModelReported(StudioEvent, tag="AgentSession.ModelReported"):
    model: str
    at: str


class AssistantMessage(StudioEvent, tag="AgentSession.AssistantMessage"):
    text: str
    at: str


class RunnerOutput(StudioEvent, tag="AgentSession.RunnerOutput"):
    stream: str
    level: str
    text: str
    at: str


class Blocked(StudioEvent, tag="AgentSession.Blocked"):
    code: str
    message: str
    evidence: dict[str, Any]
    at: str
    tick: int = 0


class Unblocked(StudioEvent, tag="AgentSession.Unblocked"):
    code: str
    resolution: str
    actor: str
    resume_status: str
    at: str
    tick: int = 0


class HandedOff(StudioEvent, tag="AgentSession.HandedOff"):
    target_agent_id: str
    target_session_id: str
    reason: str
    thread_id: str
    at: str


class PullRequestOpened(StudioEvent, tag="AgentSession.PullRequestOpened"):
    pr_url: str
    pr_owner: str
    pr_repo: str
    pr_number: int
    repository_key: str
    at: str
    head_sha: str = ""  # events stored before pull requests named their head commit have none
    changed_paths: list[str] = []


class ControlApplied(StudioEvent, tag="AgentSession.ControlApplied"):
    control_id: str
    verb: str
    actor: str
    reason: str
    causation_id: str
    params: dict[str, Any]
    at: str


class Paused(StudioEvent, tag="AgentSession.Paused"):
    actor: str
    control_id: str
    previous_status: str
    at: str
    live_status: str = "paused"
    current_step: str = "paused"


class RequestQueued(StudioEvent, tag="AgentSession.RequestQueued"):
    message: str
    wake_target: str
    actor: str
    control_id: str
    at: str


class Resumed(StudioEvent, tag="AgentSession.Resumed"):
    actor: str
    control_id: str
    wake_target: str
    live_status: str
    current_step: str
    at: str


class MessageDelivered(StudioEvent, tag="AgentSession.MessageDelivered"):
    channel: str
    message: str
    thread_id: str
    actor: str
    control_id: str
    at: str


class ProcessRestarted(StudioEvent, tag="AgentSession.ProcessRestarted"):
    reason: str
    actor: str
    control_id: str
    workspace_name: str
    fresh_workspace: bool
    previous_llm_session_id: str
    cleared_blocker: str
    at: str
    tick: int
    live_status: str = "ready"
    current_step: str = "process_restarting"
    llm_session_id: str = ""


class StartFailed(StudioEvent, tag="AgentSession.StartFailed"):
    workspace_name: str
    provider_workspace_id: str
    error: str
    at: str


class SelfHealed(StudioEvent, tag="AgentSession.SelfHealed"):
    signal: str
    self_heal_status: str
    cleared: dict[str, str]
    at: str


class WorkspaceRestarted(StudioEvent, tag="AgentSession.WorkspaceRestarted"):
    reason: str
    actor: str
    control_id: str
    workspace_name: str
    recreated: bool
    cleared_blocker: str
    at: str


class ProcessSwitched(StudioEvent, tag="AgentSession.ProcessSwitched"):
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


class TaskCardChanged(StudioEvent, tag="AgentSession.TaskCardChanged"):
    action: str
    task_card_id: str
    title: str
    parent_task_card_id: str
    actor: str
    control_id: str
    at: str


class SessionCompleted(StudioEvent, tag="AgentSession.Completed"):
    result: dict[str, Any]
    at: str


class Stopped(StudioEvent, tag="AgentSession.Stopped"):
    actor: str
    reason: str
    control_id: str
    at: str


SESSION_EVENTS: tuple[type[StudioEvent], ...] = (
    SessionOpened, ProcessStarted, ControllerActionObserved, ToolCalled, AssistantMessage, RunnerOutput,
    Blocked, Unblocked, HandedOff, PullRequestOpened, ControlApplied, Paused, RequestQueued, Resumed,
    MessageDelivered, ProcessRestarted, StartFailed, SelfHealed, WorkspaceRestarted, ProcessSwitched,
    TaskCardChanged, SessionCompleted, Stopped, ToolCallFailed, ModelReported,
)

# -- WorkspaceLease (``lease:<tenant>:<project_slug>:<workspace_name>``) ------------------------


class LeaseProvisioned(StudioEvent, tag="WorkspaceLease.Provisioned"):
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


class SlotAcquired(StudioEvent, tag="WorkspaceLease.SlotAcquired"):
    run_id: str
    session_id: str
    agent_id: str
    handoff_target: str
    recovery_reason: str
    reused: bool
    at: str
    warm_until_at: str


class SlotReleased(StudioEvent, tag="WorkspaceLease.SlotReleased"):
    session_id: str
    reason: str
    at: str
    suspend_after_at: str


class LeaseStatusChanged(StudioEvent, tag="WorkspaceLease.StatusChanged"):
    status: str
    reason: str
    at: str


class LeaseRecreated(StudioEvent, tag="WorkspaceLease.Recreated"):
    reason: str
    previous_provider_workspace_id: str
    provider_workspace_id: str
    stale_sessions: list[str]
    at: str


class LeaseVerified(StudioEvent, tag="WorkspaceLease.Verified"):
    live_status: str
    at: str


LEASE_EVENTS: tuple[type[StudioEvent], ...] = (
    LeaseProvisioned, SlotAcquired, SlotReleased, LeaseStatusChanged, LeaseRecreated, LeaseVerified,
)

EVENTS: tuple[type[StudioEvent], ...] = RUN_EVENTS + SESSION_EVENTS + LEASE_EVENTS


def kind_of(event_type: type[StudioEvent]) -> str:
    """``Blocked`` -> ``"AgentSession.Blocked"`` (its tag: aggregate and event name)."""
    return str(event_type.__struct_config__.tag)


BY_KIND: dict[str, type[StudioEvent]] = {kind_of(e): e for e in EVENTS}

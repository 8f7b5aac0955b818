"""Response bodies of the control-plane reads: the observability feed and the fleet board.

The feed is served pre-encoded from its read models; these Structs are its schema (the
OpenAPI document) and what tests decode it with, strictly, to prove the shape.
"""

from __future__ import annotations

from typing import Literal

import msgspec

PixelState = Literal["idle", "active", "in_conversation", "waiting", "awaiting_reply", "moving", "blocked", "resolved"]
TempoPhase = Literal["waiting_first_tool", "prompt_dispatching", "agent_running", "delivery_evidence_seen", "terminal"]
Level = Literal["info", "warn", "error"]


class Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class Confinement(Strict):
    kind: str
    writable_paths: list[str] = []
    reachable_addresses: list[str] = []


class Wall(Strict):
    code: str
    message: str
    recommended_action: str


class ArmoryLoadout(Strict, omit_defaults=True):  # (confinement only when a plane said it)
    mcp_server_ids: list[str]
    tool_names: dict[str, list[str]]
    execution_profile: str
    bundles: list[str]
    confinement: Confinement | None = None  # how the agent's process is confined (local plane)


class ProcessMetrics(Strict):
    total_cost_usd: float
    duration_ms: int
    num_turns: int
    # Tokens as the agent CLI reported them (absent until its result counted them).
    input_tokens: int = -1
    cached_input_tokens: int = -1
    output_tokens: int = -1


class PixelAgent(Strict):
    agent_id: str
    session_id: str
    role_key: str
    agent_nickname: str
    alias: str
    pixel_state: PixelState
    current_step: str
    current_tool_name: str
    live_status: str
    tempo_phase: TempoPhase
    wall_code: str
    wall: Wall
    agent_process_provider: str
    agent_process_model: str
    agent_process_effort: str
    agent_process_speed: str
    mailbox_count: int
    dialogue_target_agent_id: str
    active_thread_id: str
    armory_loadout: ArmoryLoadout
    last_update_at: str
    process_metrics: ProcessMetrics
    # Denied or failed tool calls, counted apart (absent until the first), and the model the
    # agent CLI says it ran beside the assigned ``agent_process_model`` (absent until named).
    failed_tool_call_count: int = 0
    model_ran: str = ""


class RuntimeLog(Strict):
    source: str
    level: Level
    message: str
    created_at: str
    evidence_scope: Literal["current_state", "diagnostic_excerpt"]
    current_signal: str
    warning: str
    agent_id: str
    event_id: str


class LiveEvent(Strict, omit_defaults=True):
    event_id: str
    run_id: str
    agent_id: str
    session_id: str
    event_kind: str
    event_name: str
    route: str
    tool_name: str
    summary: str
    pixel_state: str
    target_agent_id: str
    thread_id: str
    task_card_id: str
    created_at: str
    # a tool call's result, its first bytes (only on a call that answered something)
    result: str = ""
    result_size: int = 0
    result_truncated: bool = False


class MirrorWorkspace(Strict):
    workspace_name: str
    provider: str
    namespace: str
    target_branch: str
    workspace_scope: str
    workspace_status: str
    live_status: Literal["connected", "pending", "stopped", "missing", "unknown"]
    active_slot_count: int
    max_active_slots: int
    warm_until_at: str
    suspend_after_at: str
    last_verified_at: str
    resume_estimate_seconds: int
    reuse: str
    recovery_reason: str
    handoff_target: str


class WorkspaceMirror(Strict):
    project_slug: str
    isolation: Literal["per_project"]
    workspace_count: int
    workspaces: list[MirrorWorkspace]


class Delivery(Strict):
    status: Literal["delivered", "blocker", "none", "unknown"]
    pr_url: str
    pr_owner: str
    pr_repo: str
    pr_number: int  # the number of its page in the project (/projects/<slug>/pulls/<n>)
    preview_url: str
    share_token: str
    closer_state: str


class SourceRepo(Strict):
    slug: str
    branch: str
    default_branch: str


class SourceRef(Strict):
    repos: list[SourceRepo]
    mode: Literal["oci", "github_array", "bundle", "none"]
    oci_version: str
    hud_shared: bool


class Proposal(Strict):
    proposal_id: str
    work_kind: str
    boundary: str
    bound: bool


class Queue(Strict):
    state: Literal["queued", "running", "idle", "blocked", "unknown"]
    queued_at: str
    heartbeat_age_seconds: int


class Lineage(Strict):
    projected: bool
    impact_node_count: int
    catalog_url: str


class DeliveryFeedback(Strict):
    quality: Literal["good", "needs_changes", "unknown"]
    accepted: bool
    notes_count: int


class Evidence(Strict):
    proof_count: int
    has_chronicle: bool
    scope: str


class Progress(Strict):
    total_agents: int
    active: int
    waiting: int
    blocked: int
    moving: int
    idle: int
    completed: int


class CostSource(Strict):
    agent_id: str
    session_id: str
    source: str  # cli_report (the CLI's own total) or meter (the model proxy's)
    total_cost_usd: float


class RunCost(Strict):
    total_cost_usd: float
    agent_count_with_cost: int
    # The model proxy's metered sum for the run, and where each agent's cost came from.
    metered_cost_usd: float = 0.0
    cost_sources: list[CostSource] = []


class Freshness(Strict):
    latest_activity_at: str


class CoordinationFriction(Strict):
    first_tool_waiting_agents: list[str]
    handoff_blocked_agents: list[str]
    process_switch_handoff_required_agents: list[str]
    mailbox_pending_count: int
    known_duration_ms: int
    known_turn_count: int


class ObservabilityFeed(Strict):
    run_id: str
    project_slug: str
    live_channel_topic: str
    live_events: list[LiveEvent]
    pixel_agents: list[PixelAgent]
    runtime_logs: list[RuntimeLog]
    execution_workspace_mirror: WorkspaceMirror
    delivery: Delivery
    source_ref: SourceRef
    proposal: Proposal
    queue: Queue
    lineage: Lineage
    delivery_feedback: DeliveryFeedback
    evidence: Evidence
    progress: Progress
    run_cost: RunCost
    freshness: Freshness
    latest_activity_at: str
    event_count: int
    pixel_agent_count: int
    runtime_log_count: int
    coordination_friction: CoordinationFriction


class Blocker(Strict):
    agent_id: str
    blocker_code: str


class BoardRow(msgspec.Struct, kw_only=True):
    """One run on the fleet board (decoded from the stored row, fold state left out)."""

    run_id: str
    tenant_id: str
    project_slug: str
    template_id: str
    launched_by: str
    status: Literal["ready", "scheduled", "running", "blocked", "completed", "cleaned_up"]
    execution_status: str
    created_at: str
    started_at: str
    ended_at: str
    latest_activity_at: str
    tick: int
    progress: Progress
    blocker_count: int
    blockers: list[Blocker]
    total_cost_usd: float
    agent_count_with_cost: int
    pr_count: int
    first_pr_at: str
    time_to_first_pr_seconds: int


class FleetBoard(msgspec.Struct, kw_only=True):
    runs: list[BoardRow]
    count: int
    next_cursor: str

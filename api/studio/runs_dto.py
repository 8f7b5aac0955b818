"""Request and response bodies of the studio run endpoints."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar.params import PathParameter

from domain.shared.ids import ID_PATTERN
from domain.studio.squad import RosterAgent

# The run endpoints' path parameters.
RunId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="run id")]
SessionId = Annotated[str, PathParameter(pattern=ID_PATTERN, description="session id")]

Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN, description="opaque id [A-Za-z0-9_-]")]
Text = Annotated[str, msgspec.Meta(max_length=20_000)]


class LaunchRequest(msgspec.Struct, kw_only=True):
    template_id: Id
    project_slug: Id
    agent_process_kind: Annotated[str, msgspec.Meta(max_length=200)] = ""
    runtime_kind: Annotated[str, msgspec.Meta(max_length=200)] = ""
    work_scope: Text = ""
    next_goal: Text = ""


# A roster entry as the run recorded it (the domain's ``RosterAgent``); an answer always
# carries its skill and MCP server lists.
class RosterAgentOut(RosterAgent, kw_only=True):
    skill_ids: list[str]
    mcp_server_ids: list[str]


class LaunchResponse(msgspec.Struct, kw_only=True):
    run_id: str
    status: str
    agent_roster: list[RosterAgentOut]
    source_run_id: str = ""


class ExecuteResponse(msgspec.Struct, kw_only=True):
    run_id: str
    status: str
    requested_at: str
    follow_up: bool = False


class Confinement(msgspec.Struct, kw_only=True):
    """How an agent process is confined: ``bwrap`` or ``none``, what it may write and reach."""

    kind: str
    writable_paths: list[str] = []
    reachable_addresses: list[str] = []


class SessionStateEntry(msgspec.Struct, kw_only=True):
    agent_id: str
    role_key: str
    agent_nickname: str
    session_id: str
    llm_session_id: str
    live_status: str
    current_step: str
    blocker_code: str
    tool_call_count: int
    # Denied or failed tool calls (never counted in ``tool_call_count``), and the model the
    # agent CLI says it ran ("" until it named one).
    failed_tool_call_count: int = 0
    model_ran: str = ""
    confinement: Confinement | None = None  # set once a process started on a plane that says


class SessionStateResponse(msgspec.Struct, kw_only=True):
    run_id: str
    status: str
    sessions: list[SessionStateEntry]


class PreviewRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    project_slug: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    url: Annotated[str, msgspec.Meta(max_length=2048)] | None = None
    domain_url: Annotated[str, msgspec.Meta(max_length=2048)] | None = None
    # Litestar's OpenAPI drops a bound of 0 (falsy); the extra states it.
    port: Annotated[int, msgspec.Meta(ge=0, le=65535, extra_json_schema={"extra": {"minimum": 0}})] | None = None
    sandbox_id: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    signed: bool | None = None
    status: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    published_by_agent: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    note: Annotated[str, msgspec.Meta(max_length=4000)] | None = None


class PreviewRecord(msgspec.Struct, kw_only=True):
    run_id: str
    updated_at: str
    project_slug: str = ""
    url: str = ""
    domain_url: str = ""
    port: int = 0
    sandbox_id: str = ""
    signed: bool = False
    status: str = ""
    published_by_agent: str = ""
    note: str = ""


class SessionRecord(msgspec.Struct, kw_only=True):
    agent_id: str
    role_key: str
    agent_nickname: str
    alias: str
    title: str
    session_id: str
    llm_session_id: str
    live_status: str
    current_step: str
    blocker_code: str
    tool_call_count: int
    agent_provider: str
    agent_model: str
    agent_effort: str
    agent_speed: str
    joined_via: dict[str, str]
    created_at: str
    last_event_at: str
    failed_tool_call_count: int = 0
    model_ran: str = ""
    confinement: Confinement | None = None


class RunRecord(msgspec.Struct, kw_only=True):
    run_id: str
    tenant_id: str
    project_slug: str
    template_id: str
    agent_process_kind: str
    work_scope: str
    next_goal: str
    status: str
    execution_status: str
    agent_roster: list[RosterAgentOut]
    source_ref: dict[str, Any]
    proposal: dict[str, Any]
    launched_by: str
    source_run_id: str
    created_at: str
    updated_at: str
    requested_at: str
    last_requested_at: str
    execution_requests: int
    started_at: str
    ended_at: str
    tick: int
    report_count: int
    handoff_count: int
    control_count: int
    blocker_count: int
    latest_activity_at: str
    preview: PreviewRecord | None
    sessions: list[SessionRecord]
    summary: dict[str, Any]


class TickReport(msgspec.Struct, kw_only=True):
    status: str
    run_id: str = ""
    tick: int = 0
    at: str = ""
    session_count: int = 0
    live_status_counts: dict[str, int] = {}
    tool_calls: int = 0
    handoffs: int = 0
    pull_requests: int = 0
    completed_sessions: int = 0
    rejected_steps: int = 0
    blockers: list[dict[str, str]] = []
    plane: str = ""
    diagnosis: dict[str, Any] = {}
    # Ticks before this one that changed nothing (and were not recorded): this report's
    # state began at ``tick``; the previous report's held through ``tick - quiet_ticks - 1``.
    quiet_ticks: int = 0


class HandoffEntry(msgspec.Struct, kw_only=True):
    sequence: int
    handoff_id: str
    from_agent_id: str
    to_agent_id: str
    to_session_id: str
    kind: str
    reason: str
    thread_id: str
    actor: str
    created_at: str


class HandoffTrail(msgspec.Struct, kw_only=True):
    run_id: str
    handoff_count: int
    handoffs: list[HandoffEntry]


class CleanupRequest(msgspec.Struct, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=2000)] = ""


class CleanupResponse(msgspec.Struct, kw_only=True):
    run_id: str
    status: str
    stopped_sessions: int

"""What a request handler gets: one ``caller`` dependency, and the app's parts from state.

Litestar resolves the dependencies of one depth concurrently in an anyio task group,
which costs about 25 µs per dependency per request; a handler with a single dependency
has it resolved inline. So every handler takes exactly one: ``caller`` (the edge
principal and the tenant, C1/C2), and reads the service's parts from ``state``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.types import Scope

from api.auth import (
    AssertionHeader,
    EdgeJwt,
    EmailHeader,
    GroupsHeader,
    Principal,
    TenantHeader,
    TenantQuery,
    admit,
    provide_tenant,
    resolve_principal_async,
)
from api.read_your_writes import MinPositionHeader, parse_min_position, read_your_writes
from api.studio.reads import StudioReads
from domain.gate.commands import GateCommands
from domain.jobs.commands import JobCommands
from domain.portal.copilot import Answerer
from domain.portal.graph import PermissionGraph
from domain.portal.notifications import Inboxes, NotificationWorkflow
from domain.portal.skills import SkillSource
from domain.projects.project import ProjectCommands
from domain.projects.provisioning import ProjectProvisioning
from domain.shared.event_store import EventStore
from domain.studio.commands import StudioCommands
from domain.studio.commands.tool_calls import AgentToolCalls
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.material import MaterialConfig
from domain.workspaces.metering import MeterTokens
from projections.engine.health import HealthProbe
from projections.engine.runner import ProjectionRunner
from projections.engine.store import DocStore
from projections.studio.live_channel import Broker


class ApiSettings(Protocol):
    """The settings the app reads (``workers.settings.Settings`` is one)."""

    base_url: str
    allowed_origins: tuple[str, ...]
    api_keys: tuple[str, ...]
    rate_limit_per_minute: int
    read_copies_mib: int
    min_position_wait_seconds: float
    database_request_wait_seconds: float
    live_heartbeat_seconds: float
    live_subject_prefix: str
    skills_deadline_seconds: float
    data_dir: str
    vcs_path: Path
    edge_jwt_key: str
    edge_jwt_audience: str
    edge_jwt_issuer: str


class Wakes(Protocol):
    """A worker that acts now when woken (the ticker)."""

    def wake(self, _position: int | None = None) -> None: ...


class Follows(Protocol):
    """A log follower with a stored position (the live fan-out)."""

    def position(self) -> int: ...


class PullReviews(Protocol):
    """Reads a pull request's commits and diffs (``workers.adapters.git_review.GitReviews``)."""

    def pull_changes(self, run: Any, agent_id: str, head_sha: str) -> dict[str, Any]: ...


class ServiceParts(Protocol):
    """What the composition root hands the app (``workers.bootstrap.Container`` is one):
    each area's commands, the event store, the read models and the workers the app starts."""

    settings: ApiSettings
    event_store: EventStore
    studio: StudioCommands
    projects: ProjectCommands
    jobs: JobCommands
    gate: GateCommands
    workspaces: WorkspaceCommands
    store: DocStore
    runner: ProjectionRunner
    health: HealthProbe | None
    ticker: Wakes
    fanout: Follows
    live_broker: Callable[[], Broker]
    # The squad's MCP server (``/mcp``): its command object and the agent token key.
    agent_tools: AgentToolCalls | None
    mcp_token_key: str
    provisioning: ProjectProvisioning | None
    reviews: PullReviews | None  # pull requests' commits and diffs, from the lanes' repositories
    # The permission graph, when not the built-in one over the relationship read model.
    permission_graph: PermissionGraph | None
    inboxes: Inboxes | None
    notification_workflow: NotificationWorkflow | None
    notification_secret: Callable[[], str] | None
    notification_config: dict[str, str]
    copilot_answerer: Answerer | None
    skill_sources: list[SkillSource]
    workspace_material: MaterialConfig
    meter_tokens: MeterTokens
    model_proxy: Any  # api.workspaces.proxy.ModelProxy (routes, upstreams and the meter)

    def start(self, workers: tuple[str, ...] = ...) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Caller:
    principal: Principal
    tenant: str
    min_position: int = 0  # read models already include it (X-Squadops-Min-Position)

    @property
    def subject_key(self) -> str:
        return self.principal.subject_key


CallerDep = NamedDependency[Caller]
CALLER_SCOPE_KEY = "squadops.caller"  # where ``api.access.access_guard`` leaves the caller it resolved


def caller_provider(edge: EdgeJwt, *, admin: bool) -> Any:
    """The ``caller`` dependency: who calls (401/403 first), then for which tenant (422),
    then, given ``X-Squadops-Min-Position``, read models at that position (C19)."""

    async def provide_caller(
        state: State,
        scope: Scope,
        email: EmailHeader = None,
        groups: GroupsHeader = None,
        assertion: AssertionHeader = None,
        tenant_id: TenantQuery = None,
        tenant_header: TenantHeader = None,
        min_position: MinPositionHeader = None,
    ) -> Caller:
        resolved = scope.get(CALLER_SCOPE_KEY)  # the access guard resolved it already
        if resolved is not None:
            return resolved  # type: ignore[no-any-return]
        principal = admit(await resolve_principal_async(email, groups, assertion, edge), admin=admin)
        caller = Caller(principal, provide_tenant(tenant_id, tenant_header), parse_min_position(min_position))
        await read_your_writes(state).reach(caller.min_position)
        return caller

    return provide_caller


def caller_dependency(edge: EdgeJwt, *, admin: bool) -> dict[str, Provide]:
    return {"caller": Provide(caller_provider(edge, admin=admin))}


def part(state: State, name: str) -> Any:
    """One of the service's parts put in the app's state by ``api.app.create_app``."""
    return state[name]


def studio_commands(state: State) -> StudioCommands:
    """The studio area's commands (runs, control verbs)."""
    return part(state, "studio")


def project_commands(state: State) -> ProjectCommands:
    """The projects area's commands (the project factory)."""
    return part(state, "projects")


def studio_reads(state: State) -> StudioReads:
    """The queries over the studio's and the projects' read models."""
    return part(state, "studio_reads")


def read_store(state: State) -> DocStore:
    """The read models' store, for the few reads no area query covers."""
    return part(state, "store")


def event_store(state: State) -> EventStore:
    """The event store (commands that save an aggregate of the API's own, the copilot's thread)."""
    return part(state, "event_store")

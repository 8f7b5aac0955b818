"""What a request handler gets: one ``caller`` dependency, and the app's parts from state.

Litestar resolves the dependencies of one depth concurrently in an anyio task group,
which costs about 25 µs per dependency per request; a handler with a single dependency
has it resolved inline. So every handler takes exactly one: ``caller`` (the edge
principal and the tenant, C1/C2), and reads the service's parts from ``state``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from api.positions import MinPositionHeader, ReadPositions, parse_min_position
from api.studio.reads import Reads
from domain.projects.commands import ProjectCommands
from domain.shared.event_store import EventStore
from domain.studio.commands import StudioCommands
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.material import MaterialConfig
from domain.workspaces.metering import MeterTokens, UsageMeter


class ServiceParts(Protocol):
    """What the composition root hands the app (``workers.bootstrap.Container`` is one)."""

    settings: Any
    event_store: EventStore
    health: Any
    studio: StudioCommands
    projects: ProjectCommands
    jobs: Any  # domain.jobs.commands.JobCommands
    gate: Any  # domain.gate.commands.GateCommands
    store: Any
    runner: Any
    ticker: Any
    fanout: Any
    live_broker: Callable[[], Any]
    workspaces: WorkspaceCommands
    workspace_material: MaterialConfig
    meter_tokens: MeterTokens
    usage_meter: UsageMeter

    def settle(self, position: int | None = None) -> bool: ...

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
        await read_positions(state).reach(caller.min_position)
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


def read_models(state: State) -> Reads:
    """The read-model queries."""
    return part(state, "reads")


def read_positions(state: State) -> ReadPositions:
    """Where the read models stand, and the bounded wait for a position."""
    return part(state, "read_positions")


def event_store(state: State) -> EventStore:
    """The event store (log positions of commands)."""
    return part(state, "event_store")

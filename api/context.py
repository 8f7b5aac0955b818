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

from api.auth import (
    AssertionHeader,
    EmailHeader,
    GroupsHeader,
    Principal,
    TenantHeader,
    TenantQuery,
    admit,
    provide_tenant,
    resolve_principal,
)
from api.studio.reads import Reads
from domain.projects.commands import ProjectCommands
from domain.shared.event_store import EventStore
from domain.studio.commands import StudioCommands


class ServiceParts(Protocol):
    """What the composition root hands the app (``workers.bootstrap.Container`` is one)."""

    settings: Any
    event_store: EventStore
    studio: StudioCommands
    projects: ProjectCommands
    store: Any
    runner: Any
    ticker: Any
    fanout: Any
    live_broker: Callable[[], Any]

    def await_reads(self, position: int | None = None, timeout: float = 2.0) -> bool: ...

    def start(self, workers: tuple[str, ...] = ...) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Caller:
    principal: Principal
    tenant: str

    @property
    def subject_key(self) -> str:
        return self.principal.subject_key


CallerDep = NamedDependency[Caller]


def caller_provider(jwt_key: str, *, admin: bool) -> Any:
    """The ``caller`` dependency: who calls (401/403 first), then for which tenant (422)."""

    def provide_caller(
        email: EmailHeader = None,
        groups: GroupsHeader = None,
        assertion: AssertionHeader = None,
        tenant_id: TenantQuery = None,
        tenant_header: TenantHeader = None,
    ) -> Caller:
        principal = admit(resolve_principal(email, groups, assertion, jwt_key), admin=admin)
        return Caller(principal, provide_tenant(tenant_id, tenant_header))

    return provide_caller


def caller_dependency(jwt_key: str, *, admin: bool) -> dict[str, Provide]:
    return {"caller": Provide(caller_provider(jwt_key, admin=admin), sync_to_thread=False)}


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

"""What a request handler gets: one ``caller`` dependency, and the app's parts from state.

Litestar resolves the dependencies of one depth concurrently in an anyio task group,
which costs about 25 µs per dependency per request; a handler with a single dependency
has it resolved inline. So every handler takes exactly one: ``caller`` (the edge
principal and the tenant, C1/C2), and reads the service's parts from ``state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

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
    resolve_principal,
)
from api.reads import Reads
from domain.application import SquadOps


@dataclass(frozen=True)
class Caller:
    principal: Principal
    tenant: str

    @property
    def subject_key(self) -> str:
        return self.principal.subject_key


CallerDep = NamedDependency[Caller]


def caller_provider(edge: EdgeJwt, *, admin: bool) -> Any:
    """The ``caller`` dependency: who calls (401/403 first), then for which tenant (422)."""

    def provide_caller(
        email: EmailHeader = None,
        groups: GroupsHeader = None,
        assertion: AssertionHeader = None,
        tenant_id: TenantQuery = None,
        tenant_header: TenantHeader = None,
    ) -> Caller:
        principal = admit(resolve_principal(email, groups, assertion, edge), admin=admin)
        return Caller(principal, provide_tenant(tenant_id, tenant_header))

    return provide_caller


def caller_dependency(edge: EdgeJwt, *, admin: bool) -> dict[str, Provide]:
    return {"caller": Provide(caller_provider(edge, admin=admin), sync_to_thread=False)}


def part(state: State, name: str) -> Any:
    """One of the service's parts put in the app's state by ``api.app.create_app``."""
    return state[name]


def services(state: State) -> SquadOps:
    """The application service (commands)."""
    return part(state, "squadops")


def read_models(state: State) -> Reads:
    """The read-model queries."""
    return part(state, "reads")

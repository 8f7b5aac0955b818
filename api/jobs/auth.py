"""Who calls the jobs, sync and identity endpoints: an edge principal, or an API key (C2),
and what each may do in a tenant.

A request with the edge email claim is a principal's (verified as everywhere else); one
without it needs an ``x-api-key`` listed in ``SQUADOPS_API_KEYS``. Neither: 401.

Keys are bound to tenants: ``SQUADOPS_API_KEYS=tenant:key,…`` (a key listed under several
tenants serves each; a plain ``key`` is bound to the ``default`` tenant). In a tenant,
enqueueing needs super_admin, a key bound to it, or a project role of ``contributor`` or
above in one of its projects; reads (jobs, checkpoints) need super_admin, a bound key, or
any project role there (``viewer`` included). Else 403.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import HeaderParameter

from api.auth import (
    AssertionHeader,
    EdgeJwt,
    EmailHeader,
    GroupsHeader,
    Principal,
    TenantHeader,
    TenantQuery,
    provide_tenant,
    resolve_principal_async,
)
from api.context import part
from api.errors import ApiError, RequestInvalid
from api.read_your_writes import MinPositionHeader, parse_min_position, read_your_writes
from domain.portal.graph import ListObjectsRequest, identity_tuples, user_ref
from domain.shared.access import READ_ROLE
from domain.shared.errors import Forbidden
from domain.shared.ids import is_valid_id

DEFAULT_TENANT = "default"
ENQUEUE_ROLE = "contributor"

API_KEY_HEADER = "x-api-key"

ApiKeyHeader = Annotated[
    str | None,
    HeaderParameter(name=API_KEY_HEADER, required=False, description="an API key from SQUADOPS_API_KEYS"),
]


@dataclass(frozen=True)
class JobCaller:
    """A principal (edge claims) or an automation holding an API key, and the tenant."""

    principal: Principal | None
    api_key_id: str
    tenant: str
    tenant_given: bool  # named by the tenant header or query, not defaulted
    min_position: int = 0
    key_tenants: frozenset[str] = frozenset()  # the tenants the API key is bound to

    @property
    def requested_by(self) -> str:
        return self.principal.subject_key if self.principal is not None else f"api-key:{self.api_key_id}"

    @property
    def privileged(self) -> bool:
        """May act for other subjects of the request's tenant: super_admin, or automation
        holding a key bound to that tenant."""
        if self.principal is None:
            return self.tenant in self.key_tenants
        return self.principal.is_super_admin

    def authorise(self, state: State, tenant: str, *, enqueue: bool) -> None:
        """403 unless the caller may enqueue (or read) jobs, syncs and checkpoints of ``tenant``."""
        if self.principal is None:
            if tenant not in self.key_tenants:
                raise Forbidden(f"This x-api-key is not bound to tenant {tenant!r}.", code="api_key_tenant_forbidden")
            return
        if self.principal.is_super_admin:
            return
        role = ENQUEUE_ROLE if enqueue else READ_ROLE
        projects = part(state, "permission_graph").list_objects(
            ListObjectsRequest(
                store=tenant,
                user=user_ref(self.principal.subject_key),
                relation=role,
                type="project",
                contextual_tuples=identity_tuples(self.principal.subject_key, self.principal.groups),
            )
        )
        if not projects:
            raise Forbidden(
                f"{'Enqueueing' if enqueue else 'Reading'} jobs of tenant {tenant!r} needs a project role "
                f"({role} or above) there, super_admin, or an x-api-key bound to it.",
                code="tenant_role_required",
            )

    def tenant_of(self, body_tenant: str | None) -> str:
        """The request's tenant: the body's ``tenant_id``, which must agree with the header's."""
        if body_tenant is None:
            return self.tenant
        if self.tenant_given and body_tenant != self.tenant:
            raise RequestInvalid(
                ["body", "tenant_id"], "tenant_id differs from the request's tenant header", "value_error", body_tenant
            )
        return body_tenant


def key_id(key: str) -> str:
    """A short, non-secret name of an API key (for ``requested_by``)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def bound_keys(api_keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(tenant, key)`` of each ``tenant:key`` entry; a plain ``key`` is the default tenant's."""
    bound = []
    for entry in api_keys:
        tenant, sep, key = entry.partition(":")
        bound.append((tenant, key) if sep and is_valid_id(tenant) and key else (DEFAULT_TENANT, entry))
    return tuple(bound)


def admit_key(presented: str, keys: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The tenants the presented key is bound to (empty: not a key this service accepts);
    every key is compared, in constant time."""
    tenants = set()
    for tenant, key in keys:
        if hmac.compare_digest(presented.encode(), key.encode()):
            tenants.add(tenant)
    return frozenset(tenants)


def job_caller_provider(edge: EdgeJwt, api_keys: Sequence[str]) -> Any:
    keys = bound_keys(api_keys)

    async def provide_job_caller(
        state: State,
        email: EmailHeader = None,
        groups: GroupsHeader = None,
        assertion: AssertionHeader = None,
        api_key: ApiKeyHeader = None,
        tenant_id: TenantQuery = None,
        tenant_header: TenantHeader = None,
        min_position: MinPositionHeader = None,
    ) -> JobCaller:
        principal: Principal | None = None
        key = ""
        tenants: frozenset[str] = frozenset()
        if (email or "").strip():
            principal = await resolve_principal_async(email, groups, assertion, edge)
        elif api_key:
            tenants = admit_key(api_key, keys)
            if not tenants:
                raise ApiError(401, "The x-api-key is not one this service accepts.", "api_key_invalid")
            key = key_id(api_key)
        else:
            raise ApiError(401, "This endpoint needs an edge principal or an x-api-key.", "unauthenticated")
        caller = JobCaller(
            principal,
            key,
            provide_tenant(tenant_id, tenant_header),
            tenant_id is not None or tenant_header is not None,
            parse_min_position(min_position),
            tenants,
        )
        await read_your_writes(state).reach(caller.min_position)
        return caller

    return provide_job_caller


def job_caller_dependency(edge: EdgeJwt, api_keys: Sequence[str]) -> dict[str, Provide]:
    return {"caller": Provide(job_caller_provider(edge, api_keys))}

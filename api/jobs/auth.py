"""Who calls the jobs, sync and identity endpoints: an edge principal, or an API key (C2).

A request with the edge email claim is a principal's (verified as everywhere else); one
without it needs an ``x-api-key`` listed in ``SQUADOPS_API_KEYS``. Neither: 401.
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
from api.context import read_positions
from api.errors import ApiError, RequestInvalid
from api.positions import MinPositionHeader, parse_min_position

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

    @property
    def requested_by(self) -> str:
        return self.principal.subject_key if self.principal is not None else f"api-key:{self.api_key_id}"

    @property
    def privileged(self) -> bool:
        """May act for other subjects: automation (API key) or super_admin."""
        return self.principal is None or self.principal.is_super_admin

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


def admit_key(presented: str, keys: Sequence[str]) -> bool:
    return any(hmac.compare_digest(presented.encode(), k.encode()) for k in keys)


def job_caller_provider(edge: EdgeJwt, api_keys: Sequence[str]) -> Any:
    keys = tuple(api_keys)

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
        if (email or "").strip():
            principal = await resolve_principal_async(email, groups, assertion, edge)
        elif api_key:
            if not admit_key(api_key, keys):
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
        )
        await read_positions(state).reach(caller.min_position)
        return caller

    return provide_job_caller


def job_caller_dependency(edge: EdgeJwt, api_keys: Sequence[str]) -> dict[str, Provide]:
    return {"caller": Provide(job_caller_provider(edge, api_keys))}

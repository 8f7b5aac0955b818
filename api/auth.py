"""Edge-claim authentication (C2) and tenant resolution (C1), as Litestar dependencies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Annotated, Any

from litestar.params import HeaderParameter, QueryParameter

from api.errors import ApiError, RequestInvalid
from domain.shared.access import SUPER_ADMIN_GROUP
from domain.shared.ids import ID_PATTERN, is_valid_id

TENANT_HEADER = "X-Squadops-Tenant-Id"
EMAIL_HEADER = "x-edge-claim-email"
GROUPS_HEADER = "x-edge-claim-groups"
ASSERTION_HEADER = "x-edge-jwt-assertion"
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Principal:
    """Who is calling, as the edge proxy asserts it."""

    subject_key: str
    email: str
    groups: tuple[str, ...]

    @property
    def is_super_admin(self) -> bool:
        return SUPER_ADMIN_GROUP in self.groups


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def verify_assertion(token: str, key: str, now: float | None = None) -> dict[str, Any]:
    """Claims of an HS256 edge JWT; raises ApiError(401) if it does not verify."""
    try:
        head_b64, body_b64, sig_b64 = token.split(".")
        header = json.loads(_b64(head_b64))
        claims = json.loads(_b64(body_b64))
        signature = _b64(sig_b64)
    except (ValueError, TypeError):
        raise ApiError(401, "The edge assertion is not a JWT.", "edge_assertion_invalid") from None
    if header.get("alg") != "HS256" or not isinstance(claims, dict):
        raise ApiError(401, "The edge assertion must be an HS256 JWT.", "edge_assertion_invalid")
    expected = hmac.new(key.encode(), f"{head_b64}.{body_b64}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        raise ApiError(401, "The edge assertion signature does not verify.", "edge_assertion_invalid")
    exp = claims.get("exp")
    if isinstance(exp, (int, float)) and exp < (now if now is not None else time.time()):
        raise ApiError(401, "The edge assertion has expired.", "edge_assertion_expired")
    return claims


def sign_assertion(claims: dict[str, Any], key: str) -> str:
    """An HS256 JWT (what the edge proxy sends; used by tests and the CLI)."""

    def enc(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = enc(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = enc(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{enc(sig)}"


def split_groups(raw: str) -> tuple[str, ...]:
    return tuple(g.strip() for g in raw.split(",") if g.strip())


def resolve_principal(email: str | None, groups: str | None, assertion: str | None, jwt_key: str) -> Principal:
    """C2: no email claim -> 401; with a JWT key set the claims must verify and match."""
    email = (email or "").strip()
    if not email:
        raise ApiError(401, "No edge email claim on the request.", "unauthenticated")
    group_paths = split_groups(groups or "")
    if jwt_key:
        if not assertion:
            raise ApiError(401, "The edge assertion is required.", "edge_assertion_missing")
        claims = verify_assertion(assertion, jwt_key)
        if str(claims.get("email", "")).lower() != email.lower():
            raise ApiError(401, "The email claim does not match the edge assertion.", "edge_assertion_mismatch")
        asserted = claims.get("groups", [])
        asserted_groups = split_groups(asserted) if isinstance(asserted, str) else tuple(asserted or ())
        if set(group_paths) - set(asserted_groups):
            raise ApiError(401, "The group claims do not match the edge assertion.", "edge_assertion_mismatch")
    return Principal(subject_key=email.lower(), email=email, groups=group_paths)


EmailHeader = Annotated[str | None, HeaderParameter(name=EMAIL_HEADER, required=False)]
GroupsHeader = Annotated[str | None, HeaderParameter(name=GROUPS_HEADER, required=False)]
AssertionHeader = Annotated[str | None, HeaderParameter(name=ASSERTION_HEADER, required=False)]


TenantQuery = Annotated[str | None, QueryParameter(name="tenant_id", required=False)]
TenantHeader = Annotated[str | None, HeaderParameter(name=TENANT_HEADER, required=False)]


def admit(principal: Principal, *, admin: bool) -> Principal:
    """``admin`` paths (``/v1/admin/*``) demand the super_admin group (C2)."""
    if admin and not principal.is_super_admin:
        raise ApiError(403, "This path needs the super_admin group.", "super_admin_required")
    return principal


def provide_tenant(tenant_id: str | None = None, tenant_header: str | None = None) -> str:
    """C1: the tenant from the header and/or ``tenant_id``; both and different -> 422."""
    if tenant_id is not None and not is_valid_id(tenant_id):
        raise RequestInvalid(["query", "tenant_id"], f"tenant_id must match {ID_PATTERN}", "string_pattern_mismatch", tenant_id)
    if tenant_header is not None and not is_valid_id(tenant_header):
        raise RequestInvalid(["header", TENANT_HEADER], f"{TENANT_HEADER} must match {ID_PATTERN}", "string_pattern_mismatch", tenant_header)
    if tenant_id is not None and tenant_header is not None and tenant_id != tenant_header:
        raise RequestInvalid(
            ["query", "tenant_id"],
            f"tenant_id differs from the {TENANT_HEADER} header",
            "value_error",
            tenant_id,
            {"header": tenant_header},
        )
    return tenant_id or tenant_header or DEFAULT_TENANT

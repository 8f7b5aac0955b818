"""Edge-claim authentication (C2) and tenant resolution (C1), as Litestar dependencies."""

from __future__ import annotations

import base64
import math
import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

import anyio.to_thread
import jwt
from litestar.params import HeaderParameter, QueryParameter

from api.errors import ApiError, RequestInvalid
from api.jwks import EdgeKeys
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
    # When the verified edge assertion expires (seconds since the epoch); None: no assertion.
    # An open live stream ends then (api.live.reauthorise).
    expires_at: float | None = None

    @property
    def is_super_admin(self) -> bool:
        return SUPER_ADMIN_GROUP in self.groups


# What an edge proxy may sign with: a shared secret (HS*) or a JWKS key (RS*, PS*, ES*, EdDSA).
SECRET_ALGORITHMS = ("HS256", "HS384", "HS512")
KEY_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
EDGE_JWT_ALGORITHM = "HS256"
DEFAULT_KEY_ALGORITHMS = ("RS256", "ES256")
MIN_SECRET_BYTES = 32  # an HS* secret shorter than this could be guessed offline from one token
DEFAULT_MAX_LIFETIME_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class EdgeJwt:
    """How the edge assertion verifies (C2); neither a key nor a JWKS is the trusted dev mode.

    ``key`` is a shared secret for HS256; ``jwks`` the edge proxy's public keys (by ``kid``).
    ``algorithms`` lists what a token may be signed with; anything else is refused. By
    default: HS256 when a secret is set, RS256 and ES256 when a JWKS is set.
    """

    key: str = ""
    audience: str = ""
    issuer: str = ""
    jwks: EdgeKeys | None = field(default=None, compare=False)
    algorithms: tuple[str, ...] = ()
    max_lifetime: float = DEFAULT_MAX_LIFETIME_SECONDS

    @property
    def enabled(self) -> bool:
        return bool(self.key) or self.jwks is not None

    @property
    def accepted(self) -> tuple[str, ...]:
        if self.algorithms:
            return self.algorithms
        return ((EDGE_JWT_ALGORITHM,) if self.key else ()) + (DEFAULT_KEY_ALGORITHMS if self.jwks is not None else ())


class EdgeSettings(Protocol):
    edge_jwt_key: str
    edge_jwt_audience: str
    edge_jwt_issuer: str


def check_algorithms(algorithms: tuple[str, ...], *, secret: bool, jwks: bool) -> None:
    """Each configured algorithm is known and has what it verifies with (raises ValueError)."""
    for alg in algorithms:
        if alg not in SECRET_ALGORITHMS + KEY_ALGORITHMS:
            raise ValueError(f"SQUADOPS_EDGE_JWT_ALGORITHMS: {alg!r} is not one of {', '.join(SECRET_ALGORITHMS + KEY_ALGORITHMS)}")
        if alg in SECRET_ALGORITHMS and not secret:
            raise ValueError(f"SQUADOPS_EDGE_JWT_ALGORITHMS: {alg} needs SQUADOPS_EDGE_JWT_KEY")
        if alg in KEY_ALGORITHMS and not jwks:
            raise ValueError(f"SQUADOPS_EDGE_JWT_ALGORITHMS: {alg} needs SQUADOPS_EDGE_JWKS")


def edge_jwt(settings: EdgeSettings) -> EdgeJwt:
    """The ``SQUADOPS_EDGE_JWT_*`` and ``SQUADOPS_EDGE_JWKS`` settings the edge assertion verifies with."""
    location = str(getattr(settings, "edge_jwks", "") or "")
    algorithms = tuple(getattr(settings, "edge_jwt_algorithms", ()) or ())
    check_algorithms(algorithms, secret=bool(settings.edge_jwt_key), jwks=bool(location))
    if settings.edge_jwt_key and len(settings.edge_jwt_key.encode()) < MIN_SECRET_BYTES:
        raise ValueError(f"SQUADOPS_EDGE_JWT_KEY must be at least {MIN_SECRET_BYTES} bytes")
    keys = EdgeKeys(location, lifespan=float(getattr(settings, "edge_jwks_cache_seconds", 300.0) or 300.0)) if location else None
    lifetime = float(getattr(settings, "edge_jwt_max_lifetime_seconds", DEFAULT_MAX_LIFETIME_SECONDS))
    return EdgeJwt(settings.edge_jwt_key, settings.edge_jwt_audience, settings.edge_jwt_issuer, keys, algorithms, lifetime)


_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_NUMERIC_DATES = ("exp", "nbf", "iat")


def invalid_assertion(reason: str) -> ApiError:
    return ApiError(401, f"The edge assertion does not verify: {reason}.", "edge_assertion_invalid")


def _canonical_base64url(segment: str) -> bool:
    """Unpadded base64url whose unused trailing bits are zero (one encoding per value)."""
    if not _SEGMENT.fullmatch(segment) or len(segment) % 4 == 1:
        return False
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == segment


def _header(token: str) -> dict[str, Any]:
    try:
        return jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise invalid_assertion(str(exc).rstrip(".") or type(exc).__name__) from None


def assertion_needs_fetch(token: str | None, edge: EdgeJwt) -> bool:
    """True when verifying ``token`` may wait on the JWKS URL (so it runs off the event loop)."""
    if not token or edge.jwks is None or not edge.jwks.remote:
        return False
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return False
    return header.get("alg") in KEY_ALGORITHMS and edge.jwks.would_fetch(header.get("kid"))


def verify_assertion(token: str, edge: EdgeJwt) -> dict[str, Any]:
    """Claims of the edge JWT; raises ApiError(401) unless it verifies (503: JWKS unreachable).

    The token's ``alg`` must be one configured (never ``none``); HS* verifies with the
    shared secret only, the others with the JWKS key its ``kid`` names, whose type must
    match (so a public key can never serve as an HMAC secret). PyJWT checks the
    signature, ``exp`` (required), ``nbf``, ``iat``, and ``aud``/``iss`` when configured.
    Before it, the token must be three canonical base64url segments; after it, the time
    claims must be JSON numbers (PyJWT would take ``"exp": "9999999999"``).
    """
    segments = token.split(".")
    if len(segments) != 3 or not all(_canonical_base64url(s) for s in segments):
        raise invalid_assertion("it is not three unpadded base64url segments")
    header = _header(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in edge.accepted:
        raise invalid_assertion(f"the algorithm {alg!r} is not accepted (accepted: {', '.join(edge.accepted)})")
    if alg in SECRET_ALGORITHMS:
        key: Any = edge.key
    else:
        assert edge.jwks is not None  # check_algorithms: key algorithms need a JWKS
        key = edge.jwks.key(header.get("kid"), alg).key
    required = ["exp", *(["aud"] if edge.audience else []), *(["iss"] if edge.issuer else [])]
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=edge.audience or None,
            issuer=edge.issuer or None,
            options={"require": required, "verify_aud": bool(edge.audience)},
        )
    except jwt.ExpiredSignatureError:
        raise ApiError(401, "The edge assertion has expired.", "edge_assertion_expired") from None
    except jwt.PyJWTError as exc:
        raise invalid_assertion(str(exc).rstrip(".") or type(exc).__name__) from None
    for name in _NUMERIC_DATES:
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise invalid_assertion(f"{name} must be a number of seconds")
    issued = min(float(claims.get("iat", time.time())), time.time())
    if float(claims["exp"]) - issued > edge.max_lifetime:
        raise invalid_assertion(f"it is valid for longer than the {edge.max_lifetime:g} s an assertion may be (exp - iat)")
    return claims


def identity_key(email: str) -> str:
    """The identity an email names: NFKC-normalised, then case-folded (never ``.lower()``)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", email).casefold())


def same_identity(asserted: str, claimed: str) -> bool:
    """Whether the assertion's email and the header's name one identity, differing in case
    at most: both must already be NFKC-normal (so a look-alike such as the Kelvin sign
    for ``K`` is refused, not folded into someone else's name)."""
    return (
        unicodedata.is_normalized("NFKC", asserted)
        and unicodedata.is_normalized("NFKC", claimed)
        and asserted.casefold() == claimed.casefold()
    )


def sign_assertion(claims: dict[str, Any], key: Any, algorithm: str = EDGE_JWT_ALGORITHM, kid: str = "") -> str:
    """An edge JWT (what the edge proxy sends; used by tests and the CLI)."""
    return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid} if kid else None)


def asserted_groups(claims: dict[str, Any]) -> tuple[str, ...]:
    """The assertion's ``groups``: a comma-separated string or a list of strings."""
    asserted = claims.get("groups", [])
    if isinstance(asserted, str):
        return split_groups(asserted)
    if isinstance(asserted, list) and all(isinstance(g, str) for g in asserted):
        return tuple(asserted)
    raise invalid_assertion("groups must be a string or a list of strings")


def split_groups(raw: str) -> tuple[str, ...]:
    return tuple(g.strip() for g in raw.split(",") if g.strip())


async def resolve_principal_async(email: str | None, groups: str | None, assertion: str | None, edge: EdgeJwt) -> Principal:
    """``resolve_principal`` from async code: in a worker thread only when the JWKS URL may be asked."""
    if assertion_needs_fetch(assertion, edge):
        return await anyio.to_thread.run_sync(resolve_principal, email, groups, assertion, edge)
    return resolve_principal(email, groups, assertion, edge)


def resolve_principal(email: str | None, groups: str | None, assertion: str | None, edge: EdgeJwt) -> Principal:
    """C2: no email claim -> 401; with a JWT key or JWKS set the claims must verify and match."""
    email = (email or "").strip()
    if not email:
        raise ApiError(401, "No edge email claim on the request.", "unauthenticated")
    if not unicodedata.is_normalized("NFKC", email):
        raise ApiError(401, "The edge email claim is not in Unicode normal form (NFKC).", "identity_not_normalized")
    group_paths = split_groups(groups or "")
    expires_at = None
    if edge.enabled:
        if not assertion:
            raise ApiError(401, "The edge assertion is required.", "edge_assertion_missing")
        claims = verify_assertion(assertion, edge)
        asserted = claims.get("email", "")
        if not isinstance(asserted, str) or not same_identity(asserted, email):
            raise ApiError(401, "The email claim does not match the edge assertion.", "edge_assertion_mismatch")
        if set(group_paths) - set(asserted_groups(claims)):
            raise ApiError(401, "The group claims do not match the edge assertion.", "edge_assertion_mismatch")
        expires_at = float(claims["exp"])
    return Principal(subject_key=identity_key(email), email=email, groups=group_paths, expires_at=expires_at)


EmailHeader = Annotated[str | None, HeaderParameter(name=EMAIL_HEADER, required=False)]
GroupsHeader = Annotated[str | None, HeaderParameter(name=GROUPS_HEADER, required=False)]
AssertionHeader = Annotated[str | None, HeaderParameter(name=ASSERTION_HEADER, required=False)]


# The pattern is documented here and checked by ``provide_tenant`` (which names the header
# in ``loc`` as sent, where Litestar's own check would name the Python parameter).
_TENANT_DOC: dict[str, Any] = {"description": "the tenant (C1, C12)", "schema_extra": {"pattern": ID_PATTERN}}
TenantQuery = Annotated[str | None, QueryParameter(name="tenant_id", required=False, **_TENANT_DOC)]
TenantHeader = Annotated[str | None, HeaderParameter(name=TENANT_HEADER, required=False, **_TENANT_DOC)]


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

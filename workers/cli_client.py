"""The CLI's HTTP client of a running service, carrying dev edge claims."""

from __future__ import annotations

import time
from typing import Any

import httpx

from workers.settings import Settings

OPERATOR = "operator@squadops.local"
SUPER_ADMIN = "/org/platform/roles/super_admin"


def client(settings: Settings, email: str = OPERATOR, groups: str = SUPER_ADMIN) -> httpx.Client:
    """An HTTP client of the service carrying dev edge claims (operator by default)."""
    headers = {"x-edge-claim-email": email, "x-edge-claim-groups": groups}
    if settings.edge_jwt_key:
        from api.auth import sign_assertion

        listed = [g.strip() for g in groups.split(",") if g.strip()]
        claims: dict[str, Any] = {"email": email, "groups": listed, "exp": int(time.time()) + 3600}
        if settings.edge_jwt_audience:
            claims["aud"] = settings.edge_jwt_audience
        if settings.edge_jwt_issuer:
            claims["iss"] = settings.edge_jwt_issuer
        headers["x-edge-jwt-assertion"] = sign_assertion(claims, settings.edge_jwt_key)
    return httpx.Client(base_url=settings.base_url, headers=headers, timeout=30)

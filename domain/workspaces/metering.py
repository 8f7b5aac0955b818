"""Per-employee model metering: workspace-bound meter tokens, the upstream port, the counts.

The meter is an OpenAI-compatible endpoint per employee (``/v1/meter/<employee>/v1``). A
workspace's token is bound to its scope and employee and is given to the workspace at
runtime by the controller (never baked into an image or the provider definition). Each
forwarded request adds its tokens and one request to the employee's counts; the counts are
exposed as ``<prefix>_tokens`` / ``<prefix>_requests`` (see ``material.metric_names``).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from typing import Any, Protocol

from domain.shared.errors import DomainError, Forbidden

DEFAULT_TENANT = "default"


class Unauthorized(DomainError):
    code = "meter_token_invalid"


class MeterTokens:
    """Issues and checks meter tokens under the proxy client key.

    ``<employee>.<scope>.<mac>`` for the default tenant, ``<employee>.<scope>.<tenant hex>.<mac>``
    for another: a token names the one workspace (tenant and scope) it was bound to."""

    def __init__(self, client_key: str) -> None:
        self._key = client_key.encode()

    def _mac(self, employee_slug: str, scope: str, tenant: str) -> str:
        bound = f"{employee_slug}|{scope}" if tenant == DEFAULT_TENANT else f"{employee_slug}|{scope}|{tenant}"
        return hmac.new(self._key, bound.encode(), hashlib.sha256).hexdigest()[:32]

    def issue(self, employee_slug: str, scope: str, tenant: str = DEFAULT_TENANT) -> str:
        if not self._key:
            raise Forbidden("No model-proxy client key to sign meter tokens.", code="dev_workspace_proxy_client_token_missing")
        mac = self._mac(employee_slug, scope, tenant)
        if tenant == DEFAULT_TENANT:
            return f"{employee_slug}.{scope}.{mac}"
        return f"{employee_slug}.{scope}.{tenant.encode().hex()}.{mac}"

    def binding(self, token: str, employee_slug: str) -> tuple[str, str]:
        """``(tenant, scope)`` of the workspace the token is bound to, when it is valid for
        this employee."""
        parts = token.split(".")
        tenant = DEFAULT_TENANT
        if len(parts) == 4:
            try:
                tenant = bytes.fromhex(parts[2]).decode()
            except ValueError:
                tenant = ""
            parts = [parts[0], parts[1], parts[3]]
        if len(parts) != 3 or not tenant:
            raise Unauthorized("The meter token is missing or not valid for this employee.")
        employee, scope, mac = parts
        if not (self._key and employee == employee_slug and scope
                and hmac.compare_digest(mac, self._mac(employee, scope, tenant))):
            raise Unauthorized("The meter token is missing or not valid for this employee.")
        return tenant, scope

    def verify(self, token: str, employee_slug: str) -> str:
        """The workspace scope the token is bound to, when it is valid for this employee."""
        return self.binding(token, employee_slug)[1]


class ModelProxy(Protocol):
    """The central model-routing proxy: answers a chat completion with its token usage."""

    def complete(self, request: dict[str, Any]) -> dict[str, Any]: ...


def usage_tokens(response: dict[str, Any]) -> int:
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int) and total >= 0:
        return total
    parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    return sum(p for p in parts if isinstance(p, int) and p >= 0)


class UsageMeter:
    """Token and request counts per employee (by whole subject key, never the slug);
    safe under concurrent requests."""

    def __init__(self, upstream: ModelProxy) -> None:
        self.upstream = upstream
        self._lock = threading.Lock()
        self._tokens: dict[str, int] = {}
        self._requests: dict[str, int] = {}

    def forward(self, employee: str, request: dict[str, Any]) -> dict[str, Any]:
        response = self.upstream.complete(request)
        tokens = usage_tokens(response)
        with self._lock:
            self._tokens[employee] = self._tokens.get(employee, 0) + tokens
            self._requests[employee] = self._requests.get(employee, 0) + 1
        return response

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self._tokens), dict(self._requests)

"""Model metering: workspace-bound meter tokens, the meter that records each request, the counts.

A workspace's meter endpoint (``/v1/meter/<employee>/v1``) is the model proxy under the
workspace's token, bound to its scope and employee and given to the workspace at runtime
by the controller (never baked into an image or the provider definition). Every request
the proxy finishes is priced and recorded as one ``ModelUsage`` event (the read models of
cost per agent, run, project and employee fold them), and adds its tokens and one request
to the counts exposed as ``<prefix>_tokens`` / ``<prefix>_requests`` (``material.metric_names``).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass
from typing import Any

from domain.shared.errors import DomainError, Forbidden
from domain.workspaces.model_routes import ModelRoutes
from domain.workspaces.usage import ModelUsage, Tally

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


class UsageCounts:
    """Tokens and requests per (employee, run, agent) since the process started: the
    Prometheus counters (by whole subject key, never the slug); safe under concurrent requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str, str], int] = {}
        self._requests: dict[tuple[str, str, str], int] = {}

    def add(self, employee: str, run_id: str, agent_id: str, tokens: int, requests: int) -> None:
        key = (employee, run_id, agent_id)
        with self._lock:
            self._tokens[key] = self._tokens.get(key, 0) + tokens
            self._requests[key] = self._requests.get(key, 0) + requests

    def snapshot(self) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str, str], int]]:
        with self._lock:
            return dict(self._tokens), dict(self._requests)


@dataclass(frozen=True)
class Metered:
    """Who a proxied request is metered to."""

    tenant: str
    caller: str  # "agent" or "workspace"
    employee: str
    project_slug: str = ""
    run_id: str = ""
    session_id: str = ""
    agent_id: str = ""
    workspace_scope: str = ""


class Meter:
    """Prices a finished request, records it as a ``ModelUsage`` event and counts it."""

    def __init__(self, store: Any, routes: ModelRoutes, counts: UsageCounts | None = None) -> None:
        self.store, self.routes = store, routes
        self.counts = counts or UsageCounts()

    def record(self, who: Metered, tally: Tally, *, request_id: str, at: str, alias: str, upstream: str,
               upstream_model: str, status: int, duration_ms: int, partial: bool) -> ModelUsage:
        model = tally.model or upstream_model
        cost, priced = self.routes.cost(model, tally.tokens_in, tally.cached_tokens, tally.tokens_out)
        usage = ModelUsage(
            at=at, tenant=who.tenant, request_id=request_id, caller=who.caller, employee=who.employee,
            project_slug=who.project_slug, run_id=who.run_id, session_id=who.session_id, agent_id=who.agent_id,
            workspace_scope=who.workspace_scope, api=tally.api, alias=alias, upstream=upstream,
            upstream_model=model, status=status, tokens_in=tally.tokens_in, cached_tokens=tally.cached_tokens,
            tokens_out=tally.tokens_out, requests=1, duration_ms=duration_ms, cost_usd=cost, priced=priced,
            partial=partial,
        )
        self.store.save(usage)
        self.counts.add(who.employee, who.run_id, who.agent_id, tally.tokens_in + tally.tokens_out, 1)
        return usage

"""Model-proxy tokens of agent processes: who is calling the proxy (an HMAC over its ids).

Signed like the agent's MCP token (``domain.shared.agent_tokens``) with the same key, under
its own version tag so neither token passes for the other. It names the tenant, project,
run, session and agent, and carries its expiry (seconds since the epoch): the proxy meters
each request to exactly these ids and refuses a token past its expiry.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from domain.shared.ids import is_valid_id

VERSION = "sqp1"


@dataclass(frozen=True)
class ProxyCaller:
    tenant: str
    project_slug: str
    run_id: str
    session_id: str
    agent_id: str

    def ids(self) -> tuple[str, ...]:
        return (self.tenant, self.project_slug, self.run_id, self.session_id, self.agent_id)


def _signature(key: str, body: str) -> str:
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()[:40]


def sign(key: str, caller: ProxyCaller, expires_at: int) -> str:
    if not key:
        raise ValueError("a model-proxy token needs a signing key")
    body = ".".join((VERSION, *caller.ids(), str(int(expires_at))))
    return f"{body}.{_signature(key, body)}"


def verify(key: str, token: str, now: float) -> ProxyCaller | None:
    """The caller a token names, or None when it is malformed, forged or expired."""
    parts = token.split(".")
    if not key or len(parts) != 8 or parts[0] != VERSION or not all(is_valid_id(p) for p in parts[1:6]):
        return None
    if not parts[6].isdigit():
        return None
    body = ".".join(parts[:7])
    if not hmac.compare_digest(_signature(key, body), parts[7]):
        return None
    if int(parts[6]) <= now:
        return None
    return ProxyCaller(*parts[1:6])
